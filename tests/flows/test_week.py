"""A week of scheduled retraining in one test, on the retail sample: each night the sample generator
writes a new day's ticket log beside the old ones (`generate.py --day N`) and `rlvrflow run` runs the
whole chain on the same --out, continuing from the champion (`training.start_from: champion`).

Night 1 trains with the smoke budget (4 SFT steps: a weak model) and becomes champion. Night 2 trains
on its new day with a budget that learns (150 SFT steps) and is promoted by the flow's rule on the
same held-out prompts. Night 3's answers moved to another unit and night 4's log broke its field
mapping: both stop before training. A rollback restores the previous champion."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvrflow.flows.cli import main
from rlvrflow.flows.models import Registry

REPO = Path(__file__).resolve().parents[2]
GENERATE = REPO / "examples" / "retail" / "generate.py"
WORKED = "0.3"  # enough worked replies that SFT on a 200-row budget learns something measurable
# every night: the smoke budget, measured on 200 rows, 60 held-out prompts, whole answers
NIGHT = [
    "--smoke",
    "--set",
    "training.start_from=champion",
    "--set",
    "orchestration.max_rows=200",
    "--set",
    "eval.max_prompts=60",
    "--set",
    "generation.max_new_tokens=40",
]


def sample(root: Path) -> Path:
    """The retail spec with a 600-row sample, shop.db and the eval sets beside it (as `make sample`)."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "retail" / "spec.yaml", root / "spec.yaml")
    generate(root, "--rows", "600")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "retail" / "eval_sets.py"),
            "--out",
            str(root / "eval"),
            "--seed",
            "0",
        ],
        check=True,
        capture_output=True,
    )
    return root / "spec.yaml"


def generate(root: Path, *args: str) -> None:
    subprocess.run(
        [
            sys.executable,
            str(GENERATE),
            "--out",
            str(root / "raw"),
            "--seed",
            "0",
            "--db",
            str(root / "shop.db"),
            "--worked-fraction",
            WORKED,
            *args,
        ],
        check=True,
        capture_output=True,
    )


def run_night(spec: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["run", str(spec), "--out", str(out), *NIGHT, *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def latest_report(out: Path) -> dict:
    return json.loads(Path(json.loads((out / "latest.json").read_text())["report"]).read_text())


@pytest.mark.slow
def test_a_week_of_nights(prefect_harness, tmp_path, capsys, read_artifact):
    spec, out = sample(tmp_path / "retail"), tmp_path / "nightly"
    root, registry = spec.parent, Registry(out)

    # night 1: a weak first model is the champion
    code, log = run_night(spec, out, capsys)
    assert code == 0, log
    (night1,) = registry.models()
    assert night1["champion"] and (Path(night1["path"]) / "data_profile.json").is_file()

    # night 2: a new day's log; the data check passes and says what is new; a model that learned is promoted
    generate(root, "--day", "1")
    code, log = run_night(spec, out, capsys, "--set", "training.sft.max_steps=150")
    assert code == 0, log
    assert f"training.start_from: champion: this run starts from {night1['id']}" in log
    drift = json.loads(next((out / "stages" / "drift").glob("*/drift.json")).read_text())
    assert drift["failed"] == [] and drift["changes"]["files_added"] == ["raw/tickets_2026-04-01.jsonl"]
    assert drift["scope"].endswith("rows from 1 new or changed file(s), against the champion's rows of source tickets")
    assert drift["changes"]["rows"]["now"] > drift["changes"]["rows"]["then"]
    assert "tonight's rows against the champion's" in read_artifact("retail-drift").description
    report = latest_report(out)
    night2 = registry.models()[-1]
    compared, promotion = report["champion_comparison"], report["promotion"]
    assert compared["champion"]["model"] == night1["path"] and compared["gain"]["prompts"] == 60
    assert promotion["verdict"] == "promoted", promotion["reasons"]
    assert compared["gain"]["low"] > 0 and promotion["reasons"][0].startswith(
        f"gain {compared['gain']['points']:+.1f} points ({compared['gain']['low']:+.1f} to "
    )
    assert registry.champion()["id"] == night2["id"] and promotion["champion_before"] == night1["id"]
    promoted = [e for e in registry.events() if e["event"] == "promote"][-1]
    assert promoted["id"] == night2["id"] and promoted["reason"] == "; ".join(promotion["reasons"])
    assert "promoted" in read_artifact("retail-promotion").data

    # night 3: the day's answers logged in fen, not yuan: out of the champion's range, the run stops
    generate(root, "--day", "2", "--shift-answers", "100")
    stages_before = {p.name for p in (out / "stages" / "sft").iterdir()}
    code, log = run_night(spec, out, capsys)
    assert code == 1 and "drifted from the champion's data; no training ran" in log
    assert "category arithmetic: numeric references within" in log
    assert {p.name for p in (out / "stages" / "sft").iterdir()} == stages_before  # nothing trained
    assert len(registry.models()) == 2 and registry.champion()["id"] == night2["id"]
    (root / "raw" / "tickets_2026-04-02.jsonl").unlink()

    # night 4: the day's export logs the answer under another name: ingest loses its rows, the run stops
    generate(root, "--day", "3", "--rename-field", "answer=resolution")
    code, log = run_night(spec, out, capsys)
    assert code == 1 and "drifted from the champion's data; no training ran" in log
    assert "file raw/tickets_2026-04-03.jsonl: at most 50% of its rows lost before training (206 of 206)" in log
    assert len(registry.models()) == 2
    (root / "raw" / "tickets_2026-04-03.jsonl").unlink()

    # the rollback the owner runs after a bad day in production
    assert main(["models", "--out", str(out), "rollback", "--reason", "answers went wrong in production"]) == 0
    assert registry.champion()["id"] == night1["id"]
    assert [e["event"] for e in registry.events()][-1] == "rollback"
