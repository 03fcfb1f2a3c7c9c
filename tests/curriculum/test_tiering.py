"""tier_rows / tier_report / tier_to_dir with a scripted engine, a fake scorer, the tiny model and real verifiers."""

import json

import polars as pl
import pytest

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.engines.hf_engine import Completion
from rlvrflow.curriculum.passk import pass_at_k
from rlvrflow.curriculum.tiering import ROLLOUT_COLUMNS, ROLLOUTS_FILE, tier_rows, tier_to_dir, tier_with_rollouts


class ScriptedEngine:
    """Prompt "q<i>" gets `correct[i]` right answers ("ok") out of n, the rest "no"; records calls."""

    def __init__(self, correct: list[int]):
        self.correct = correct
        self.calls = []

    def generate(self, prompts, n, sampling, seed):
        self.calls.append((list(prompts), n, sampling, seed))
        out = []
        for p in prompts:
            c = self.correct[int(p[1:])]
            out.append([Completion("ok" if j < c else "no", (1,), (-0.1,), "stop") for j in range(n)])
        return out


def rows(n: int, categories=("a", "b")) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"id{i}" for i in range(n)],
            "category": [categories[i % len(categories)] for i in range(n)],
            "prompt": [f"q{i}" for i in range(n)],
            "reference": ["ok"] * n,
            "verifier": ["exact"] * n,
            "verifier_params": ["{}"] * n,
        }
    )


def exact_scores(items):
    return [1.0 if resp == ref else 0.0 for _, resp, ref, _ in items]


def test_counts_pass_rates_and_default_tiers():
    cfg = CurriculumConfig(n_samples=4, k=2)
    out = tier_rows(rows(5), ScriptedEngine([0, 1, 2, 4, 3]), cfg, seed=0, score_fn=exact_scores)
    assert out["n_samples"].to_list() == [4] * 5
    assert out["n_correct"].to_list() == [0, 1, 2, 4, 3]
    assert out["pass_at_1"].to_list() == pytest.approx([0, 0.25, 0.5, 1, 0.75])
    assert out["pass_at_k"].to_list() == pytest.approx([pass_at_k(4, c, 2) for c in [0, 1, 2, 4, 3]])
    assert out["tier"].to_list() == ["too_hard", "learnable", "learnable", "too_easy", "learnable"]
    assert out["id"].to_list() == rows(5)["id"].to_list()


def test_custom_boundaries():
    cfg = CurriculumConfig(n_samples=4, k=1, boundaries={"too_hard_max": 0.25, "too_easy_min": 0.75})
    out = tier_rows(rows(5), ScriptedEngine([0, 1, 2, 4, 3]), cfg, seed=0, score_fn=exact_scores)
    assert out["tier"].to_list() == ["too_hard", "too_hard", "learnable", "too_easy", "too_easy"]


def test_partial_credit_is_not_correct_and_verdict_objects_work():
    class V:
        def __init__(self, score):
            self.score = score

    out = tier_rows(
        rows(1),
        ScriptedEngine([4]),
        CurriculumConfig(n_samples=4, k=1),
        seed=0,
        score_fn=lambda items: [V(0.999), V(1.0), V(1 - 1e-12), V(0.0)],
    )
    assert out["n_correct"].to_list() == [2]


def test_scorer_sees_verifier_response_reference_params_and_engine_the_settings():
    seen = []
    engine = ScriptedEngine([1])
    cfg = CurriculumConfig(n_samples=2, k=1, temperature=0.7, top_p=0.9, max_new_tokens=11)
    df = rows(1).with_columns(pl.lit('{"tol": 0.1}').alias("verifier_params"))
    tier_rows(df, engine, cfg, seed=4, score_fn=lambda items: seen.extend(items) or [1.0] * len(items))
    assert seen == [("exact", "ok", "ok", '{"tol": 0.1}'), ("exact", "no", "ok", '{"tol": 0.1}')]
    ((_, n, sampling, _),) = engine.calls
    assert (n, sampling.temperature, sampling.top_p, sampling.max_new_tokens) == (2, 0.7, 0.9, 11)


def test_existing_tier_columns_are_replaced_and_missing_columns_named():
    first = tier_rows(rows(2), ScriptedEngine([0, 4]), CurriculumConfig(n_samples=4, k=1), 0, exact_scores)
    again = tier_rows(first, ScriptedEngine([4, 0]), CurriculumConfig(n_samples=4, k=1), 0, exact_scores)
    assert again.columns == first.columns
    assert again["tier"].to_list() == ["too_easy", "too_hard"]
    with pytest.raises(ValueError, match="verifier_params"):
        tier_rows(rows(2).drop("verifier_params"), ScriptedEngine([0, 0]), CurriculumConfig(), 0, exact_scores)


def test_scorer_returning_the_wrong_count_is_an_error():
    with pytest.raises(RuntimeError, match="one per item"):
        tier_rows(rows(1), ScriptedEngine([1]), CurriculumConfig(n_samples=2, k=1), 0, lambda items: [1.0])


