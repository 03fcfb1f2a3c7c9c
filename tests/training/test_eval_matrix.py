"""The eval matrix: stability from per-prompt counts, one row per model, and a best choice that never
takes a checkpoint that forgot a regression set."""

from __future__ import annotations

import pytest

from rlvrflow.training.eval_matrix import build_matrix, choose_best, decide_best, format_matrix, stability, stability_of


def result(name: str, greedy: float, **extra) -> dict:
    base = {
        "name": name,
        "pass_at_1_greedy": greedy,
        "pass_at_1_sampled": greedy - 0.05,
        "pass_at_k": greedy + 0.1,
        "k": 4,
        "format_rate": 0.9,
        "length_mean": 20.0,
        "length_p90": 40.0,
        "n_prompts": 4,
        "per_prompt_variance": 0.06,
        "zero_variance_prompts": 0.7,
    }
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
    general = {
        "sft": result("sft", 0.80),
        "step_000100": result("step_000100", 0.79),
        "step_000200": result("step_000200", 0.70),
    }
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


# --- the constant baseline: a gain one answer per category explains is never "best" -----------------


def _scored(name: str, golds: list[str], answers: list[str]) -> dict:
    """An eval result of a model that gave `answers` (greedy) to prompts with these golds."""
    ok = [int(a == g) for a, g in zip(answers, golds)]
    rate = sum(ok) / len(ok)
    return result(
        name,
        rate,
        pass_at_1_sampled=rate,
        n_prompts=len(ok),
        by_prompt={"ids": [f"p{i}" for i in range(len(ok))], "greedy": ok, "sampled": [float(x) for x in ok]},
    )


def _constant(golds: list[str], answer: str) -> dict:
    from rlvrflow.training.baseline import score_constants
    from rlvrflow.training.scoring import Task

    tasks = [Task(f"p{i}", "gcd", "q", "math", g, {}) for i, g in enumerate(golds)]
    return score_constants(tasks, {"gcd": f"Answer: {answer}"}, ["correct" if g == answer else "wrong" for g in golds])


GOLDS = ["2", "4", "6"] * 20  # a third of the held-out golds are 2


def test_a_checkpoint_that_answers_the_constant_is_not_best_and_the_warning_names_it():
    base = _scored("sft", GOLDS, ["0"] * 60)  # SFT skipped: the base never answers right
    collapsed = _scored("step_000180", GOLDS, ["2"] * 60)
    rows = build_matrix([base, collapsed], constant=_constant(GOLDS, "2"))
    assert [r["name"] for r in rows] == ["sft", "step_000180", "constant"]
    const = rows[2]
    assert const["is_constant"] and const["pass_at_1_greedy"] == pytest.approx(1 / 3)
    assert const["constants"] == {"gcd": "Answer: 2"} and const["length_mean"] is None
    assert rows[1]["gain_vs_sft"]["points"] == pytest.approx(33.33, abs=0.01) and rows[1]["gain_vs_sft"]["low"] > 0
    assert rows[1]["gain_vs_constant"]["points"] == 0.0 and rows[1]["gain_vs_constant"]["low"] == 0.0
    decision = decide_best(rows)
    assert decision.best == "sft" and choose_best(rows) == "sft" and decision.no_gain
    assert decision.beats_sft == ["step_000180"] and decision.beats_constant == []
    assert "step_000180 gains +33.3 points over sft but +0.0 over the constant" in decision.warning
    assert "'Answer: 2'" in decision.warning and decision.to_dict()["no_gain"] is True
    text = format_matrix(rows)
    assert text.splitlines()[3].split()[0] == "constant" and "gcd: 'Answer: 2'" in text


def test_a_point_gain_inside_the_constants_interval_is_not_enough():
    # right on every gold-2 prompt and on two others: above the constant by 3.3 points, interval across 0
    answers = ["2"] * 60
    answers[1], answers[2] = "4", "6"
    rows = build_matrix(
        [_scored("sft", GOLDS, ["0"] * 60), _scored("step_1", GOLDS, answers)], constant=_constant(GOLDS, "2")
    )
    gain = rows[1]["gain_vs_constant"]
    assert gain["points"] == pytest.approx(3.33, abs=0.01) and gain["low"] <= 0
    assert choose_best(rows) == "sft"


def test_a_real_gain_over_the_constant_is_still_chosen():
    answers = ["2", "4", "6"] * 15 + ["0"] * 15  # right on three quarters of the prompts, whatever the gold
    rows = build_matrix(
        [_scored("sft", GOLDS, ["0"] * 60), _scored("step_1", GOLDS, ["2"] * 60), _scored("step_2", GOLDS, answers)],
        constant=_constant(GOLDS, "2"),
    )
    decision = decide_best(rows)
    assert decision.best == "step_2" and not decision.no_gain and decision.warning is None
    assert decision.beats_constant == ["step_2"] and rows[2]["gain_vs_constant"]["low"] > 0


def test_a_gain_over_a_constant_that_scores_nothing_needs_only_the_point_estimate():
    # every gold distinct: the constant gets 0 of 50, as does SFT; 3 right is a gain no constant explains
    golds = [str(i) for i in range(50)]
    answers = ["0", "1", "2"] + ["x"] * 47
    rows = build_matrix(
        [_scored("sft", golds, ["x"] * 50), _scored("step_1", golds, answers)], constant=_constant(golds, "zz")
    )
    assert rows[1]["gain_vs_constant"]["points"] == pytest.approx(6.0) and rows[1]["gain_vs_constant"]["low"] <= 0
    decision = decide_best(rows)
    assert decision.best == "step_1" and not decision.no_gain and decision.beats_constant == ["step_1"]


def test_without_per_prompt_scores_the_point_estimate_decides():
    rows = build_matrix(
        [result("sft", 0.2), result("step_1", 0.30), result("step_2", 0.40)],
        constant={"constants": {"gcd": "Answer: 2"}, "pass_at_1_greedy": 0.35},
    )
    assert rows[1]["gain_vs_constant"] == {"points": -5.0, "low": None, "high": None, "metric": "pass_at_1_greedy"}
    assert decide_best(rows).beats_constant == ["step_2"] and choose_best(rows) == "step_2"
    with pytest.raises(ValueError, match="constant baseline lacks"):
        build_matrix([result("sft", 0.2)], constant={"pass_at_1_greedy": 0.3})


def test_the_constant_is_picked_on_the_training_golds_not_the_held_out_ones():
    from rlvrflow.training.baseline import constant_baseline

    def row(i, gold, split):
        return {
            "id": f"{split}{i}",
            "category": "gcd",
            "prompt": "q",
            "verifier": "math",
            "reference": gold,
            "verifier_params": "{}",
        }

    from rlvrflow.training.scoring import Task

    train = [row(i, g, "t") for i, g in enumerate(["3", "3", "3", "2", "2"])]
    held_out = [Task.from_row(row(i, g, "e")) for i, g in enumerate(["2", "2", "2", "3"])]
    r = constant_baseline(train, held_out, workers=0)
    assert r["constants"] == {"gcd": "Answer: 3"} and r["pass_at_1_greedy"] == 0.25  # not the held-out's 2
    assert r["by_prompt"]["greedy"] == [0, 0, 0, 1] and r["per_category"]["gcd"]["n"] == 4
