"""Eval metrics on an engine whose outputs are known, scored by the real math verifier."""

import polars as pl
import pytest

from curriculum import Completion
from training.config import EvalConfig
from training.eval import evaluate, evaluate_engine, select_eval_tasks


class ScriptedEngine:
    """Returns fixed texts: greedy (temperature 0) from `greedy`, sampled from `sampled`, per prompt."""

    def __init__(self, greedy: dict, sampled: dict):
        self.greedy, self.sampled, self.calls = greedy, sampled, []

    def generate(self, prompts, n, sampling, seed):
        self.calls.append((n, sampling.temperature))
        table = self.greedy if sampling.temperature == 0 else self.sampled
        out = []
        for p in prompts:
            texts = table[p] if isinstance(table[p], list) else [table[p]]
            assert len(texts) == n
            out.append([Completion(t, tuple(range(len(t))), (0.0,) * len(t), "stop") for t in texts])
        return out


def test_metrics_match_hand_counts(toy):
    rows = toy.copy_rows(3, 0).with_columns(
        pl.Series("prompt", ["Copy 1\n", "Copy 2\n", "Copy 3\n"]), pl.Series("reference", ["1", "2", "3"])
    )
    tasks = select_eval_tasks(rows, EvalConfig())
    refs = [t.reference for t in tasks]
    wrong = lambda r: str((int(r) + 1) % 10)  # noqa: E731
    greedy = {tasks[0].prompt: f"Answer: {refs[0]}", tasks[1].prompt: f"Answer: {wrong(refs[1])}",
              tasks[2].prompt: "no idea"}
    sampled = {
        tasks[0].prompt: [f"Answer: {refs[0]}"] * 4,
        tasks[1].prompt: [f"Answer: {refs[1]}", "hmm", f"Answer: {wrong(refs[1])}", "hmm"],
        tasks[2].prompt: ["hmm", "no idea", "hmm hmm", "no idea!"],
    }
    eng = ScriptedEngine(greedy, sampled)
    m = evaluate_engine(eng, tasks, EvalConfig(k=2, n_samples=4, workers=1), seed=0, workers=1)
    assert eng.calls == [(1, 0.0), (4, 1.0)]
    assert m["pass_at_1_greedy"] == pytest.approx(1 / 3)
    assert m["pass_at_1_sampled"] == pytest.approx((1 + 0.25 + 0) / 3)
    # pass@2 with n=4: prompt 1 c=4 -> 1; prompt 2 c=1 -> 1 - C(3,2)/C(4,2) = 0.5; prompt 3 -> 0
    assert m["pass_at_k"] == pytest.approx((1 + 0.5 + 0) / 3)
    # parsed answers: greedy 2 of 3, sampled 4 + 2 + 0 of 12
    assert m["format_rate"] == pytest.approx((2 + 6) / 15)
    assert m["format_rate_greedy"] == pytest.approx(2 / 3)
    lengths = [9] * 4 + [9, 3, 9, 3] + [3, 7, 7, 8]  # token_ids = one per character here
    assert m["length_mean"] == pytest.approx(sum(lengths) / 12)
    assert m["length_p50"] == pytest.approx(8.5)  # sorted: 3 3 3 7 7 8 9 9 9 9 9 9
    # variance of per-prompt success: 0, 0.25*0.75, 0
    assert m["per_prompt_variance"] == pytest.approx(0.1875 / 3)
    assert m["per_category"]["copy"]["n"] == 3


def test_max_prompts_takes_the_first_ids(toy):
    tasks = select_eval_tasks(toy.copy_rows(10, 0).reverse(), EvalConfig(max_prompts=3))
    assert [t.id for t in tasks] == ["train-0000", "train-0001", "train-0002"]


def test_max_prompts_keeps_each_categorys_share(toy):
    """Ids sorted by source prefix must not crowd out the later categories."""
    import polars as pl

    a = toy.copy_rows(60, 0).with_columns(pl.lit("a").alias("category"), ("a-" + pl.col("id")).alias("id"))
    b = toy.copy_rows(30, 1).with_columns(pl.lit("b").alias("category"), ("b-" + pl.col("id")).alias("id"))
    c = toy.copy_rows(10, 2).with_columns(pl.lit("c").alias("category"), ("c-" + pl.col("id")).alias("id"))
    rows = pl.concat([c, a, b])
    tasks = select_eval_tasks(rows, EvalConfig(max_prompts=20))
    counts = {k: sum(t.category == k for t in tasks) for k in "abc"}
    assert counts == {"a": 12, "b": 6, "c": 2}
    assert [t.id for t in tasks] == sorted(t.id for t in tasks)
    assert [t.id for t in tasks if t.category == "c"] == ["c-train-0000", "c-train-0001"]
    odd = select_eval_tasks(rows, EvalConfig(max_prompts=7))  # 4.2 / 2.1 / 0.7: the remainder goes to c
    assert len(odd) == 7 and {k: sum(t.category == k for t in odd) for k in "abc"} == {"a": 4, "b": 2, "c": 1}
    assert select_eval_tasks(rows, EvalConfig(max_prompts=20)) == tasks


def test_evaluate_a_saved_model_is_deterministic(sft_model, toy):
    rows = toy.copy_rows(12, 3, split="eval")
    cfg = EvalConfig(k=2, n_samples=3, max_new_tokens=12, workers=1)
    a = evaluate(sft_model, rows, cfg, seed=5, device="cpu")
    b = evaluate(sft_model, rows, cfg, seed=5, device="cpu")
    assert a == b
    assert 0.0 <= a["pass_at_1_greedy"] <= 1.0 and a["format_rate"] > 0.5  # SFT taught the format
