"""engines/attention.py: grouped-query attention on CPU without transformers' copy of the KV heads. The
switch must change nothing a run can see (logits, greedy tokens, sampled tokens, gradients, the saved
checkpoint) and must really skip the copy."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


def gqa_model(tokenizer, heads: int = 4, kv_heads: int = 2, seed: int = 0):
    from ..conftest import build_model

    return build_model(tokenizer, seed, heads=heads, kv_heads=kv_heads)


@pytest.fixture
def saved(tmp_path, tiny_tokenizer):
    out = tmp_path / "gqa"
    gqa_model(tiny_tokenizer).save_pretrained(out)
    tiny_tokenizer.save_pretrained(out)
    return out


def padded_batch(tokenizer):
    # left padding, as the rollout engine batches prompts of different lengths: the mask is what made
    # transformers copy the heads
    return tokenizer(["hello world, this is a longer prompt", "hi"], return_tensors="pt", padding=True)


def test_loaded_on_cpu_it_runs_sdpa_gqa_and_matches_sdpa_exactly(saved, tiny_tokenizer, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rlvrflow.training.modeling import load_model_and_tokenizer

    plain = AutoModelForCausalLM.from_pretrained(saved).eval()
    assert plain.config._attn_implementation == "sdpa"
    model, _ = load_model_and_tokenizer(saved, torch.device("cpu"), trainable=False)
    assert model.config._attn_implementation == "sdpa_gqa"
    batch = padded_batch(tiny_tokenizer)
    with torch.no_grad():
        expected = plain(**batch).logits
        want = plain.generate(**batch, max_new_tokens=12, do_sample=False, pad_token_id=tiny_tokenizer.pad_token_id)

    import transformers.integrations.sdpa_attention as sdpa

    def no_copy(*args, **kwargs):
        raise AssertionError("repeat_kv called: the KV heads were copied")

    monkeypatch.setattr(sdpa, "repeat_kv", no_copy)
    with torch.no_grad():
        got = model(**batch).logits
        tokens = model.generate(**batch, max_new_tokens=12, do_sample=False, pad_token_id=tiny_tokenizer.pad_token_id)
    assert torch.equal(got, expected)
    assert torch.equal(tokens, want)


def test_gradients_match_sdpa(saved, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from rlvrflow.training.modeling import load_model_and_tokenizer

    plain = AutoModelForCausalLM.from_pretrained(saved).train()
    model, _ = load_model_and_tokenizer(saved, torch.device("cpu"), trainable=True)
    batch = padded_batch(tiny_tokenizer)
    for m in (plain, model):
        m(**batch, labels=batch["input_ids"]).loss.backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), model.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6, rtol=1e-5), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "q_len,kv_len,masked",
    [(5, 5, True), (5, 5, False), (1, 9, True), (1, 9, False), (3, 8, False), (4, 4, "float")],
    ids=["prefill-padded", "prefill-causal", "decode-padded", "decode", "static-cache-prefill", "float-mask"],
)
def test_the_function_matches_transformers_sdpa_in_every_case_a_decoder_hits(q_len, kv_len, masked, dtype):
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from rlvrflow.engines.attention import _sdpa_gqa_forward

    g = torch.Generator().manual_seed(0)
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    q = torch.randn(2, 6, q_len, 16, generator=g).to(dtype)
    k, v = (torch.randn(2, 2, kv_len, 16, generator=g).to(dtype) for _ in range(2))
    mask = None
    if masked:
        # row 0 left-padded by 2, causal over the last q_len positions
        causal = torch.arange(kv_len)[None, :] <= torch.arange(kv_len - q_len, kv_len)[:, None]
        keep = torch.ones(2, 1, q_len, kv_len, dtype=torch.bool) & causal
        keep[0, :, :, :2] = False
        mask = keep if masked is True else torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, float("-inf"))
    want, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.25)
    got, _ = _sdpa_gqa_forward(module, q, k, v, mask, scaling=0.25)
    assert got.shape == want.shape == (2, q_len, 6, 16)
    assert torch.allclose(got, want, atol=1e-6 if dtype == torch.float32 else 1e-2, rtol=0)


def test_a_lora_policy_runs_it_and_trains_the_same(saved, tiny_tokenizer):
    from rlvrflow.training.config import LoRAConfig
    from rlvrflow.training.modeling import load_policy

    model, _ = load_policy(saved, torch.device("cpu"), torch.float32, LoRAConfig(r=4, alpha=8.0))
    assert model.base_model.model.config._attn_implementation == "sdpa_gqa"
    batch = padded_batch(tiny_tokenizer)
    loss = model(**batch, labels=batch["input_ids"]).loss
    model.base_model.model.set_attn_implementation("sdpa")
    assert torch.equal(loss, model(**batch, labels=batch["input_ids"]).loss)


def test_the_rollout_engine_switches_and_samples_the_same_tokens(saved, tiny_tokenizer, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rlvrflow.engines.factory import make_engine
    from rlvrflow.engines.hf_engine import HFEngine, SamplingParams

    engine = make_engine("hf", saved, device="cpu")
    assert engine.model.config._attn_implementation == "sdpa_gqa"
    plain = HFEngine(AutoModelForCausalLM.from_pretrained(saved).eval(), tiny_tokenizer, device="cpu")
    prompts = ["hello world, this is a longer prompt", "hi"]
    params = SamplingParams(max_new_tokens=10, temperature=1.0)
    want = plain.generate(prompts, 3, params, seed=7)
    import transformers.integrations.sdpa_attention as sdpa

    def no_copy(*args, **kwargs):
        raise AssertionError("repeat_kv called: the KV heads were copied")

    monkeypatch.setattr(sdpa, "repeat_kv", no_copy)  # the engine's own decoder (shared prompts) included
    got = engine.generate(prompts, 3, params, seed=7)
    assert [[c.token_ids for c in g] for g in got] == [[c.token_ids for c in g] for g in want]


def test_the_saved_checkpoint_does_not_record_it(saved, tmp_path):
    from rlvrflow.training.modeling import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(saved, torch.device("cpu"), trainable=False)
    model.save_pretrained(tmp_path / "again")
    config = json.loads((tmp_path / "again/config.json").read_text())
    assert "sdpa_gqa" not in json.dumps(config)
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(tmp_path / "again").config._attn_implementation == "sdpa"


def test_left_alone_without_grouped_heads_off_cpu_or_off_sdpa(tiny_tokenizer):
    from rlvrflow.engines.attention import use_cpu_gqa

    ungrouped = gqa_model(tiny_tokenizer, heads=2, kv_heads=2)
    assert not use_cpu_gqa(ungrouped, "cpu") and ungrouped.config._attn_implementation == "sdpa"
    grouped = gqa_model(tiny_tokenizer)
    assert not use_cpu_gqa(grouped, "cuda") and grouped.config._attn_implementation == "sdpa"
    ungrouped.config.num_key_value_heads = None  # a config without the field: one KV head per query head
    assert not use_cpu_gqa(ungrouped, "cpu")
    grouped.set_attn_implementation("eager")
    assert not use_cpu_gqa(grouped, torch.device("cpu")) and grouped.config._attn_implementation == "eager"
    assert use_cpu_gqa(gqa_model(tiny_tokenizer), torch.device("cpu"))
