"""engines/attention.py: grouped-query attention on CPU without transformers' copy of the KV heads. The
switch must change nothing a run can see (logits, greedy tokens, sampled tokens, gradients, the saved
checkpoint) and must really skip the copy."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


def gqa_model(tokenizer, heads: int = 4, kv_heads: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


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


def test_the_rollout_engine_switches_and_samples_the_same_tokens(saved, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from rlvrflow.engines.factory import make_engine
    from rlvrflow.engines.hf_engine import HFEngine, SamplingParams

    engine = make_engine("hf", saved, device="cpu")
    assert engine.model.config._attn_implementation == "sdpa_gqa"
    plain = HFEngine(AutoModelForCausalLM.from_pretrained(saved).eval(), tiny_tokenizer, device="cpu")
    prompts = ["hello world, this is a longer prompt", "hi"]
    params = SamplingParams(max_new_tokens=10, temperature=1.0)
    got = engine.generate(prompts, 3, params, seed=7)
    want = plain.generate(prompts, 3, params, seed=7)
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
    grouped.set_attn_implementation("eager")
    assert not use_cpu_gqa(grouped, torch.device("cpu")) and grouped.config._attn_implementation == "eager"
    assert use_cpu_gqa(gqa_model(tiny_tokenizer), torch.device("cpu"))
