"""bench/tier_drift.py's own pieces: sequence log-probs of the stored tiering samples and the
importance-reweighted success rate. If these drift, the bench's staleness figures would be wrong."""

from __future__ import annotations

import math

import polars as pl
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("tier_drift")


def rollouts(correct: dict[str, list[bool]]) -> pl.DataFrame:
    return pl.DataFrame({
        "id": [pid for pid, c in correct.items() for _ in c],
        "sample": [j for c in correct.values() for j in range(len(c))],
        "correct": [x for c in correct.values() for x in c],
    })


def test_unchanged_model_gives_the_offline_rate(bench):
    ro = rollouts({"a": [True, False, False, False], "b": [True, True, True, False]})
    logp = {(pid, s): -3.0 - s for pid, s in zip(ro["id"], ro["sample"])}
    rates = bench.reweighted_rates(ro, logp, logp)
    assert rates == pytest.approx({"a": 0.25, "b": 0.75})


def test_weights_follow_the_new_model(bench):
    ro = rollouts({"a": [True, False, False, False]})
    old = {("a", s): -5.0 for s in range(4)}
    up = {("a", 0): -5.0 + math.log(9.0), **{("a", s): -5.0 for s in (1, 2, 3)}}  # the right one 9x likelier
    down = {("a", 0): -5.0 - 30.0, **{("a", s): -5.0 for s in (1, 2, 3)}}
    assert bench.reweighted_rates(ro, up, old)["a"] == pytest.approx(9 / 12)
    assert bench.reweighted_rates(ro, down, old)["a"] == pytest.approx(0.0, abs=1e-9)
    # huge log-weights do not overflow: only their differences matter
    huge = {k: v + 5_000.0 for k, v in up.items()}
    assert bench.reweighted_rates(ro, huge, old)["a"] == pytest.approx(9 / 12)


def test_sequence_logprobs_match_a_plain_forward(bench, tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from curriculum.config import CurriculumConfig
    from curriculum.tiering import ROLLOUTS_FILE, tier_to_dir

    df = pl.DataFrame({"id": ["x", "y"], "category": ["c", "c"], "prompt": ["q1", "q22"],
                       "reference": ["ok", "ok"], "verifier": ["exact", "exact"], "verifier_params": ["{}", "{}"]})
    tiers = tier_to_dir(df, tiny_model_dir, CurriculumConfig(n_samples=3, k=2, max_new_tokens=5), tmp_path, seed=0,
                        score_fn=lambda items: [0.0 for _ in items])
    ro = pl.read_parquet(tmp_path / ROLLOUTS_FILE)
    got = bench.sequence_logprobs(tiny_model_dir, tiers, ro)
    assert set(got) == {(i, s) for i in ("x", "y") for s in range(3)}

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for row in ro.iter_rows(named=True):
        prompt = tok(dict(zip(df["id"], df["prompt"]))[row["id"]]).input_ids  # raw prompts: with BOS
        completion = tok(row["response"], add_special_tokens=False).input_ids
        if row["finish_reason"] == "stop":
            completion = completion + [tok.eos_token_id]
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].log_softmax(-1)
        expected = sum(float(logits[len(prompt) + j - 1, t]) for j, t in enumerate(completion))
        assert got[(row["id"], row["sample"])] == pytest.approx(expected, abs=1e-4)
