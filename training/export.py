"""`rlvrflow export`: a training checkpoint -> a plain Hugging Face directory (or a LoRA adapter).

    export_checkpoint("runs/x/grpo/step_000100", "models/mine", merge=True)

A checkpoint carries training state beside the model (state.pt, meta.json, deepspeed/); the export
drops it. A LoRA checkpoint exports as its adapter (adapter_config.json + adapter_model.safetensors,
for vLLM's LoRA requests or `PeftModel.from_pretrained` on the base it names) or, with `merge`, as a
plain model with the adapter folded into the base weights (in the base's stored dtype), which
`AutoModelForCausalLM.from_pretrained` and vLLM load like any other. A full-weight checkpoint is
already plain: it exports as is, `merge` or not. The tokenizer, chat template and
rlvrflow_prompt.json (the prompt format it was trained with) travel along.
"""

from __future__ import annotations

import shutil
from pathlib import Path

TRAINING_STATE = ("state.pt", "meta.json", "deepspeed")


def export_checkpoint(checkpoint: str | Path, out_dir: str | Path, merge: bool = False) -> dict:
    """Write `out_dir` from `checkpoint`; returns what was written ({kind, out, params})."""
    import torch

    from rlvrflow.engines.hf_engine import PROMPT_FORMAT_FILE
    from rlvrflow.training import checkpoint as ckpt
    from rlvrflow.training import lora
    from rlvrflow.training.modeling import load_model_and_tokenizer

    src, out = Path(checkpoint), Path(out_dir)
    if not (src / "config.json").is_file() and not lora.is_adapter_dir(src):
        raise FileNotFoundError(
            f"{src}: not a checkpoint (no config.json or adapter_config.json); pass a "
            "step_NNNNNN/ directory or an SFT model directory"
        )
    if out.resolve() == src.resolve():
        raise ValueError(f"--out {out} is the checkpoint itself; pick another directory")
    if lora.is_adapter_dir(src) and merge:
        model, tokenizer = load_model_and_tokenizer(src, torch.device("cpu"), trainable=False, dtype="auto")
        merged = lora.merged_model(model)
        extra = {}
        if (src / PROMPT_FORMAT_FILE).is_file():
            extra[PROMPT_FORMAT_FILE] = (src / PROMPT_FORMAT_FILE).read_text()
        ckpt.save_pretrained_atomic(merged, tokenizer, out, extra=extra)
        return {"kind": "merged", "out": str(out), "params": sum(p.numel() for p in merged.parameters())}
    tmp = out.with_name(f".tmp-{out.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(*TRAINING_STATE))
    ckpt._swap_into_place(tmp, out)
    kind = "adapter" if lora.is_adapter_dir(src) else "full"
    return {"kind": kind, "out": str(out)}
