"""VLLMEngine's seeded sampling: every sample of a call draws from its own generator.

vLLM seeds a request's n samples seed, seed + 1, ..., seed + n - 1. With per-prompt seeds one apart,
prompt i + 1's samples were prompt i's shifted by one, so a GRPO batch of repeated prompts held a
handful of distinct completions and training on vLLM rollouts collapsed. Run with `make test-vllm`.
"""

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

from rlvrflow.engines.hf_engine import SamplingParams  # noqa: E402
from rlvrflow.engines.vllm_engine import VLLMEngine  # noqa: E402

N = 4
SAMPLED = SamplingParams(temperature=1.0, max_new_tokens=8)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    eng = VLLMEngine(str(tiny_model_dir), dtype="float32", max_model_len=128, enforce_eager=True)
    yield eng
    eng.close()


def _sent_params(llm, monkeypatch) -> list:
    """The vLLM SamplingParams of every request the engine sends, call after call."""
    sent, real = [], llm.generate

    def generate(inputs, params, **kwargs):
        sent.extend(params)
        return real(inputs, params, **kwargs)

    monkeypatch.setattr(llm, "generate", generate)
    return sent


def test_repeated_prompts_get_independent_samples(engine):
    groups = engine.generate(["12+3="] * 4, n=N, sampling=SAMPLED, seed=0)
    samples = [[c.token_ids for c in g] for g in groups]
    for i, a in enumerate(samples):
        for k, b in enumerate(samples):
            for shift in range(1, N):
                assert b[: N - shift] != a[shift:], f"prompt {k}'s samples are prompt {i}'s shifted by {shift}"
    assert len({ids for g in samples for ids in g}) > 2 * N


@pytest.mark.parametrize("n", [1, 3, 8])
def test_no_two_samples_of_a_call_share_a_seed(engine, monkeypatch, n):
    sent = _sent_params(engine.llm, monkeypatch)
    engine.generate(["12+3=", "a", "12+3=", "what is 7*8?", "a"], n=n, sampling=SAMPLED, seed=5)
    seeds = [p.seed + j for p in sent for j in range(p.n)]  # vLLM's seed for each of a request's n samples
    assert len(seeds) == 5 * n and len(set(seeds)) == len(seeds)
