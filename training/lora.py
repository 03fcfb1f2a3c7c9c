"""LoRA with peft: wrap a frozen base in adapters, the adapter-disabled KL reference, merged weights.

    model = add_adapters(base, cfg.lora)                  # only the adapters train
    ref = AdapterDisabled(model)                          # the base model's log-probs, no second copy
    weights = dict(merged_named_parameters(model))        # plain HF names, W + scale * B @ A

A LoRA checkpoint directory is peft's `save_pretrained` (adapter_config.json + adapter_model.safetensors,
unmerged) whose `base_model_name_or_path` is the absolute path of the base (the SFT model).
`merged_named_parameters` computes each merged weight without touching the model (peft's
merge/unmerge in place would round the bf16 base twice per sync); vLLM rollouts receive those.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvrflow.training.config import LoRAConfig

ADAPTER_CONFIG = "adapter_config.json"


def _peft():
    try:
        import peft
    except ImportError as exc:  # a core dependency: a broken install, not an optional extra
        raise ImportError(
            "training.lora needs peft; reinstall rlvrflow (`pip install -e .`) or `pip install peft`"
        ) from exc
    return peft


def add_adapters(model, cfg: LoRAConfig):
    """Freeze `model` and wrap it in fresh adapters (float32, whatever the base's dtype)."""
    peft = _peft()
    target = "all-linear" if cfg.target_modules == ["all-linear"] else list(cfg.target_modules)
    config = peft.LoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=target,
        task_type="CAUSAL_LM",
        bias="none",
    )
    try:
        return peft.get_peft_model(model, config)
    except ValueError as exc:  # peft: "Target modules {...} not found in the base model"
        names = sorted({n.rsplit(".", 1)[-1] for n, _ in model.named_modules() if n})
        raise ValueError(
            f"training.lora.target_modules={cfg.target_modules}: {exc}. This model's module names "
            f"include {names[:20]}; pick from those or use ['all-linear']"
        ) from exc


def load_adapters(base, adapter_dir: str | Path, trainable: bool):
    """The adapters saved in `adapter_dir` on top of `base` (trainable for resume, frozen for eval)."""
    peft = _peft()
    return peft.PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=trainable)


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | Path) -> Path:
    """The base model directory an adapter checkpoint was trained on; a clear error when it is gone."""
    base = Path(json.loads((Path(path) / ADAPTER_CONFIG).read_text())["base_model_name_or_path"])
    if not (base / "config.json").is_file():
        raise FileNotFoundError(
            f"{path} is a LoRA adapter on the base model {base}, which is not there any more; put the base "
            "back (the SFT model of that run) or use a merged export (`rlvrflow export CKPT --out DIR --merge`)"
        )
    return base


class AdapterDisabled:
    """Calls the policy with its adapters switched off: the base model's forward on the same weights.

    Used as the KL reference with LoRA: no second copy of the model in memory.
    """

    def __init__(self, peft_model) -> None:
        self.model = peft_model

    def __call__(self, **inputs):
        with self.model.disable_adapter():
            return self.model(**inputs)


def merged_named_parameters(peft_model):
    """(name, tensor) of the base model with the adapters folded in, in plain Hugging Face naming.

    Each adapted Linear's weight is `W + get_delta_weight()` (scale * B @ A), cast to W's dtype; the
    model is not modified. Adapter tensors themselves are not listed.
    """
    import torch

    from peft.tuners.lora import LoraLayer

    inner = peft_model.get_base_model()
    deltas = {}
    with torch.no_grad():
        for name, module in inner.named_modules():
            if isinstance(module, LoraLayer):
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        key = f"{name}.base_layer.weight"
                        d = module.get_delta_weight(adapter)
                        deltas[key] = deltas[key] + d if key in deltas else d
        for name, p in inner.named_parameters():
            if "lora_" in name:
                continue
            t = (p.float() + deltas[name].float()).to(p.dtype) if name in deltas else p.detach()
            yield name.replace(".base_layer", ""), t


def merged_model(peft_model):
    """A plain `AutoModelForCausalLM` (same config and dtype as the base) holding the merged weights."""
    from transformers import AutoModelForCausalLM

    base = peft_model.get_base_model()
    dtype = next(p.dtype for n, p in base.named_parameters() if "lora_" not in n)
    plain = AutoModelForCausalLM.from_config(base.config, dtype=dtype)
    state = dict(merged_named_parameters(peft_model))
    missing, unexpected = plain.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(base.config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(
            f"merged weights do not fit the base architecture: missing {missing}, unexpected {unexpected}"
        )
    plain.generation_config = base.generation_config
    return plain.eval()


def parameter_counts(model) -> dict:
    """Trainable and total parameters (`parameters()` lists a tied weight once)."""
    params = list(model.parameters())
    return {
        "trainable_params": sum(p.numel() for p in params if p.requires_grad),
        "total_params": sum(p.numel() for p in params),
    }
