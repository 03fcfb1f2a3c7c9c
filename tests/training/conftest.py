"""Shared toys for the training tests: a copy-the-digit task and a very small embedded model.

The task ("Copy 7" -> "Answer: 7", checked by the real `math` verifier) is one a ~20k-parameter
character model learns in seconds, so SFT, GRPO, resume and eval can all be exercised for real.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import polars as pl
import pytest

from rlvrflow.training.config import TinyModelConfig, TrainingConfig

TINY = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=1, intermediate_size=64, max_positions=64)


def copy_rows(
    n: int,
    seed: int,
    split: str = "train",
    start: int = 0,
    noise: float = 0.0,
    digits: tuple[int, ...] = tuple(range(10)),
) -> pl.DataFrame:
    """Rows with the DESIGN.md columns for the copy task, tier 'learnable'.

    With `noise`, that share of solutions carry a random digit instead (noisy demonstrations), so an
    SFT model trained on them solves the task only part of the time and GRPO has room to improve.
    `digits` limits the prompts (one digit makes the task unconditional: learnable in a few steps).
    """
    rng = random.Random(seed)
    rows = []
    for i in range(start, start + n):
        d = rng.choice(digits)
        shown = rng.randint(0, 9) if rng.random() < noise else d
        rows.append(
            {
                "id": f"{split}-{i:04d}",
                "category": "copy",
                "prompt": f"Copy {d}\n",
                "reference": str(d),
                "solution": f"Answer: {shown}",
                "verifier": "math",
                "verifier_params": "{}",
                "split": split,
                "tier": "learnable",
                "pass_at_1": 0.5,
            }
        )
    return pl.DataFrame(rows)


def corpus() -> list[str]:
    return [f"Copy {d}\n" for d in range(10)] + [f"Answer: {d}" for d in range(10)]


def training_cfg(**over) -> TrainingConfig:
    base = {
        "tiny": TINY.model_dump(),
        "device": "cpu",
        "torch_threads": 1,
        "sft": {"max_steps": 40, "learning_rate": 1e-2, "batch_size": 16, "warmup_steps": 2, "max_length": 32},
        "grpo": {
            "max_steps": 4,
            "prompts_per_step": 4,
            "num_generations": 4,
            "learning_rate": 3e-3,
            "warmup_steps": 0,
            "max_new_tokens": 12,
            "max_refill_rounds": 1,
        },
        "checkpoint": {"every": 2, "keep_last": 2},
    }
    for key, value in over.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return TrainingConfig.model_validate(base)


@pytest.fixture(scope="session")
def toy():
    """The helpers above, for test modules (importlib mode cannot import conftest directly)."""
    return SimpleNamespace(TINY=TINY, copy_rows=copy_rows, corpus=corpus, cfg=training_cfg)


@pytest.fixture(scope="session")
def base_model(tmp_path_factory):
    from rlvrflow.training.tiny_model import build_tiny_model

    return build_tiny_model(corpus(), tmp_path_factory.mktemp("base") / "model", seed=0, dims=TINY)


@pytest.fixture(scope="session")
def sft_model(tmp_path_factory, base_model):
    from rlvrflow.training.sft import run_sft

    return run_sft(base_model, copy_rows(200, 1), training_cfg(), tmp_path_factory.mktemp("sft") / "model", seed=0)
