"""Two processes on the same output folder at once finish with the same results: they share a
stage (one builds, the other waits on its lock and reuses it), and two `rlvrflow run` take turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DO_NOT_TRACK="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return env


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlvrflow.flows.cli", *args],
        cwd=REPO,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    done = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            done.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return done


@pytest.mark.slow
def test_two_cleans_at_once_build_the_stage_once(toy_spec, tmp_path):
    out = tmp_path / "out"
    results = _finish([_start(["clean", str(toy_spec), "--out", str(out)], tmp_path) for _ in range(2)], 300)
    assert all(code == 0 for code, _, _ in results), results
    folders = list((out / "stages" / "prepare").iterdir())
    assert len(folders) == 1 and (folders[0] / "_manifest.json").is_file() and not (folders[0] / ".lock").exists()
    lines = [next(line for line in o.splitlines() if line.strip().startswith("prepare")) for _, o, _ in results]
    assert sorted("cached" in line for line in lines) == [False, True], lines  # built once, reused once
    assert (out / "clean.parquet").is_file()


@pytest.mark.slow
def test_two_runs_on_one_folder_at_once_give_the_same_results(toy_spec, tmp_path):
    out = tmp_path / "out"
    args = ["run", str(toy_spec), "--out", str(out), "--smoke"]
    results = _finish([_start(args, tmp_path) for _ in range(2)], 900)
    assert all(code == 0 for code, _, _ in results), [r[2][-3000:] for r in results]
    summaries = [o for _, o, _ in results]
    # the second reuses the first's seven stages; its drift and compare stages meet the champion the first made
    assert sorted("7/9 stages reused" in s for s in summaries) == [False, True], summaries
    waited = [e for _, _, e in results if "waiting for the run already using" in e]
    assert len(waited) == 1
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 2
    reports = [json.loads((r / "report.json").read_text()) for r in runs]
    assert reports[0]["checkpoint"] == reports[1]["checkpoint"]
    assert reports[0]["evals"] == reports[1]["evals"] and reports[0]["tiers"] == reports[1]["tiers"]
    # every stage's counts reached the terminal, in both runs (cached ones too)
    for s in summaries:
        for stage in ("prepare", "attach", "split", "sft", "tier", "grpo", "evaluate"):
            assert any(line.strip().startswith(stage) for line in s.splitlines()), (stage, s)
    # the terminal shows rlvrflow's lines; Great Expectations' INFO lines and transformers' bars are in
    # the run's log file, beside its report (flows/console.py)
    err = next(e for _, _, e in results if e not in waited)  # the run that built the stages
    assert "rlvrflow.training - sft step" in err, err[-3000:]
    for noise in ("Created temporary directory", "Loading weights", "Writing model shards", "[transformers]"):
        assert noise not in err, (noise, err[-3000:])
    logs = {r.name: (r / "run.log").read_text() for r in runs}
    log = next(text for text in logs.values() if "sft step" in text)
    assert "great_expectations" in log and "Created temporary directory" in log and "Loading weights" in log
    assert all(f"log:        {r / 'run.log'}" in "".join(summaries) for r in runs)
