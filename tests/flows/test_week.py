"""A week of scheduled retraining in one test: each night a new log file lands beside the old ones and
`rlvrflow run` runs the whole chain on the same --out. The first night's model becomes champion; a
normal night is compared with it on its own held-out prompts; a night whose new file broke its field
mapping, and a night whose answers moved to another unit, stop before training; a rollback restores
the previous champion. Every night continues from the champion (`training.start_from: champion`)."""
import json
from pathlib import Path

import pytest

from rlvrflow.flows.cli import main
from rlvrflow.flows.models import Registry


def write_rows(path: Path, start: int, n: int = 40, scale: int = 1, answer_field: str = "a") -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(start, start + n):
            a, b = i % 17 + 2, i % 11 + 3
            gold = (a + b) * scale
            fh.write(json.dumps({"qid": f"q{i:04d}", "q": f"What is {a} plus {b} times {scale} (case {i})?",
                                 answer_field: str(gold), "s": f"{a} + {b} = {a + b}. Answer: {gold}"}) + "\n")


def run_night(spec: Path, out: Path, capsys) -> tuple[int, str]:
    # each night continues from the model in use (the first from the spec's own model)
    code = main(["run", str(spec), "--out", str(out), "--smoke", "--set", "training.start_from=champion"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.slow
def test_a_week_of_nights(prefect_harness, toy_spec, tmp_path, capsys, read_artifact):
    out, raw = tmp_path / "out", toy_spec.parent / "raw"
    registry = Registry(out)

    # night 1: the first model is the champion
    code, log = run_night(toy_spec, out, capsys)
    assert code == 0, log
    (night1,) = registry.models()
    assert night1["champion"] and (Path(night1["path"]) / "data_profile.json").is_file()

    # night 2: a new day's file; the data check passes and says what is new, the model meets the champion
    write_rows(raw / "part-1.jsonl", start=40)
    code, log = run_night(toy_spec, out, capsys)
    assert code == 0, log
    assert f"training.start_from: champion: this run starts from {night1['id']}" in log
    drift = json.loads(next((out / "stages" / "drift").glob("*/drift.json")).read_text())
    assert drift["failed"] == [] and drift["changes"]["files_added"] == ["raw/part-1.jsonl"]
    assert drift["scope"] == "40 rows from 1 new or changed file(s)"
    assert drift["changes"]["rows"] == {"then": 40, "now": 80}
    assert "rejects_by_reason" in drift["changes"]
    assert "tonight's rows against the champion's" in read_artifact("toy-drift").description
    report = json.loads(Path(json.loads((out / "latest.json").read_text())["report"]).read_text())
    compared = report["champion_comparison"]
    night2 = registry.models()[-1]
    assert compared["champion"]["model"] == night1["path"] and compared["gain"]["prompts"] > 0
    # the rule's decision is what the registry did, and report.json says why
    assert night2["champion"] == (report["promotion"]["verdict"] == "promoted") and report["promotion"]["reasons"]
    champion_after_night2 = registry.champion()["id"]

    # night 3: the new file's answers sit under another field: ingest rejects its rows, the run stops
    write_rows(raw / "part-2.jsonl", start=80, answer_field="answer")
    stages_before = {p.name for p in (out / "stages" / "sft").iterdir()}
    code, log = run_night(toy_spec, out, capsys)
    assert code == 1 and "drifted from the champion's data; no training ran" in log
    assert "file raw/part-2.jsonl: at most 50% of its rows lost before training (40 of 40)" in log
    assert {p.name for p in (out / "stages" / "sft").iterdir()} == stages_before  # nothing trained
    assert len(registry.models()) == 2 and registry.champion()["id"] == champion_after_night2
    (raw / "part-2.jsonl").unlink()

    # night 4: answers in hundredths (another unit) from tonight's file: out of the champion's range
    write_rows(raw / "part-3.jsonl", start=120, n=60, scale=100)
    code, log = run_night(toy_spec, out, capsys)
    assert code == 1 and "category arithmetic: numeric references within" in log
    assert len(registry.models()) == 2
    (raw / "part-3.jsonl").unlink()

    # a promotion by hand, then the rollback the owner runs after a bad day
    if champion_after_night2 == night1["id"]:
        assert main(["models", "--out", str(out), "promote", night2["id"], "--reason", "reviewed"]) == 0
    assert main(["models", "--out", str(out), "rollback", "--reason", "answers went wrong in production"]) == 0
    assert registry.champion()["id"] == night1["id"]
    assert [e["event"] for e in registry.events()][-1] == "rollback"