def test_default_scorer_is_the_verifiers_package():
    df = rows(2).with_columns(pl.Series("reference", ["42", "7"]), pl.lit("math").alias("verifier"))

    class Answers:
        def generate(self, prompts, n, sampling, seed):
            return [[Completion("The answer is 42", (1,), (0.0,), "stop")] * n for _ in prompts]

    out = tier_rows(df, Answers(), CurriculumConfig(n_samples=2, k=1), seed=0, workers=0)
    assert out["n_correct"].to_list() == [2, 0]


def test_tier_to_dir_with_the_tiny_model_writes_the_stage(tiny_model_dir, tmp_path):
    cfg = CurriculumConfig(n_samples=3, k=2, max_new_tokens=4, engine_batch_size=8)
    df = rows(6, categories=("arith", "sql"))
    marks = iter(range(10_000))
    out = tier_to_dir(
        df, tiny_model_dir, cfg, tmp_path, seed=0, score_fn=lambda items: [float(next(marks) % 2) for _ in items]
    )
    disk = pl.read_parquet(tmp_path / "tiers.parquet")
    assert disk.equals(out)
    rollouts = pl.read_parquet(tmp_path / ROLLOUTS_FILE)
    assert rollouts.columns == list(ROLLOUT_COLUMNS) and rollouts.height == 6 * 3
    counted = rollouts.group_by("id").agg(pl.col("correct").sum().alias("c")).sort("id")
    assert counted["c"].to_list() == disk.sort("id")["n_correct"].to_list()
    assert (rollouts["n_tokens"] <= 4).all() and set(rollouts["finish_reason"]) <= {"stop", "length"}
    assert disk.columns == df.columns + ["n_samples", "n_correct", "pass_at_1", "pass_at_k", "tier"]
    stats = json.loads((tmp_path / "tiers_stats.json").read_text())
    assert stats["rows_in"] == stats["rows_kept"] + stats["rows_rejected"] == 6
    assert sum(stats["tiers"].values()) == 6
    assert pl.read_parquet(tmp_path / "tiers_rejects.parquet").height == 0
    assert (tmp_path / "tier_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "tier_report.md").read_text()
    assert "| arith | learnable |" in md and "| sql |" in md and "pass@2" in md
    table = pl.read_csv(tmp_path / "tier_table.csv")
    assert table.filter(pl.col("category") != "(all)")["prompts"].sum() == 6
    assert table.filter(pl.col("category") == "(all)")["prompts"].sum() == 6


def test_rollouts_keep_every_sample_with_its_verdict():
    from rlvrflow.verifiers.verdict import Verdict

    def verdicts(items):
        return [Verdict(1.0, "correct", "ok") if r == "ok" else Verdict(0.0, "wrong", r) for _, r, _, _ in items]

    tiered, roll = tier_with_rollouts(
        rows(3), ScriptedEngine([2, 0, 3]), CurriculumConfig(n_samples=3, k=1), seed=0, score_fn=verdicts
    )
    assert roll.columns == list(ROLLOUT_COLUMNS)
    assert roll["id"].to_list() == [f"id{i}" for i in range(3) for _ in range(3)]  # the tiered rows' order
    assert roll["sample"].to_list() == [0, 1, 2] * 3
    assert roll.filter(pl.col("id") == "id0")["response"].to_list() == ["ok", "ok", "no"]
    assert roll.filter(pl.col("id") == "id0")["status"].to_list() == ["correct", "correct", "wrong"]
    assert roll["extracted"].to_list()[:3] == ["ok", "ok", "no"]
    assert roll["correct"].to_list() == [True, True, False, False, False, False, True, True, True]
    assert tiered["n_correct"].to_list() == [2, 0, 3]
    assert tiered.equals(tier_rows(rows(3), ScriptedEngine([2, 0, 3]), CurriculumConfig(n_samples=3, k=1), 0, verdicts))


def test_rollouts_of_plain_scores_have_no_status_and_empty_input_gives_empty_tables():
    tiered, roll = tier_with_rollouts(
        rows(2), ScriptedEngine([1, 2]), CurriculumConfig(n_samples=2, k=1), 0, exact_scores
    )
    assert roll["status"].null_count() == 4 and roll["score"].to_list() == [1.0, 0.0, 1.0, 1.0]
    empty, none = tier_with_rollouts(rows(0), ScriptedEngine([]), CurriculumConfig(n_samples=2, k=1), 0, exact_scores)
    assert empty.height == 0 and none.height == 0 and none.columns == list(ROLLOUT_COLUMNS)


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tier_rows(rows(3), ScriptedEngine([1, 2, 3]), CurriculumConfig(n_samples=3, k=1), 0, exact_scores)
    assert "tiering" not in capsys.readouterr().err  # stderr is not a terminal under pytest: quiet
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    tier_rows(rows(3), ScriptedEngine([1, 2, 3]), CurriculumConfig(n_samples=3, k=1), 0, exact_scores)
    assert "tiering:" in term.getvalue() and "0/3 [" in term.getvalue()  # a bar over the 3 prompts
