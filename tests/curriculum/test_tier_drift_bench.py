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
    return pl.DataFrame(
        {
            "id": [pid for pid, c in correct.items() for _ in c],
            "sample": [j for c in correct.values() for j in range(len(c))],
            "correct": [x for c in correct.values() for x in c],
        }
    )


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


def test_sequence_logprobs_match_a_plain_forward(bench, tiny_model_dir):
    """Stopped samples end on EOS, cut ones do not; a sample whose text does not give back its tokens is left out."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tiers = pl.DataFrame({"id": ["x", "y"], "prompt": ["q1", "q22"]})
    samples = [("x", 0, "12", "stop"), ("x", 1, "3+4=7", "length"), ("y", 0, "9", "stop"), ("y", 1, "56", "length")]
    n_tokens = [len(tok(text, add_special_tokens=False).input_ids) + (why == "stop") for _, _, text, why in samples]
    n_tokens[3] += 1  # as if a token had been lost in decoding
    ro = pl.DataFrame(
        {
            "id": [s[0] for s in samples],
            "sample": [s[1] for s in samples],
            "response": [s[2] for s in samples],
            "finish_reason": [s[3] for s in samples],
            "n_tokens": n_tokens,
            "correct": [True, False, True, False],
        }
    )
    got = bench.sequence_logprobs(tiny_model_dir, tiers, ro)
    assert set(got) == {("x", 0), ("x", 1), ("y", 0)}
    one_at_a_time = bench.sequence_logprobs(tiny_model_dir, tiers, ro, batch_prompts=1)
    assert one_at_a_time == pytest.approx(got, abs=1e-5)

    for pid, sample, text, why in samples[:3]:
        prompt = tok(dict(zip(tiers["id"], tiers["prompt"]))[pid]).input_ids  # raw prompts: with BOS
        completion = tok(text, add_special_tokens=False).input_ids + ([tok.eos_token_id] if why == "stop" else [])
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].log_softmax(-1)
        expected = sum(float(logits[len(prompt) + j - 1, t]) for j, t in enumerate(completion))
        assert got[(pid, sample)] == pytest.approx(expected, abs=1e-4)
    # y keeps one scored sample, so its estimate is that sample's outcome
    assert bench.reweighted_rates(ro, got, got) == pytest.approx({"x": 0.5, "y": 1.0})
