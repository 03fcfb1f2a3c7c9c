"""report.json fields, the reward-hacking warning and the curves PNG."""

import json
import logging

import pytest

from training.report import build_report, detect_reward_hacking, plot_curves, warn_loudly, write_report

EVAL = {"pass_at_1_greedy": 0.5, "pass_at_1_sampled": 0.4, "pass_at_k": 0.7, "format_rate": 0.9}


def test_warning_fires_when_reward_rises_and_eval_does_not():
    rewards = [0.1] * 10 + [0.5] * 10
    msg = detect_reward_hacking(rewards, [0.40, 0.41, 0.40])
    assert msg is not None and "REWARD HACKING" in msg and "+0.400" in msg


@pytest.mark.parametrize(
    "rewards, evals",
    [
        ([0.1] * 10 + [0.5] * 10, [0.40, 0.55]),  # eval rose with the reward: healthy
        ([0.3] * 20, [0.40, 0.40]),               # reward flat: nothing to flag
        ([0.1, 0.9], [0.4, 0.4]),                  # too few steps to judge
        ([0.1] * 10 + [0.5] * 10, [0.40]),         # no eval after the baseline yet
    ],
)
def test_warning_stays_quiet_otherwise(rewards, evals):
    assert detect_reward_hacking(rewards, evals) is None


def test_warn_loudly_logs_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlvrflow.training"):
        warn_loudly("REWARD HACKING SIGNAL: test")
    assert any(r.levelno == logging.WARNING and "REWARD HACKING" in r.getMessage() for r in caplog.records)


def test_report_has_the_required_fields(tmp_path):
    final = {**EVAL, "pass_at_1_greedy": 0.8}
    rep = build_report(EVAL, final, {"learnable": 5, "too_hard": 2}, 0.25, tmp_path / "step_000010",
                       extra={"seconds": {"total": 1.0}})
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
    from training.report import comparison_table, gain_interval

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
