"""The documented multi-rank launch, end to end through the real CLI on 2 gloo ranks (CPU):

    torchrun --nproc_per_node 2 -m rlvrflow.flows.cli run SPEC --smoke --out OUT [--set training.grpo.backend=deepspeed]

on a 40-row arithmetic domain.

Rank 0 runs the Prefect flow (data stages, SFT, tiering, eval, report) and alone writes the stage
cache; rank 1 starts no flow and joins only the GRPO stage (flows/ranks.py). Checked for the
data-parallel torch backend (this interpreter) and for DeepSpeed ZeRO-2 and ZeRO-3 (.venv-ds, which
`make test` installs). A rerun with everything cached releases rank 1 at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RAN_GRPO = "rank 1: running grpo with rank 0"
SPEC = """\
domain: toy
sources:
  - name: qa
    path: raw/*.jsonl
    format: jsonl
    fields: {id: qid, question: q, reference: a, solution: s}
    defaults: {category: arithmetic}
validation:
  categories: [arithmetic]
verifiers:
  rules:
    - {category: arithmetic, verifier: math}
curriculum:
  eval_fraction: 0.25
"""


def _sibling(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"launch_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ds = _sibling("test_deepspeed_cpu")
free_port, need_deepspeed = _ds.free_port, _ds.need_deepspeed


def launch(python: str, spec: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}
    sets = [arg for o in overrides for arg in ("--set", o)]
    for _attempt in range(3):  # a probed port can be taken before torchrun binds it: retry on a new one
        cmd = [
            python,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),
            "-m",
            "rlvrflow.flows.cli",
            "run",
            str(spec),
            "--smoke",
            "--out",
            str(spec.parent / "out"),
            *sets,
        ]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode == 0 or "address already in use" not in (proc.stdout + proc.stderr).lower():
            return proc
    return proc


def _report(out: Path) -> dict:
    latest = json.loads((out / "latest.json").read_text())
    return json.loads(Path(latest["report"]).read_text())


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    """A 40-row arithmetic domain; every launch in this module shares its OUT (and stage cache)."""
    root = tmp_path_factory.mktemp("launch")
    (root / "raw").mkdir()
    rows = [
        {
            "qid": f"q{i:03d}",
            "q": f"What is {i % 17 + 2} plus {i % 11 + 3} (case {i})?",
            "a": str(i % 17 + i % 11 + 5),
            "s": f"Answer: {i % 17 + i % 11 + 5}",
        }
        for i in range(40)
    ]
    (root / "raw" / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "spec.yaml").write_text(SPEC)
    return root / "spec.yaml"


@pytest.mark.slow
def test_torch_backend_on_two_ranks_through_the_cli(spec):
    run_dir = spec.parent / "out"
    proc = launch(sys.executable, spec)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert log.count(RAN_GRPO) == 1, log[-4000:]  # rank 1 trained with rank 0, once
    assert "retrain finished" in proc.stdout
    grpo = sorted((run_dir / "stages" / "grpo").iterdir())
    assert len(grpo) == 1 and (grpo[0] / "_manifest.json").exists()  # one folder, written by rank 0 alone
    assert sorted(p.name for p in grpo[0].glob("step_*")) == ["step_000001", "step_000002"]
    assert not list((run_dir / "stages").glob("*/.tmp*")) and not list((run_dir / "stages").glob("*/*.tmp*"))
    report = _report(run_dir)
    assert report["stages"]["grpo"]["cached"] is False

    again = launch(sys.executable, spec)  # everything cached: rank 1 is released without training
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    recomputed = [line for line in again.stdout.splitlines() if "recomputed" in line]
    assert RAN_GRPO not in again.stdout + again.stderr, recomputed
    # every stage of the first launch reused; new are drift and compare, against the champion it made
    stages = _report(run_dir)["stages"]
    assert all(st["cached"] for name, st in stages.items() if name not in ("drift", "compare")), stages
    assert {"drift", "compare"} <= set(stages)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_on_two_ranks_through_the_cli(spec, stage):
    run_dir = spec.parent / "out"
    python = need_deepspeed()
    proc = launch(python, spec, "training.grpo.backend=deepspeed", f"training.grpo.zero_stage={stage}")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert log.count(RAN_GRPO) == 1, log[-4000:]
    report = _report(run_dir)
    assert report["stages"]["grpo"]["cached"] is False
    grpo_dir = Path(report["stages"]["grpo"]["dir"])
    zero = sorted(p.name for p in (grpo_dir / "step_000002" / "deepspeed" / "zero").iterdir())
    assert sum("optim_states" in name for name in zero) == 2, zero  # both ranks saved their partition


@pytest.mark.slow
def test_a_failure_on_rank_0_ends_the_launch_instead_of_hanging(spec):
    """Rank 0 cannot start its vLLM rollout engine (vLLM is not in this environment) after rank 1 joined
    GRPO: rank 0 ends the launch with the failure's exit code at once, where rank 1 would otherwise wait
    out its collective timeout (training.grpo.dist_timeout_minutes, 120 by default) and no retry may rerun
    the stage on rank 0 alone."""
    proc = launch(sys.executable, spec, "training.grpo.rollout=vllm")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-4000:]
    assert "ending the launch so the other ranks do not wait" in log, log[-4000:]
    assert log.count(RAN_GRPO) == 1
