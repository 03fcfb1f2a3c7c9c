"""What a spec's data implies before the run (flows/preflight.py), printed by `rlvrflow spec-check`
and the run's first lines: no worked rows, prompts longer than the model's positions, settings the
model ignores; and every command surviving a closed stdout pipe."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvrflow.flows.cli import EXIT_CLOSED_PIPE, main
from rlvrflow.flows.preflight import preflight
from rlvrflow.flows.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).parent / "data" / "reasoning_gym_sample.jsonl"  # see data/README.md
KINDS = (
    "basic_arithmetic",
    "chain_sum",
    "decimal_arithmetic",
    "fraction_simplification",
    "gcd",
    "lcm",
    "products",
    "gsm_symbolic",
)
OUTSIDE_SPEC = f"""\
domain: outside-math
sources:
  - name: outside
    path: logs.jsonl
    format: jsonl
    fields: {{id: id, question: question, reference: answer, category: kind, solution: null}}
validation:
  categories: [{", ".join(KINDS)}]
verifiers:
  rules:
{chr(10).join(f"    - {{category: {k}, verifier: math}}" for k in KINDS)}
generation:
  max_new_tokens: 24
training:
  model: embedded-base
"""


def outside(tmp_path: Path, extra: str = "") -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(OUTSIDE_SPEC + extra)
    shutil.copyfile(SAMPLE, tmp_path / "logs.jsonl")
    return spec


def test_outcome_only_logs_name_no_sft_the_long_prompts_and_the_ignored_settings(tmp_path):
    notices = {n.kind: n.message for n in preflight(load_spec(outside(tmp_path)))}
    assert list(notices) == ["no_worked_rows", "prompts_too_long", "ignored_setting"]
    worked = notices["no_worked_rows"]
    assert "none of the 42 rows has a worked solution" in worked and "SFT will be skipped" in worked
    for choice in (
        "GRPO starts from the base model",
        "`solution`",
        "verifiers.answer_only_targets: true",
        "training.model",
    ):
        assert choice in worked
    # the two longest word problems: 652 and 649 characters of question plus the default template's 64, one
    # token a character and BOS for the embedded base (717 and 714), past its 512 positions less 24 new tokens
    long = notices["prompts_too_long"]
    assert long.startswith("2 of 42 prompts (categories gsm_symbolic)") and "512 positions" in long
    assert "gsm_symbolic-0010 (gsm_symbolic, 717 tokens)" in long and "gsm_symbolic-0191" in long
    assert "max_prompt_chars" in long
    (note,) = [n for n in preflight(load_spec(outside(tmp_path))) if n.kind == "ignored_setting"]
    assert not note.warn  # the user did not write training.tiny: a note for spec-check, not a run warning
    assert notices["ignored_setting"].startswith(
        "training.tiny (spec-check prints it with its defaults) is not used: "
        "embedded-base has its own dimensions (2 layers, width 128, 512 "
        "positions)"
    )


def test_answer_only_targets_changes_the_advice(tmp_path):
    spec = load_spec(outside(tmp_path))
    on = spec.model_copy(update={"verifiers": spec.verifiers.model_copy(update={"answer_only_targets": True})})
    (n,) = [n for n in preflight(on) if n.kind == "no_worked_rows"]
    assert "answer_only_targets is on" in n.message and "not the working" in n.message


def test_a_domain_with_worked_rows_and_short_prompts_has_nothing_to_say(toy_spec):
    assert preflight(load_spec(toy_spec)) == []  # embedded model (training.tiny is read), worked rows, short


def test_missing_sources_skip_the_data_checks_without_failing(tmp_path, capsys):
    spec = outside(tmp_path)
    (tmp_path / "logs.jsonl").unlink()
    assert main(["spec-check", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "[data_unread] the data checks (worked rows, prompt lengths) were skipped" in out and "logs.jsonl" in out


def test_spec_check_prints_what_the_data_implies(tmp_path, capsys):
    assert main(["spec-check", str(outside(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "what the data and the spec imply (3):" in out
    assert "  [no_worked_rows] none of the 42 rows" in out and "  [prompts_too_long] 2 of 42 prompts" in out


def closed_pipe_run(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI with its stdout a pipe whose reader is already gone, as under `| head` once head exits."""
    read, write = os.pipe()
    os.close(read)  # before the child starts: its every write to stdout fails with EPIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "rlvrflow.flows.cli", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=120,
            env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        )
    finally:
        os.close(write)


