"""Training: the embedded tiny model, cold-start SFT, the GRPO loop, checkpoints, eval and the run report.

    base = resolve_base_model(cfg, texts, "runs/x/base", seed=0)
    sft = run_sft(base, train_df, cfg, "runs/x/sft", seed=0)
    result = train_grpo(sft, tiered_df, cfg, curriculum_cfg, reward_cfg, eval_df, eval_cfg, "runs/x/grpo", seed=0)
    metrics = evaluate(result["final_checkpoint"], eval_df, eval_cfg, seed=0)

Public names are loaded lazily so `import training` pulls in neither torch nor transformers.
"""

from __future__ import annotations

import importlib

from rlvrflow.training.config import (
    CheckpointConfig,
    DPOConfig,
    EvalConfig,
    GRPOConfig,
    LoRAConfig,
    SFTConfig,
    TinyModelConfig,
    TrainingConfig,
)

__all__ = [
    "CheckpointConfig",
    "DPOConfig",
    "EvalConfig",
    "GRPOConfig",
    "LoRAConfig",
    "SFTConfig",
    "TinyModelConfig",
    "TrainingConfig",
    "build_tiny_model",
    "build_qwen2_model",
    "export_checkpoint",
    "resolve_base_model",
    "run_sft",
    "train_grpo",
    "train_dpo",
    "export_dpo",
    "evaluate",
    "build_report",
    "write_report",
    "diagnose",
]

_WHERE = {
    "build_tiny_model": "tiny_model",
    "resolve_base_model": "tiny_model",
    "build_qwen2_model": "qwen_model",
    "export_checkpoint": "export",
    "run_sft": "sft",
    "train_grpo": "grpo",
    "train_dpo": "dpo",
    "export_dpo": "dpo_data",
    "diagnose": "doctor",
    "evaluate": "eval",
    "build_report": "report",
    "write_report": "report",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'training' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rlvrflow.training.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
