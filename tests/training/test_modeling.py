"""`completion_logprobs`: the shared-prompt forward (one pass per distinct prompt, KV cache repeated
for its completions) must give the plain padded forward's log-probs, mask and gradients."""

import pytest
import torch

from rlvrflow.training.modeling import completion_logprobs, load_model_and_tokenizer


def _batch(tokenizer):
    enc = lambda s: tokenizer(s).input_ids  # noqa: E731
    comp = lambda s: tokenizer(s, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]  # noqa: E731
    prompts = [enc("Copy 7\n")] * 3 + [enc("Copy 12345\n")] * 2 + [enc("x")]
    comps = [comp("Answer: 7"), comp("7"), comp("Answer: 77777"), comp("Answer: 12345"), comp(""), comp("ok")]
    return prompts, comps


def _run(model, prompts, comps, pad, share):
    model.zero_grad(set_to_none=True)
    logp, mask = completion_logprobs(model, prompts, comps, pad, torch.device("cpu"), share_prompts=share)
    (logp * mask).sum().backward()
    return logp.detach(), mask, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_shared_prompt_forward_equals_the_plain_forward(base_model):
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"))
    prompts, comps = _batch(tok)
    plain = _run(model, prompts, comps, tok.pad_token_id, share=False)
    shared = _run(model, prompts, comps, tok.pad_token_id, share=True)
    assert torch.equal(plain[1], shared[1])
    assert plain[1].sum() == sum(len(c) for c in comps)
    assert torch.allclose(plain[0][plain[1]], shared[0][shared[1]], atol=1e-5)
    for name, g in plain[2].items():
        assert torch.isfinite(shared[2][name]).all(), name
        assert torch.allclose(g, shared[2][name], atol=1e-5, rtol=1e-4), name


@pytest.mark.parametrize("share", [True, False])
def test_logprobs_equal_a_single_unpadded_sequence(base_model, share):
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"), trainable=False)
    prompts, comps = _batch(tok)
    logp, mask = completion_logprobs(model, prompts, comps, tok.pad_token_id, torch.device("cpu"), share_prompts=share)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1]
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        assert torch.allclose(logp[i, : len(c)], want, atol=1e-5)


def test_without_a_cache_the_shared_forward_falls_back_to_the_plain_one(base_model):
    """Gradient checkpointing turns the cache off in training mode: same numbers through the plain path."""
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"))
    prompts, comps = _batch(tok)
    plain = _run(model, prompts, comps, tok.pad_token_id, share=False)
    model.gradient_checkpointing_enable()
    try:
        fallback = _run(model, prompts, comps, tok.pad_token_id, share=True)
    finally:
        model.gradient_checkpointing_disable()
    assert torch.allclose(plain[0][plain[1]], fallback[0][fallback[1]], atol=1e-5)


@pytest.mark.parametrize("share", [True, False])
def test_entropy_per_completion_position_matches_a_plain_forward(base_model, share):
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"), trainable=False)
    prompts, comps = _batch(tok)
    logp, mask, ent = completion_logprobs(
        model, prompts, comps, tok.pad_token_id, torch.device("cpu"), share_prompts=share, entropy="value"
    )
    plain, _ = completion_logprobs(model, prompts, comps, tok.pad_token_id, torch.device("cpu"), share_prompts=share)
    assert torch.equal(logp, plain)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        with torch.no_grad():
            probs = torch.softmax(model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float(), dim=-1)
        want = -(probs * probs.log()).sum(-1)
        assert torch.allclose(ent[i, : len(c)], want, atol=1e-4), i
    assert (ent[mask] > 0).all()
    with pytest.raises(ValueError, match="entropy='yes'"):
        completion_logprobs(model, prompts, comps, tok.pad_token_id, torch.device("cpu"), entropy="yes")


@pytest.mark.parametrize("share", [True, False])
def test_a_temperature_scores_the_tempered_distribution(base_model, share):
    """GRPO scores its policy at the rollout temperature: log_softmax(logits / T) and its entropy."""
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"), trainable=False)
    prompts, comps = _batch(tok)
    logp, mask, ent = completion_logprobs(
        model,
        prompts,
        comps,
        tok.pad_token_id,
        torch.device("cpu"),
        share_prompts=share,
        entropy="value",
        temperature=1.5,
    )
    at_one, _ = completion_logprobs(model, prompts, comps, tok.pad_token_id, torch.device("cpu"), share_prompts=share)
    assert not torch.allclose(logp[mask], at_one[mask], atol=1e-3)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float() / 1.5
        want = torch.log_softmax(logits, -1)
        assert torch.allclose(logp[i, : len(c)], want.gather(-1, torch.tensor(c)[:, None])[:, 0], atol=1e-5)
        assert torch.allclose(ent[i, : len(c)], -(want.exp() * want).sum(-1), atol=1e-4), i
    with pytest.raises(ValueError, match="temperature=0"):
        completion_logprobs(model, prompts, comps, tok.pad_token_id, torch.device("cpu"), temperature=0)


def test_the_temperature_divides_16_bit_logits_in_float32(base_model):
    """Under bf16 autocast the logits are bf16; dividing them by T before the float32 cast would round
    once more than the engines do (they cast, then divide), a gap the async ratio would carry."""
    model, tok = load_model_and_tokenizer(base_model, torch.device("cpu"), trainable=False)
    prompts, comps = _batch(tok)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for i, (p, c) in enumerate(zip(prompts, comps)):  # one pair a call: the same forward as the reference's
            logp, _ = completion_logprobs(model, [p], [c], tok.pad_token_id, torch.device("cpu"), temperature=1.3)
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1]
            assert logits.dtype == torch.bfloat16
            want = torch.log_softmax(logits.float() / 1.3, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
            assert torch.allclose(logp[0], want, atol=1e-6), i
