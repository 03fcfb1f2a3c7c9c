"""The rlvrflow CLI: help, user errors without tracebacks, clean, verify, and `run` end to end.

`run` is the README's main command: the whole retrain flow on Prefect's API (here the test harness),
twice on a toy domain; the second run reuses every stage and prints both runs' times.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvrflow.flows.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_help_documents_every_command_with_examples():
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from rlvrflow.flows.cli import main; sys.exit(main())", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0
    for command in ("spec-check", "clean", "verify", "tier", "run"):
        assert f"  {command} " in done.stdout and f"rlvrflow {command} " in done.stdout
    assert "exit codes" in done.stdout


def test_bad_spec_is_one_message_and_exit_2(tmp_path, toy_spec, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(toy_spec.read_text().replace("format: jsonl", "format: xml"))
    for argv in (["spec-check", str(bad)], ["run", str(bad), "--out", str(tmp_path / "o")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "sources[0].format" in err and "allowed values" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # a bad spec fails before anything runs

    assert main(["run", str(toy_spec), "--out", str(tmp_path / "o"), "--set", "training.sft.max_steps=-3"]) == 2
    err = capsys.readouterr().err
    assert "training.sft.max_steps" in err and "(got -3)" in err and "Traceback" not in err
    assert main(["run", str(toy_spec), "--out", str(tmp_path / "o"), "--set", "training.sft.max_steps"]) == 2
    assert "expected FIELD=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_set_creates_an_unset_section_and_bad_paths_are_usage_errors(tmp_path, toy_spec, capsys):
    from rlvrflow.flows.common import with_overrides
    from rlvrflow.flows.spec import SpecError, load_spec

    spec = load_spec(toy_spec)
    assert spec.training.lora is None  # the section a user trying LoRA sets first
    assert with_overrides(spec, {"training.lora.r": 8}).training.lora.r == 8
    for dotted, named in (
        ("training.sft.max_steps.x", "training.sft.max_steps is a value"),
        ("training..steps", "dotted path"),
        ("training.no_such_field", "no_such_field"),
    ):
        with pytest.raises(SpecError, match=named.replace(".", r"\.")):
            with_overrides(spec, {dotted: 1})
        assert main(["run", str(toy_spec), "--out", str(tmp_path / "o"), "--set", f"{dotted}=1"]) == 2
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_clean_prints_counts_and_failed_validation_exits_1(tmp_path, toy_spec, capsys):
    assert main(["clean", str(toy_spec), "--out", str(tmp_path / "clean")]) == 0
    out = capsys.readouterr().out
    assert "ingest" in out and "kept" in out and (tmp_path / "clean" / "clean.parquet").is_file()

    toy_spec.write_text(toy_spec.read_text().replace("validation:\n", "validation:\n  min_rows: 1000\n"))
    assert main(["clean", str(toy_spec), "--out", str(tmp_path / "clean2")]) == 1
    err = capsys.readouterr().err
    assert "validation failed" in err and "Traceback" not in err


def test_verify_scores_a_file_and_rejects_bad_params(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"response": "Answer: 42", "reference": "42"})
        + "\n"
        + json.dumps({"response": "Answer: 41", "reference": "42"})
        + "\n"
    )
    dst = tmp_path / "out.jsonl"
    assert main(["verify", "--verifier", "math", "--workers", "1", str(src), str(dst)]) == 0
    scores = [json.loads(line)["score"] for line in dst.read_text().splitlines()]
    assert scores == [1.0, 0.0]
    assert main(["verify", "--verifier", "math", "--params", "[1]", str(src), str(dst)]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


def test_run_missing_sources_fails_with_the_stage_and_fix(prefect_harness, toy_spec, tmp_path, capsys):
    for f in (toy_spec.parent / "raw").iterdir():
        f.unlink()
    assert main(["run", str(toy_spec), "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert "retrain FAILED for toy" in out and "stage 'prepare' failed" in out and "matches no file" in out
    assert "Traceback" not in out


def test_a_prefect_server_that_does_not_start_in_time_is_transient_with_the_fix(
    toy_spec, tmp_path, capsys, monkeypatch
):
    """Prefect's own RuntimeError on a slow ephemeral-server start (a busy machine) is not a bug: exit 75,
    the wait it gave up after, what to set, and no traceback."""
    import rlvrflow.flows.retrain as retrain_module
    from rlvrflow.flows import run_in_process
    from rlvrflow.flows.run_in_process import EPHEMERAL_TIMEOUT

    def slow_server(**kwargs):
        raise RuntimeError(EPHEMERAL_TIMEOUT + ".")

    monkeypatch.setattr(retrain_module, "retrain", slow_server)
    # Prefect's settings stay out of the process environment the later tests see
    monkeypatch.setattr(run_in_process, "prefect_environment", lambda out: None)
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    assert main(["run", str(toy_spec), "--out", str(tmp_path / "out")]) == 75
    err = capsys.readouterr().err
    assert "did not answer within 120 s" in err and "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=600" in err
    assert "Traceback" not in err and "bug" not in err

    def crashed(**kwargs):
        raise RuntimeError(EPHEMERAL_TIMEOUT + ". Ephemeral server process exited with code 1. stderr: no such table")

    def other(**kwargs):
        raise RuntimeError("something else")

    # a server that died is not a slow one, and any other RuntimeError is not either: bugs, with the traceback
    for fails in (crashed, other):
        monkeypatch.setattr(retrain_module, "retrain", fails)
        assert main(["run", str(toy_spec), "--out", str(tmp_path / "out")]) == 70
        assert "Traceback" in capsys.readouterr().err


@pytest.mark.slow
def test_run_twice_second_reuses_every_stage(prefect_harness, toy_spec, tmp_path, capsys, read_artifact, read_logs):
    out = tmp_path / "out"
    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 0
    first = capsys.readouterr().out
    assert "0/7 stages reused" in first and "previous run" not in first
    latest = json.loads((out / "latest.json").read_text())
    report = json.loads(Path(latest["report"]).read_text())
    assert Path(report["checkpoint"]).is_dir() and report["domain"] == "toy"
    assert json.loads((Path(latest["run_dir"]) / "run.json").read_text()) == latest
    assert all(st["reason"] == "first build of this stage here" for st in report["stages"].values())
    # the run's best model is in the registry, exported as a plain model folder, and the first is champion
    from rlvrflow.flows.models import Registry

    registered = Registry(out).models()
    assert [m["id"] for m in registered] == [Path(latest["run_dir"]).name]
    assert (Path(registered[0]["path"]) / "config.json").is_file() and registered[0]["champion"]
    assert f"registered: {registered[0]['id']}" in first and "(promoted: the first registered model" in first

    # the UI's artifacts: counts, rejects, GX summary, tiers, eval table, reward curve, training progress
    def table(key: str) -> list[dict]:
        data = read_artifact(key).data
        return json.loads(data) if isinstance(data, str) else data

    assert "Great Expectations: passed" in read_artifact("toy-validation").data
    assert {r["stage"] for r in table("toy-stage-counts")} >= {"prepare", "attach", "grpo"}
    assert table("toy-tiers") and read_artifact("toy-rejects") is not None
    evals = table("toy-eval")
    assert evals[0]["model"] == "sft" and len(evals) >= 2 and "delta_pass_at_1_greedy" in evals[1]
    assert "GRPO reward_mean" in read_artifact("toy-reward-curve").data
    for stage in ("prepare", "attach", "split", "sft", "tier", "grpo", "evaluate"):  # a progress bar per stage
        assert read_artifact(f"toy-{stage}-progress").data == 100.0, stage
    figures = read_artifact("toy-figures").data
    # the figures travel inside the artifact (a browser refuses file:// links to the worker's disk)
    import base64
    import re

    images = re.findall(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", figures)
    assert len(images) == 2 and "file://" not in figures and "curves.png" in figures
    assert all(base64.b64decode(image).startswith(b"\x89PNG\r\n\x1a\n") for image in images)
    assert report["tier_histogram"].endswith("tier_histogram.png") and report["counts"]["tier"]["tiers"]
    # the libraries' own lines reach the run's logs (the UI's log tab), not only the terminal
    lines = read_logs("sft step")
    assert any(name == "rlvrflow.training" and "sft step" in msg for name, msg in lines), lines[:20]

    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 0
    second = capsys.readouterr().out
    # every stage reused; new are drift and compare, against the champion the first run made
    assert "7/9 stages reused" in second and "previous run in this folder" in second
    for stage in ("drift", "compare"):
        assert any(line.startswith(f"  {stage} ") and "[computed in" in line for line in second.splitlines()), stage
    assert any(
        line.startswith("  drift ") and "all " in line and " checks passed" in line for line in second.splitlines()
    )
    for stage in ("prepare", "attach", "split", "sft", "tier", "grpo", "evaluate"):  # counts, cached too
        assert any(line.startswith(f"  {stage} ") and "[cached " in line for line in second.splitlines()), stage
    assert any(line.startswith("  split ") and " train, " in line for line in second.splitlines())
    again = json.loads((out / "latest.json").read_text())
    assert again["run_dir"] != latest["run_dir"] and again["checkpoint"] == latest["checkpoint"]
    print(second.splitlines()[0] + "\n" + second.splitlines()[1])

    # the evaluate stage read GRPO's own evals of SFT and each checkpoint; evaluated anew, they are the same
    evaluate_line = next(line for line in first.splitlines() if line.startswith("  evaluate "))
    (evaluated,) = (out / "stages" / "evaluate").iterdir()
    names = [r["name"] for r in json.loads((evaluated / "eval_table.json").read_text())]
    assert (
        f"{len(names)} models on the held-out split ({len(names)} read from the training loop's own evals)"
        in evaluate_line
    ), evaluate_line
    kept = {
        n: (json.loads((evaluated / f"{n}.json").read_text()), (evaluated / f"{n}.samples.jsonl").read_bytes())
        for n in names
    }
    (trained,) = (out / "stages" / "grpo").iterdir()
    shutil.rmtree(trained / "evals")
    shutil.rmtree(evaluated)
    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 0
    third = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  evaluate "))
    assert "read from the training loop" not in third and "[computed in" in third
    for n, (result, samples) in kept.items():
        assert result.pop("reused_from") == str(trained / "evals" / f"{'step_000000' if n == 'sft' else n}.json")
        assert json.loads((evaluated / f"{n}.json").read_text()) == result, n
        assert (evaluated / f"{n}.samples.jsonl").read_bytes() == samples, n


@pytest.mark.slow
def test_tier_writes_tiers_parquet_into_out(tmp_path, toy_spec, capsys):
    import polars as pl

    from rlvrflow.training.config import TinyModelConfig
    from rlvrflow.training.tiny_model import build_tiny_model

    corpus = [line for line in (toy_spec.parent / "raw" / "part-0.jsonl").read_text().splitlines()]
    model = build_tiny_model(
        corpus + ["Answer: 0123456789"],
        tmp_path / "model",
        seed=0,
        dims=TinyModelConfig(hidden_size=32, num_layers=1, num_heads=1, intermediate_size=32),
    )
    out = tmp_path / "tiers_out"
    assert main(["tier", str(toy_spec), "--model", str(model), "--out", str(out)]) == 0
    tiers = pl.read_parquet(out / "tiers.parquet")
    assert {"n_samples", "n_correct", "pass_at_1", "pass_at_k", "tier"} <= set(tiers.columns)
    assert tiers.height > 0 and set(tiers["tier"].unique()) <= {"too_hard", "learnable", "too_easy"}
    assert (out / "tier_report.md").exists()
    assert main(["tier", str(toy_spec), "--model", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "not a directory" in capsys.readouterr().err
