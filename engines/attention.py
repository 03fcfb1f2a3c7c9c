"""Grouped-query attention on CPU without copying the key/value heads.

transformers' `sdpa` attention repeats each key/value head for its query heads (`repeat_kv`, a copy of
the whole KV cache per layer per step) whenever an attention mask is passed, and the rollout engine
always passes one (left-padded rows). `scaled_dot_product_attention(..., enable_gqa=True)` does the
grouping inside the kernel; transformers uses it only without a mask because CUDA's fused kernels then
fall back to the slow math path. On CPU that restriction buys nothing: the profile of a SmolLM2-135M
rollout (bench/README.md, "Where the time goes") spent about a fifth of its time in attention and that
copy. `use_cpu_gqa` switches a model on CPU to `sdpa_gqa`, registered here: sdpa's own function and
mask, with `enable_gqa` whenever the heads are grouped. Models on GPU, models without grouped heads and
models on another attention implementation are left as they are. Saved checkpoints do not record it.
"""

from __future__ import annotations

import torch

NAME = "sdpa_gqa"
_registered = False


def _sdpa_gqa_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if (
        groups <= 1
        or query.device.type != "cpu"
        or kwargs.get("position_bias") is not None
        or kwargs.get("cache") is not None
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = query.shape[2] > 1 and attention_mask is None and is_causal
    if is_causal and key.shape[2] > query.shape[2]:  # prefill into an empty static cache, as sdpa does
        key, value = key[:, :, : query.shape[2]], value[:, :, : query.shape[2]]
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=is_causal,
        enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register `sdpa_gqa` with transformers' attention and mask interfaces (sdpa's mask); idempotent."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, _sdpa_gqa_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


def use_cpu_gqa(model, device: torch.device | str) -> bool:
    """Switch `model` (a transformers causal LM, before any adapters) to `sdpa_gqa` when it runs on CPU
    under `sdpa` with grouped key/value heads; True if switched."""
    config = getattr(model, "config", None)
    if torch.device(device).type != "cpu" or config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    if not heads or kv_heads >= heads or not _torch_has_enable_gqa():
        return False
    register()
    model.set_attn_implementation(NAME)  # only warns where a model cannot switch: read back what it runs
    return config._attn_implementation == NAME


def _torch_has_enable_gqa() -> bool:
    """`scaled_dot_product_attention(enable_gqa=...)` arrived in torch 2.5; the project allows older."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 5)
