"""Model plumbing shared by SFT, GRPO and eval: device choice, loading, encoding and token log-probs.

A prompt is encoded with the tokenizer's own special tokens (the embedded tokenizer prepends `<s>`);
a completion is encoded without them and, for training targets, followed by EOS. Batches are
right-padded here (the rollout engine does its own left-padding for generation).
"""

from __future__ import annotations

from pathlib import Path

import torch

from training.grpo_math import token_logprobs


def pick_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("training.device is 'cuda' but no CUDA device is visible; set device: auto or cpu")
    return torch.device(name)


def set_threads(n: int) -> None:
    if n > 0:
        torch.set_num_threads(n)


def load_model_and_tokenizer(path: str | Path, device: torch.device, trainable: bool = True):
    """`AutoModelForCausalLM` + `AutoTokenizer` from a HF directory, float32 on `device`.

    The tokenizer gets a pad token (EOS) when it has none, so batching always works.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from curriculum.engines import HF_LOAD_LOCK

    with HF_LOAD_LOCK:  # from_pretrained is not thread-safe (see curriculum.engines)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.train(trainable)
    if not trainable:
        model.requires_grad_(False)
    return model, tokenizer


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    return tokenizer(prompt).input_ids


def encode_completion(tokenizer, text: str, add_eos: bool) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False).input_ids
    return ids + [tokenizer.eos_token_id] if add_eos else ids


def pad_pairs(
    prompts: list[list[int]], completions: list[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Right-pad prompt+completion pairs.

    Returns input_ids (B, L), attention_mask (B, L), completion target positions as a (B, Tc) index
    into the sequence (Tc = longest completion), and Tc. Position j of completion b is predicted by
    the logits at `starts[b] + j - 1`.
    """
    seqs = [p + c for p, c in zip(prompts, completions)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn[i, : len(s)] = 1
    t_c = max(1, max(len(c) for c in completions))
    starts = torch.tensor([len(p) for p in prompts], dtype=torch.long)
    pos = starts.unsqueeze(1) + torch.arange(t_c).unsqueeze(0)  # (B, Tc)
    return ids.to(device), attn.to(device), pos.clamp(max=width - 1).to(device), t_c


def completion_logprobs(
    model, prompts: list[list[int]], completions: list[list[int]], pad_id: int, device: torch.device,
    share_prompts: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of each completion token under `model` and the completion mask, both (B, Tc).

    When prompts repeat in the batch (a GRPO group: one prompt, G completions) and `share_prompts`
    is on, each distinct prompt runs through the model once and its KV cache is repeated for its
    completions (`shared_prompt_logprobs`); gradients flow back through the shared prompt pass.
    """
    if share_prompts and len({tuple(p) for p in prompts}) < len(prompts):
        return shared_prompt_logprobs(model, prompts, completions, pad_id, device)
    ids, attn, pos, t_c = pad_pairs(prompts, completions, pad_id, device)
    logits = model(input_ids=ids, attention_mask=attn).logits  # (B, L, V)
    pred_pos = (pos - 1).clamp(min=0)  # logits at i predict token i+1
    logits_c = logits.gather(1, pred_pos.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))  # (B, Tc, V)
    targets = ids.gather(1, pos)  # (B, Tc)
    lengths = torch.tensor([len(c) for c in completions], device=device)
    mask = torch.arange(t_c, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, Tc)
    return token_logprobs(logits_c, targets), mask


def shared_prompt_logprobs(
    model, prompts: list[list[int]], completions: list[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """`completion_logprobs` with one forward pass per distinct prompt.

    Distinct prompts are left-padded and run once with the cache on; the cache is index-selected to
    one row per completion; the right-padded completions then run against it, with positions that
    continue each prompt's own. Token j of a completion is predicted by the logits before it: the
    prompt pass's last position for j = 0, the completion pass's position j - 1 after that.
    """
    order: dict[tuple[int, ...], int] = {}
    index = torch.tensor([order.setdefault(tuple(p), len(order)) for p in prompts], dtype=torch.long)
    uniq = list(order)
    width = max(len(p) for p in uniq)
    p_ids = torch.full((len(uniq), width), pad_id, dtype=torch.long)
    p_attn = torch.zeros((len(uniq), width), dtype=torch.long)
    for i, p in enumerate(uniq):
        p_ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        p_attn[i, width - len(p):] = 1
    p_ids, p_attn, index = p_ids.to(device), p_attn.to(device), index.to(device)
    p_pos = (p_attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=p_ids, attention_mask=p_attn, position_ids=p_pos, use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    if not hasattr(cache, "reorder_cache"):  # no transformers Cache (e.g. gradient checkpointing is on)
        return completion_logprobs(model, prompts, completions, pad_id, device, share_prompts=False)
    cache.reorder_cache(index)
    t_c = max(1, max(len(c) for c in completions))
    c_ids = torch.full((len(completions), t_c), pad_id, dtype=torch.long)
    for i, c in enumerate(completions):
        c_ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
    c_ids = c_ids.to(device)
    lengths = torch.tensor([len(c) for c in completions], device=device)
    mask = torch.arange(t_c, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, Tc)
    attn = torch.cat([p_attn[index], mask.long()], dim=1)
    c_pos = p_pos[index, -1:] + 1 + torch.arange(t_c, device=device).unsqueeze(0)
    logits = model(input_ids=c_ids, attention_mask=attn, position_ids=c_pos, past_key_values=cache).logits
    logits = torch.cat([out.logits[:, -1:, :][index], logits[:, :-1, :]], dim=1)  # (B, Tc, V)
    return token_logprobs(logits, c_ids), mask
