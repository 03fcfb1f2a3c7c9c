"""The model registry (flows/models.py) and `rlvrflow models`: register, promote, rollback, torn and
concurrent appends."""

import json
import multiprocessing
from pathlib import Path

import pytest

from rlvrflow.flows.cli import main
from rlvrflow.flows.models import Registry, RegistryError


def test_register_promote_rollback(fake_run, tmp_path):
    reg = Registry(tmp_path)
    first = reg.register(fake_run(tmp_path, "night1", 0.4))
    assert reg.champion() is None and [m["id"] for m in reg.models()] == ["night1"]
    exported = Path(first["path"])
    assert (exported / "model.safetensors").read_bytes() == b"night1" and not (exported / "state.pt").exists()
    assert first["score"] == 0.4 and first["data"] == {"prepare": "pnight1", "attach": "anight1"}
    assert first["spec_sha256"] and first["gain"]["points"] == 5.0

    reg.promote("night1", "first model")
    reg.register(fake_run(tmp_path, "night2", 0.5))
    reg.promote("night2", "beats night1")
    assert reg.champion()["id"] == "night2"
    assert [m["champion"] for m in reg.models()] == [False, True]

    back = reg.rollback("night2 answers in English")
    assert back["id"] == "night1" and reg.champion()["id"] == "night1"
    events = [e["event"] for e in reg.events()]
    assert events == ["register", "promote", "register", "promote", "rollback"]
    with pytest.raises(RegistryError, match="no earlier champion"):
        reg.rollback("again")
    with pytest.raises(RegistryError, match="already registered"):
        reg.register(tmp_path / "runs" / "night1")
    with pytest.raises(RegistryError, match="no registered model 'night9'.*night1, night2"):
        reg.promote("night9", "typo")
    with pytest.raises(RegistryError, match="already the champion"):
        reg.promote("night1", "twice")


def test_a_torn_last_line_is_not_an_event_and_the_next_append_drops_it(fake_run, tmp_path):
    reg = Registry(tmp_path)
    reg.register(fake_run(tmp_path, "night1", 0.4))
    with reg.events_path.open("a") as fh:
        fh.write('{"event": "promote", "id": "nig')  # a writer killed mid-line
    assert [e["event"] for e in reg.events()] == ["register"] and reg.champion() is None
    reg.promote("night1", "after the crash")
    assert reg.champion()["id"] == "night1"
    lines = reg.events_path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["reason"] == "after the crash"
    # a damaged line that is not the last is named, never skipped
    reg.events_path.write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    with pytest.raises(RegistryError, match=r"events.jsonl:2: not a JSON event"):
        reg.events()


def _promote_many(args):
    out, worker = args
    reg = Registry(out)
    for i in range(20):
        with reg._locked():  # as register, promote and rollback write
            reg._write({"event": "note", "worker": worker, "i": i, "pad": "x" * 5000})


def test_concurrent_appends_never_interleave(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_promote_many, [(tmp_path, w) for w in range(4)])
    events = Registry(tmp_path).events()
    assert len(events) == 80 and {(e["worker"], e["i"]) for e in events} == {
        (w, i) for w in range(4) for i in range(20)
    }


def test_register_refuses_a_run_without_a_report_or_model(fake_run, tmp_path):
    reg = Registry(tmp_path)
    (tmp_path / "runs" / "half").mkdir(parents=True)
    with pytest.raises(RegistryError, match="no report.json"):
        reg.register(tmp_path / "runs" / "half")
    run = fake_run(tmp_path, "gone", 0.3)
    report = json.loads((run / "report.json").read_text())
    for key in ("best_checkpoint", "checkpoint"):
        report[key] = str(tmp_path / "nowhere")
    (run / "report.json").write_text(json.dumps(report))
    with pytest.raises(RegistryError, match="is gone"):
        reg.register(run)
    assert reg.models() == []


def test_models_cli(fake_run, tmp_path, capsys):
    for night, score in (("night1", 0.4), ("night2", 0.5)):
        assert main(["models", "--out", str(tmp_path), "register", str(fake_run(tmp_path, night, score))]) == 0
    assert main(["models", "--out", str(tmp_path), "promote", "night1", "--reason", "first"]) == 0
    assert main(["models", "--out", str(tmp_path), "promote", "night2", "--reason", "better"]) == 0
    capsys.readouterr()
    assert main(["models", "--out", str(tmp_path), "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith("  night1") and listed[1].startswith("* night2")
    assert "pass_at_1_greedy 50.0%" in listed[1] and "+5.0 points over SFT [+2.0, +8.0]" in listed[1]
    assert main(["models", "--out", str(tmp_path), "rollback", "--reason", "bad answers"]) == 0
    assert "champion again: * night1" in capsys.readouterr().out
    assert main(["models", "--out", str(tmp_path), "show"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "night1"
    assert main(["models", "--out", str(tmp_path), "show", "night7"]) == 2
    assert "no registered model 'night7'" in capsys.readouterr().err
    assert main(["models", "--out", str(tmp_path / "empty"), "show"]) == 2
    assert "no champion" in capsys.readouterr().err


def _promote_first(args):
    out, model_id = args
    from rlvrflow.flows.models import ChampionChanged

    try:
        Registry(out).promote(model_id, "first", expected_champion=None)
        return model_id
    except ChampionChanged:
        return None


def test_of_two_runs_that_saw_no_champion_only_one_promotes(fake_run, tmp_path):
    reg = Registry(tmp_path)
    for night in ("night1", "night2", "night3", "night4"):
        reg.register(fake_run(tmp_path, night, 0.4))
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        won = [m for m in pool.map(_promote_first, [(tmp_path, f"night{i}") for i in range(1, 5)]) if m]
    assert len(won) == 1 and reg.champion()["id"] == won[0]
    assert [e["event"] for e in reg.events()].count("promote") == 1


def test_register_needs_the_runs_data_stages(fake_run, tmp_path):
    import shutil

    run = fake_run(tmp_path, "night1", 0.4)
    shutil.rmtree(tmp_path / "stages" / "attach")
    with pytest.raises(RegistryError, match="prepare and attach stage folders are gone"):
        Registry(tmp_path).register(run)
