"""report.json fields, the reward-hacking warning and the curves PNG."""

import json
import logging

import pytest

from rlvrflow.training.config import HackingAlarmConfig
from rlvrflow.training.report import build_report, detect_reward_hacking, plot_curves, warn_loudly, write_report

EVAL = {"pass_at_1_greedy": 0.5, "pass_at_1_sampled": 0.4, "pass_at_k": 0.7, "format_rate": 0.9}


ALARM = HackingAlarmConfig()  # min_steps 20, min_prompts 100, min_reward_gain 0.05, level 0.95


def _held(n: int, first_right: int, last_right: int) -> tuple[dict, dict]:
    """Baseline and latest held-out evals on n prompts: the first `first_right` / `last_right` prompts right."""
    ids = [f"p{i}" for i in range(n)]
    return (
        {"by_prompt": {"ids": ids, "greedy": [int(i < first_right) for i in range(n)]}},
        {"by_prompt": {"ids": ids, "greedy": [int(i < last_right) for i in range(n)]}},
    )


def test_alarm_fires_on_evidence():
    """40 steps: the first 10 alternate 0.18 / 0.22 (mean 0.200), the last 10 0.88 / 0.92 (mean 0.900), so the
    reward rose by 0.700 with a standard error of sqrt(2 x (10 x 0.02^2 / 9) / 10) = 0.009. Held out, 120
    prompts, 30 right at SFT and 27 now: three prompts lost, none gained, -2.5 points. No resample can
    rise above 0, and (117/120)^120 = 0.048 of them draw none of the three (more than the 0.025 tail), so
    the interval's top is exactly +0.0: far below the training gain of +70 points."""
    rewards = [0.18, 0.22] * 5 + [0.5] * 20 + [0.88, 0.92] * 5
    check = detect_reward_hacking(rewards, *_held(120, 30, 27), ALARM)
    assert check is not None and check.loud, check
    msg = check.message
    assert msg.startswith(
        "REWARD HACKING SIGNAL: training reward rose by +0.700 (0.200 -> 0.900, mean of the "
        "first and last 10 of 40 steps, standard error 0.009)"
    ), msg
    assert (
        "held-out greedy pass@1 changed by -2.5 points (95% interval" in msg
        and "to +0.0, paired bootstrap over 120 prompts)" in msg
        and "excludes the training gain (+70.0 points)" in msg
    )


def test_alarm_is_a_quiet_note_on_the_run_that_cried_wolf():
    """The real-model run: 12 steps (windows of 3: 0.610 -> 0.679, +0.069), 40 held-out prompts, 5 right
    at SFT and 4 after (12.5% -> 10.0%). The signs are there, the evidence is not: a note, no banner."""
    rewards = [0.600, 0.610, 0.620] + [0.64] * 6 + [0.679] * 3
    check = detect_reward_hacking(rewards, *_held(40, 5, 4), ALARM)
    assert check is not None and not check.loud
    assert "REWARD HACKING" not in check.message
    assert "12 steps < min_steps 20; 40 held-out prompts < min_prompts 100" in check.message
    assert "+0.069 (0.610 -> 0.679" in check.message and "-2.5 points" in check.message


@pytest.mark.parametrize(
    "rewards, held",
    [
        # reward windows alternate 0.1 / 0.5 and 0.16 / 0.56: +0.060, but its standard error is
        # sqrt(2 x (10 x 0.2^2 / 9) / 10) = 0.094, so the rise is step-to-step noise (held-out as in the firing case)
        ([0.1, 0.5] * 5 + [0.3] * 20 + [0.16, 0.56] * 5, (120, 30, 27)),
        # reward clearly up (+0.700) and held-out up with it: 30 -> 42 right, every change a gain, interval above 0
        ([0.18, 0.22] * 5 + [0.5] * 20 + [0.88, 0.92] * 5, (120, 30, 42)),
        # reward clearly up +0.060 (0.30 -> 0.36, no spread) and held-out down on 20, up on 19 of 120 prompts
        # (-0.8 points; the diffs' standard error sqrt(39/120/120) = 0.052 makes the interval about -11 to +9):
        # it reaches the training gain of +6 points
        ([0.30] * 10 + [0.33] * 20 + [0.36] * 10, None),
        ([0.3] * 40, (120, 30, 27)),  # reward flat: nothing to explain
        ([0.1, 0.9], (120, 30, 27)),  # too few steps to judge
    ],
)
def test_alarm_stays_quiet_on_noise(rewards, held):
    baseline, latest = _mixed() if held is None else _held(*held)
    assert detect_reward_hacking(rewards, baseline, latest, ALARM) is None


