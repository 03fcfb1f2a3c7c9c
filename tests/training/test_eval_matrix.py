"""The eval matrix: stability from per-prompt counts, one row per model, and a best choice that never
takes a checkpoint that forgot a regression set."""
from __future__ import annotations

import pytest

from training.eval_matrix import build_matrix, choose_best, format_matrix, stability, stability_of


def result(name: str, greedy: float, **extra) -> dict:
    base = {"name": name, "pass_at_1_greedy": greedy, "pass_at_1_sampled": greedy - 0.05, "pass_at_k": greedy + 0.1,
            "k": 4, "format_rate": 0.9, "length_mean": 20.0, "length_p90": 40.0, "n_prompts": 4,
            "per_prompt_variance": 0.06, "zero_variance_prompts": 0.7}
    return {**base, **extra}


def test_stability_by_hand():
    st = stability([(0, 4), (4, 4), (2, 4), (1, 4)])
    assert st["variance"] == pytest.approx((0 + 0 + 0.25 + 0.1875) / 4)
    assert st["sometimes_right"] == 0.5
    with pytest.raises(ValueError, match="out of n"):
        stability([(5, 4)])
    with pytest.raises(ValueError, match="no prompts"):
        stability([])


def test_stability_prefers_per_prompt_counts_and_else_reads_the_summary():
    r = result("sft", 0.5, per_prompt=[{"id": "a", "n": 2, "correct": 1}, {"id": "b", "n": 2, "correct": 2}])
    assert stability_of(r) == {"variance": 0.125, "sometimes_right": 0.5}
    assert stability_of(result("sft", 0.5)) == {"variance": 0.06, "sometimes_right": pytest.approx(0.3)}
    with pytest.raises(ValueError, match="per_prompt"):
        stability_of({"pass_at_1_greedy": 0.5}, "step_1")


def test_rows_baseline_first_with_robustness_and_regression_deltas():
    evals = [result("step_000100", 0.40), result("sft", 0.34), result("step_000200", 0.45)]
    robust = {"sft": result("sft", 0.10), "step_000100": result("step_000100", 0.30)}
    general = {"sft": result("sft", 0.80), "step_000100": result("step_000100", 0.79),
               "step_000200": result("step_000200", 0.70)}
    rows = build_matrix(evals, robustness=robust, regression={"general": general}, max_regression=2.0)
    assert [r["name"] for r in rows] == ["sft", "step_000100", "step_000200"]
    assert rows[0]["is_baseline"] and rows[0]["regression_delta"]["general"] == 0.0
    assert rows[1]["robustness"] == 0.30 and rows[2]["robustness"] is None
    assert rows[1]["regression_delta"]["general"] == pytest.approx(-1.0) and rows[1]["regressed"] == []
    assert rows[2]["regression_delta"]["general"] == pytest.approx(-10.0) and rows[2]["regressed"] == ["general"]
    assert rows[2]["sometimes_right"] == pytest.approx(0.3)
    # the better checkpoint forgot the general set: the earlier one is chosen
    assert choose_best(rows, max_regression=2.0) == "step_000100"
    assert choose_best(rows, max_regression=20.0) == "step_000200"
    text = format_matrix(rows)
    assert "step_000200" in text and "(-10.0)!" in text and "lost more than the allowed points on general" in text
    assert text.splitlines()[0].split()[:3] == ["model", "p@1", "greedy"]


def test_sft_is_chosen_when_no_checkpoint_beats_it():
    rows = build_matrix([result("sft", 0.5), result("step_1", 0.5), result("step_2", 0.45)])
    assert choose_best(rows) == "sft"
    rows = build_matrix([result("sft", 0.5), result("step_1", 0.6), result("step_2", 0.6)])
    assert choose_best(rows) == "step_2"  # the latest wins a tie, as best_checkpoint does


def test_every_checkpoint_regressed_leaves_sft():
    general = {"sft": result("sft", 0.9), "step_1": result("step_1", 0.5)}
    rows = build_matrix([result("sft", 0.3), result("step_1", 0.6)], regression={"general": general})
    assert rows[1]["regressed"] == ["general"] and choose_best(rows) == "sft"


def test_bad_inputs_name_the_fix():
    with pytest.raises(ValueError, match="'sft'"):
        build_matrix([result("step_1", 0.5)])
    with pytest.raises(ValueError, match="no 'name'"):
        build_matrix([{"pass_at_1_greedy": 0.5}])
    with pytest.raises(ValueError, match="lacks"):
        build_matrix({"sft": {"pass_at_1_greedy": 0.5}})
    with pytest.raises(ValueError, match="regression set 'general' has no 'sft'"):
        build_matrix([result("sft", 0.5)], regression={"general": {"step_1": result("step_1", 0.4)}})
