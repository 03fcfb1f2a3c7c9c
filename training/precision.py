"""Precision: which dtype `training.dtype` means on this device, and the autocast that applies it.

Mixed precision the usual way (torch AMP, TRL's default): weights that train stay float32 (the
optimizer's updates would round away in bf16 at RL learning rates: 1e-6 of a weight near 1e-2 is
below bf16's 2^-8 resolution), forwards run under `torch.autocast` in the chosen dtype, and frozen
weights (the KL reference, a LoRA base) are stored in it, which is where the memory goes.
Log-probs are taken from float32 logits (`grpo_math.token_logprobs`) and the loss is float32.
float16 needs loss scaling (`torch.amp.GradScaler`); bfloat16 and float32 do not.
"""

from __future__ import annotations

import contextlib
import functools

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """`auto` -> bfloat16 on a GPU that supports it, else float32; a named dtype as is."""
    if name != "auto":
        return DTYPES[name]
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


@functools.lru_cache(maxsize=None)
def cpu_matmul_slowdown(name: str, size: int = 256, repeats: int = 3) -> float:
    """How many times longer a `size`-square matmul takes in dtype `name` than in float32 on this CPU
    (best of `repeats`, current thread count), measured once per process.

    bfloat16 and float16 pay on CPUs with native instructions for them (AVX512-BF16 or AMX-BF16;
    AVX512-FP16 or AMX-FP16); elsewhere torch emulates them, and on an AVX2-only CPU a bfloat16 matmul
    measured 68-85x slower than float32.
    A measurement, not a CPU-flag lookup: the flags torch exposes for this are private."""
    import time

    def best(dtype: torch.dtype) -> float:
        a, b = torch.ones(size, size, dtype=dtype), torch.ones(size, size, dtype=dtype)
        a @ b  # warm-up: first-call dispatch and allocation
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t)
        return min(times)

    return best(DTYPES[name]) / max(best(torch.float32), 1e-9)


def dtype_name(dtype: torch.dtype) -> str:
    return next(k for k, v in DTYPES.items() if v == dtype)


def autocast(device: torch.device, dtype: torch.dtype):
    """A context running forwards in `dtype` (no-op for float32)."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


class LossScaler:
    """Backward + clipped optimizer step, with `GradScaler` loss scaling for float16 only.

    Without float16 this is exactly `loss.backward()`, `clip_grad_norm_`, `opt.step()`.
    """

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def backward(self, loss) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def step(self, opt, params, max_grad_norm: float) -> float:
        """Unscale (fp16), clip to `max_grad_norm`, step; returns the pre-clip grad norm."""
        if self.scaler:
            self.scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        if self.scaler:
            self.scaler.step(opt)  # skips the step when the grads overflowed
            self.scaler.update()
        else:
            opt.step()
        return float(norm)

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.scaler else {}

    def load_state_dict(self, state: dict) -> None:
        if self.scaler and state:
            self.scaler.load_state_dict(state)