@pytest.mark.slow
def test_every_command_survives_a_closed_pipe(tmp_path):
    """`rlvrflow doctor RUN | head` and the like: a quiet exit with the shell's SIGPIPE status, no traceback."""
    import json

    grpo = tmp_path / "grpo"
    grpo.mkdir()
    lines = [
        {"step": s, "reward_mean": 0.1, "zero_variance_fraction": 0.9, "groups_seen": 8, "groups_zero_variance": 7}
        for s in range(1, 21)
    ]
    (grpo / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    for args in (["doctor", str(grpo)], ["doctor", str(grpo), "--json"], ["spec-check", str(outside(tmp_path))]):
        done = closed_pipe_run(args)
        assert done.returncode == EXIT_CLOSED_PIPE, (args, done.stderr)
        assert done.stderr == "", args
    done = closed_pipe_run(["--help"])  # argparse swallows its own failed write and exits 0: quiet as well
    assert done.returncode == 0 and done.stderr == ""


def test_a_16_bit_dtype_on_a_cpu_that_emulates_it_is_named_with_the_fix(tmp_path, monkeypatch):
    """training.dtype bfloat16 on a CPU: the notice carries the measured slowdown and the field to change;
    under the threshold, for float32 and auto, and on a GPU device it says nothing (and measures nothing)."""
    import torch

    from rlvrflow.training import precision

    calls = []

    def measured(slower):
        def fake(name):
            calls.append(name)
            return slower

        return fake

    def spec_with(**training):
        spec = load_spec(outside(tmp_path))
        return spec.model_copy(update={"training": spec.training.model_copy(update=training)})

    monkeypatch.setattr(precision, "cpu_matmul_slowdown", measured(68.4))
    (n,) = [n for n in preflight(spec_with(dtype="bfloat16", device="cpu")) if n.kind == "slow_half_precision"]
    assert n.warn and calls == ["bfloat16"]
    assert n.message.startswith("training.dtype: bfloat16 on this CPU: a bfloat16 matmul took 68x as long")
    assert "Fix: training.dtype: float32" in n.message
    (n,) = [n for n in preflight(spec_with(dtype="float16", device="cpu")) if n.kind == "slow_half_precision"]
    assert "float16 matmul" in n.message and "AVX512-FP16" in n.message
    if not torch.cuda.is_available():  # device auto resolves to this CPU
        assert [n for n in preflight(spec_with(dtype="bfloat16", device="auto")) if n.kind == "slow_half_precision"]

    calls.clear()
    # 1.5x a float32 matmul: under the threshold (with native bf16 the update measured faster end to end)
    monkeypatch.setattr(precision, "cpu_matmul_slowdown", measured(1.5))
    assert not [n for n in preflight(spec_with(dtype="bfloat16", device="cpu")) if n.kind == "slow_half_precision"]
    assert calls == ["bfloat16"]
    calls.clear()
    for training in ({"dtype": "float32", "device": "cpu"}, {"dtype": "auto"}, {"dtype": "bfloat16", "device": "cuda"}):
        assert not [n for n in preflight(spec_with(**training)) if n.kind == "slow_half_precision"]
    assert calls == []


def test_the_cpu_slowdown_is_measured_once_per_dtype():
    from rlvrflow.training.precision import cpu_matmul_slowdown

    first = cpu_matmul_slowdown("bfloat16")
    assert 0 < first < float("inf") and cpu_matmul_slowdown("bfloat16") is first  # cached, not re-timed
