"""Model plumbing shared by SFT, GRPO and eval: device choice, loading, encoding and token log-probs.

A prompt is encoded by its `PromptFormat` (engines.hf_engine): raw text with the tokenizer's own
special tokens (the embedded tokenizer prepends `<s>`), or the chat template's rendering. A
completion is encoded without special tokens and, for training targets, followed by the format's end
token (EOS raw, the template's end-of-turn token chat). Batches are right-padded here (the rollout
engine does its own left-padding for generation). A directory holding a LoRA adapter loads as its
base model with the adapter on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

from rlvrflow.training.grpo_math import token_logprobs, token_logprobs_and_entropy


def pick_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("training.device is 'cuda' but no CUDA device is visible; set device: auto or cpu")
    return torch.device(name)


def set_threads(n: int) -> int:
    """`torch.set_num_threads(n)`; n = 0 (`training.torch_threads`' default) picks `auto_threads()`.

    Returns the count set. Process-wide: every model in this process uses it.
    """
    n = n if n > 0 else auto_threads()
    torch.set_num_threads(n)
    return n


def auto_threads() -> int:
    """One torch thread per two usable cores, at least 1 and at most 4.

    torch's own default (one thread per core) spins every core at each op's barrier; when another job
    shares the machine, the threads wait on each other and a step gets many times slower (measured
    in `TrainingConfig.torch_threads`' description). Half the cores leave room for the verifier
    processes and whatever else runs; past 4 the small models trained on CPU here gain little.
    """
    return max(1, min(4, usable_cores() // 2))


def usable_cores(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (a container's --cpus)."""
    import math
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def load_model_and_tokenizer(
    path: str | Path, device: torch.device, trainable: bool = True, dtype: torch.dtype = torch.float32
):
    """`AutoModelForCausalLM` + `AutoTokenizer` from a HF directory, weights in `dtype` on `device`.

    A LoRA adapter directory loads its base (in `dtype`, frozen) with the adapter on top (trainable
    when `trainable`). The tokenizer gets a pad token (EOS) when it has none, so batching always works.
    """
    from rlvrflow.engines.attention import use_cpu_gqa
    from rlvrflow.engines.hf_engine import HF_LOAD_LOCK
    from rlvrflow.training import lora

    adapter = lora.is_adapter_dir(path)
    weights = lora.adapter_base(path) if adapter else path
    with HF_LOAD_LOCK:  # importing transformers and from_pretrained are not thread-safe (see engines.hf_engine)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=dtype).to(device)
        use_cpu_gqa(model, device)  # grouped KV heads without transformers' copy of them (engines/attention.py)
    if adapter:
        model.requires_grad_(False)
        model = lora.load_adapters(model, path, trainable)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.train(trainable)
    if not trainable:
        model.requires_grad_(False)
    return model, tokenizer


def load_policy(
    path: str | Path, device: torch.device, dtype: torch.dtype, lora_cfg=None, base: str | Path | None = None
):
    """The model to train and its tokenizer.

    Full fine-tuning: `path`'s weights in float32 (master weights; forwards autocast to `dtype`).
    LoRA (`lora_cfg`): the base in `dtype`, frozen, under fresh float32 adapters; or, when `path` is an
    adapter checkpoint (resume), under its adapters. `base` names the base directory by its absolute
    path (recorded in the adapter's config). Raises when the checkpoint's kind does not match the config.
    """
    from rlvrflow.training import lora

    if lora_cfg is None:
        if lora.is_adapter_dir(path):
            raise ValueError(
                f"{path} holds LoRA adapters but training.lora is not set; set training.lora as it "
                "was for that run, or start in a new output directory"
            )
        return load_model_and_tokenizer(path, device, trainable=True, dtype=torch.float32)
    if lora.is_adapter_dir(path):
        return load_model_and_tokenizer(path, device, trainable=True, dtype=dtype)
    if base is not None and Path(path).resolve() != Path(base).resolve():
        raise ValueError(
            f"{path} holds full weights but training.lora is set; resume without lora, or start in a "
            "new output directory"
        )
    model, tokenizer = load_model_and_tokenizer(Path(path).resolve(), device, trainable=False, dtype=dtype)
    model = lora.add_adapters(model, lora_cfg)
    model.train(True)
    return model, tokenizer


def encode_prompt(tokenizer, prompt: str, fmt=None) -> list[int]:
    """Prompt ids in `fmt` (a `engines.hf_engine.PromptFormat`; raw when None)."""
    from rlvrflow.engines.hf_engine import PromptFormat

    return (fmt or PromptFormat()).encode(tokenizer, prompt)


def encode_completion(tokenizer, text: str, add_eos: bool, end_id: int | None = None) -> list[int]:
    """Completion ids; with `add_eos`, followed by `end_id` (default: the tokenizer's EOS)."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    return ids + [tokenizer.eos_token_id if end_id is None else end_id] if add_eos else ids


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
    model,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    device: torch.device,
    share_prompts: bool = True,
    entropy: Literal["value", "grad"] | None = None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, ...]:
    """Log-probs of each completion token under `model` and the completion mask, both (B, Tc); with
    `entropy`, a third (B, Tc) tensor: the entropy of the model's distribution at each of those
    positions (`grpo_math.token_logprobs_and_entropy`), with its graph ("grad") or as a value only.

    `temperature` scores the distribution rollouts at that temperature draw from, softmax(logits / T)
    (GRPO's policy, old policy and reference alike, as TRL and verl score theirs); 1 for SFT and DPO.

    When prompts repeat in the batch (a GRPO group: one prompt, G completions) and `share_prompts`
    is on, each distinct prompt runs through the model once and its KV cache is repeated for its
    completions (`shared_prompt_logprobs`); gradients flow back through the shared prompt pass.
    """
    if entropy not in (None, "value", "grad"):
        raise ValueError(f"entropy={entropy!r} is not None, 'value' or 'grad'")
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be > 0: a greedy completion has no log-probs to train")
    if share_prompts and len({tuple(p) for p in prompts}) < len(prompts):
        return shared_prompt_logprobs(model, prompts, completions, pad_id, device, entropy, temperature)
    ids, attn, pos, t_c = pad_pairs(prompts, completions, pad_id, device)
    pred_pos = (pos - 1).clamp(min=0)  # logits at i predict token i+1
    # the LM head runs only from the earliest position a completion token needs: SFT prompts are
    # several times their completions, and the head's (B, L, V) logits cost 8-12% of an SFT step
    keep = ids.shape[1] - int(pred_pos.min())
    logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=keep).logits  # (B, keep, V)
    pred_pos = pred_pos - (ids.shape[1] - keep)
    logits_c = logits.gather(1, pred_pos.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))  # (B, Tc, V)
    targets = ids.gather(1, pos)  # (B, Tc)
    lengths = torch.tensor([len(c) for c in completions], device=device)
    mask = torch.arange(t_c, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, Tc)
    return _scored(logits_c, targets, mask, entropy, temperature)


def _scored(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, entropy: str | None, temperature: float
) -> tuple:
    if temperature != 1.0:  # in float32, as the engines divide before they draw (autocast logits are bf16)
        logits = logits.float() / temperature
    if entropy is None:
        return token_logprobs(logits, targets), mask
    logp, ent = token_logprobs_and_entropy(logits, targets, grad=entropy == "grad")
    return logp, mask, ent


def shared_prompt_logprobs(
    model,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    device: torch.device,
    entropy: Literal["value", "grad"] | None = None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, ...]:
    """`completion_logprobs` with one forward pass per distinct prompt.

    Distinct prompts are right-padded and run once with the cache on; the cache is index-selected to
    one row per completion; the right-padded completions then run against it, with positions that
    continue each prompt's own (the padding between a prompt and its completion is masked). Token j of
    a completion is predicted by the logits before it: the prompt pass's last real position for j = 0,
    the completion pass's position j - 1 after that.

    Right, not left, padding: a left pad attends to nothing, and CUDA's bf16 attention kernels give such
    a fully masked row NaN gradients (the row is masked out of the loss, but NaN times a zero gradient
    is NaN in every weight's gradient). Measured on an H200 with SmolLM2-135M: NaN in all 264
    parameters' gradients with left-padded prompts of 62-64 tokens under bf16 autocast, none with right
    padding, float32 or eager attention (docs/RESULTS.md).
    """
    order: dict[tuple[int, ...], int] = {}
    index = torch.tensor([order.setdefault(tuple(p), len(order)) for p in prompts], dtype=torch.long)
    uniq = list(order)
    lens = torch.tensor([len(p) for p in uniq], dtype=torch.long)
    p_ids = torch.full((len(uniq), int(lens.max())), pad_id, dtype=torch.long)
    for i, p in enumerate(uniq):
        p_ids[i, : len(p)] = torch.tensor(p, dtype=torch.long)
    p_attn = (torch.arange(p_ids.shape[1]).unsqueeze(0) < lens.unsqueeze(1)).long()
    p_pos = torch.arange(p_ids.shape[1]).unsqueeze(0).expand(len(uniq), -1)
    last = torch.unique(lens - 1)  # sorted: the LM head runs only where some prompt ends
    p_ids, p_attn, p_pos, index, lens, last = (x.to(device) for x in (p_ids, p_attn, p_pos, index, lens, last))
    out = model(input_ids=p_ids, attention_mask=p_attn, position_ids=p_pos, use_cache=True, logits_to_keep=last)
    first = out.logits[torch.arange(len(uniq), device=device), torch.searchsorted(last, lens - 1)]  # (U, V)
    cache = out.past_key_values
    if not hasattr(cache, "reorder_cache"):  # no transformers Cache (e.g. gradient checkpointing is on)
        return completion_logprobs(
            model, prompts, completions, pad_id, device, share_prompts=False, entropy=entropy, temperature=temperature
        )
    cache.reorder_cache(index)
    t_c = max(1, max(len(c) for c in completions))
    c_ids = torch.full((len(completions), t_c), pad_id, dtype=torch.long)
    for i, c in enumerate(completions):
        c_ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
    c_ids = c_ids.to(device)
    lengths = torch.tensor([len(c) for c in completions], device=device)
    mask = torch.arange(t_c, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, Tc)
    attn = torch.cat([p_attn[index], mask.long()], dim=1)
    c_pos = lens[index].unsqueeze(1) + torch.arange(t_c, device=device).unsqueeze(0)
    logits = model(input_ids=c_ids, attention_mask=attn, position_ids=c_pos, past_key_values=cache).logits
    logits = torch.cat([first[index].unsqueeze(1), logits[:, :-1, :]], dim=1)  # (B, Tc, V)
    return _scored(logits, c_ids, mask, entropy, temperature)