def _mixed() -> tuple[dict, dict]:
    ids = [f"p{i}" for i in range(120)]
    return (
        {"by_prompt": {"ids": ids, "greedy": [1] * 20 + [0] * 100}},
        {"by_prompt": {"ids": ids, "greedy": [0] * 20 + [1] * 19 + [0] * 81}},
    )


def test_the_same_mixed_held_out_change_is_evidence_against_a_larger_training_gain():
    """The quiet mixed case above, against a reward rise of +0.500 (+50 points, far above the interval's top)."""
    check = detect_reward_hacking([0.30] * 10 + [0.5] * 20 + [0.80] * 10, *_mixed(), ALARM)
    assert check is not None and check.loud and "-0.8 points" in check.message


def test_alarm_without_per_prompt_results_says_nothing():
    rewards = [0.1] * 10 + [0.5] * 10
    assert detect_reward_hacking(rewards, {}, {"by_prompt": {"ids": ["a"], "greedy": [0]}}, ALARM) is None


@pytest.mark.parametrize(
    "field, value",
    [("min_steps", 3), ("min_prompts", 1), ("min_reward_gain", 0.0), ("level", 1.0), ("level", 0.5), ("window", 5)],
)
def test_alarm_config_is_validated(field, value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        HackingAlarmConfig(**{field: value})


def test_warn_loudly_logs_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlvrflow.training"):
        warn_loudly("REWARD HACKING SIGNAL: test")
    assert any(r.levelno == logging.WARNING and "REWARD HACKING" in r.getMessage() for r in caplog.records)


def test_report_has_the_required_fields(tmp_path):
    final = {**EVAL, "pass_at_1_greedy": 0.8}
    rep = build_report(
        EVAL, final, {"learnable": 5, "too_hard": 2}, 0.25, tmp_path / "step_000010", extra={"seconds": {"total": 1.0}}
    )
    path = write_report(tmp_path / "report.json", rep)
    data = json.loads(path.read_text())
    for key in ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate"):
        assert key in data["baseline"] and key in data["final"]
    assert data["delta"]["pass_at_1_greedy"] == pytest.approx(0.3)
    assert data["tiers"] == {"learnable": 5, "too_hard": 2}
    assert data["zero_variance_fraction"] == 0.25
    assert data["checkpoint"].endswith("step_000010")
    assert data["seconds"] == {"total": 1.0}


def test_report_rejects_incomplete_metrics_and_clobbering_extras(tmp_path):
    with pytest.raises(ValueError, match="baseline lacks.*format_rate"):
        build_report({"pass_at_1_greedy": 0.1}, EVAL, {}, 0.0, tmp_path)
    with pytest.raises(ValueError, match="would overwrite"):
        build_report(EVAL, EVAL, {}, 0.0, tmp_path, extra={"final": 1})


def test_curves_png_is_written(tmp_path):
    metrics = [{"step": i, "reward_mean": 0.1 * i, "correct_rate": 0.05 * i} for i in range(1, 5)]
    evals = [{"step": s, **EVAL} for s in (0, 4)]
    png = plot_curves(metrics, evals, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_curves([], [], tmp_path / "none.png") is None


def _per_prompt(greedy: list[int], sampled: list[float] | None = None, ids=None) -> dict:
    ids = ids or [f"p{i}" for i in range(len(greedy))]
    return {**EVAL, "by_prompt": {"ids": ids, "greedy": greedy, "sampled": sampled or [float(g) for g in greedy]}}


def test_gain_interval_is_paired_and_brackets_the_gain(tmp_path):
    from rlvrflow.training.report import comparison_table, gain_interval

    base = _per_prompt([0] * 50 + [1] * 50)
    # the same prompts in another order: 30 more right, none lost -> +30 points, all differences >= 0
    final = _per_prompt(([1] * 30 + [0] * 20 + [1] * 50)[::-1], ids=[f"p{i}" for i in range(100)][::-1])
    gain = gain_interval(base, final)
    assert gain["points"] == 30.0 and gain["prompts"] == 100
    assert 0 < gain["low"] < 30 < gain["high"] <= 40
    same = gain_interval(base, base)
    assert (same["points"], same["low"], same["high"]) == (0.0, 0.0, 0.0)  # paired: no spread without change
    assert gain_interval(EVAL, final) is None  # no per-prompt results
    assert "+30.0 points (95% interval" in comparison_table(base, final, gain)
    assert "interval" not in comparison_table(base, final)
    rep = build_report(base, final, {}, 0.0, tmp_path)
    assert rep["gain"]["greedy"]["points"] == 30.0 and rep["gain"]["sampled"]["points"] == 30.0


def test_grpo_keeps_the_banner_in_warnings_and_the_note_in_notes(caplog):
    """What GRPO does with the check at each checkpoint eval: the banner once in run.warnings (logged as a
    warning), the quiet note in run.notes (logged as info), from the per-prompt results GRPORun keeps."""
    from rlvrflow.training.config import TrainingConfig
    from rlvrflow.training.grpo import GRPORun, _check_reward_hacking

    first, last = _held(120, 30, 27)
    loud = GRPORun(
        train_rewards=[0.18, 0.22] * 5 + [0.5] * 20 + [0.88, 0.92] * 5,
        held_out_first=first["by_prompt"],
        held_out_last=last["by_prompt"],
    )
    with caplog.at_level(logging.INFO, logger="rlvrflow.training"):
        _check_reward_hacking(loud, TrainingConfig())
        _check_reward_hacking(loud, TrainingConfig())
    assert len(loud.warnings) == 1 and loud.warnings[0].startswith("REWARD HACKING SIGNAL") and loud.notes == []
    assert any(r.levelno == logging.WARNING and "REWARD HACKING" in r.getMessage() for r in caplog.records)
    first, last = _held(40, 5, 4)
    quiet = GRPORun(
        train_rewards=[0.600, 0.610, 0.620] + [0.64] * 6 + [0.679] * 3,
        held_out_first=first["by_prompt"],
        held_out_last=last["by_prompt"],
    )
    _check_reward_hacking(quiet, TrainingConfig())
    assert quiet.warnings == [] and len(quiet.notes) == 1 and "too little evidence" in quiet.notes[0]


def test_grpo_compares_the_sampled_training_reward_with_held_out_sampled_pass_at_1():
    """The training reward is sampled. A policy that sharpened onto answers greedy decoding already gave
    raises its sampled reward and held-out sampled pass@1 together while greedy stays flat: no alarm. The
    same rise with held-out sampled pass@1 flat (the reward up, the task not) is the banner. Evals that
    kept no sampled scores fall back to greedy."""
    from rlvrflow.training.config import TrainingConfig
    from rlvrflow.training.grpo import GRPORun, _check_reward_hacking

    n, rewards = 120, [0.18, 0.22] * 5 + [0.5] * 20 + [0.88, 0.92] * 5
    ids, greedy = [f"p{i}" for i in range(n)], [int(i < 30) for i in range(n)]
    sharpened = GRPORun(
        train_rewards=rewards,
        held_out_first={"ids": ids, "greedy": greedy, "sampled": [0.2] * n},
        held_out_last={"ids": ids, "greedy": greedy, "sampled": [0.9] * n},
    )
    _check_reward_hacking(sharpened, TrainingConfig())
    assert sharpened.warnings == [] and sharpened.notes == []
    hacked = GRPORun(
        train_rewards=rewards,
        held_out_first={"ids": ids, "greedy": greedy, "sampled": [0.2] * n},
        held_out_last={"ids": ids, "greedy": greedy, "sampled": [0.2] * n},
    )
    _check_reward_hacking(hacked, TrainingConfig())
    assert len(hacked.warnings) == 1 and "held-out sampled pass@1 changed by +0.0" in hacked.warnings[0]
    greedy_only = GRPORun(
        train_rewards=rewards,
        held_out_first={"ids": ids, "greedy": greedy},
        held_out_last={"ids": ids, "greedy": greedy},
    )
    _check_reward_hacking(greedy_only, TrainingConfig())
    assert len(greedy_only.warnings) == 1 and "held-out greedy pass@1" in greedy_only.warnings[0]
