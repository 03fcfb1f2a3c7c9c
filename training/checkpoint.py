"""Checkpoints: atomic Hugging Face saves, full training state, resume discovery and retention.

A checkpoint is a directory `step_000050/` holding the model (safetensors + config) and tokenizer in
Hugging Face format, so `AutoModelForCausalLM.from_pretrained` loads it directly, plus `state.pt`
(optimizer, LR schedule, sampler state, RNG states, step) and `meta.json` (step, eval metrics, and what
the trainer adds: GRPO's sampler name).
With the DeepSpeed backend the optimizer and LR schedule live instead in `deepspeed/` (DeepSpeed's own
`engine.save_checkpoint` layout: every rank writes its ZeRO optimizer partition there) and `state.pt`
names that folder; the HF weights are gathered (ZeRO-3) and written by rank 0.
Every directory is written under a temporary name and renamed into place, so a run killed with
`kill -9` leaves either the whole checkpoint or none of it; temporary leftovers are ignored and
cleaned up on the next save.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from rlvrflow.io import TMP_PREFIX

STEP_DIR = re.compile(r"^step_(\d{6,})$")
_TMP_PREFIX = TMP_PREFIX  # the prefix of rlvrflow.io's temporary files too: retention sweeps both


def _swap_into_place(tmp: Path, final: Path) -> None:
    """Rename a finished temporary directory to `final`, replacing any previous `final`."""
    old = None
    if final.exists():
        old = final.with_name(f"{_TMP_PREFIX}old-{final.name}.{os.getpid()}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def save_pretrained_atomic(model, tokenizer, out_dir: str | Path, extra: dict[str, str] | None = None) -> Path:
    """Save model (safetensors) + tokenizer (+ extra text files) to `out_dir` atomically."""
    final = Path(out_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{_TMP_PREFIX}{final.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    for name, text in (extra or {}).items():
        (tmp / name).write_text(text, encoding="utf-8")
    _swap_into_place(tmp, final)
    return final


def save_checkpoint(
    run_dir: str | Path, step: int, model, tokenizer, state: dict, meta: dict, extra: dict[str, str] | None = None
) -> Path:
    """Write `run_dir/step_NNNNNN/` with the HF model (a peft model: its adapter only), `state.pt`
    (torch-saved `state`), `meta.json` and the `extra` text files."""
    tmp = checkpoint_tmp_dir(run_dir, step)
    write_checkpoint_files(tmp, step, model, tokenizer, state, meta, extra=extra)
    return commit_checkpoint(run_dir, tmp, step)


def checkpoint_tmp_dir(run_dir: str | Path, step: int) -> Path:
    """A fresh (removed if left over) temporary directory name for step `step`'s checkpoint.

    Several ranks writing into one checkpoint (DeepSpeed's optimizer partitions) must share the name
    the main rank picked here; the pid in it is the main rank's.
    """
    tmp = Path(run_dir) / f"{_TMP_PREFIX}step_{step:06d}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def write_checkpoint_files(
    tmp: Path,
    step: int,
    model,
    tokenizer,
    state: dict,
    meta: dict,
    state_dict: dict | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    """The HF model (from `state_dict` when given: gathered ZeRO-3 weights), tokenizer, state.pt, meta.json.

    `state.pt` and `meta.json` are what `list_checkpoints` looks for, but only the rename in
    `commit_checkpoint` makes the directory visible, so their order inside `tmp` does not matter.
    """
    import torch

    if state_dict is None:
        model.save_pretrained(tmp, safe_serialization=True)
    else:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    for name, text in (extra or {}).items():
        (tmp / name).write_text(text, encoding="utf-8")
    torch.save(state, tmp / "state.pt")
    (tmp / "meta.json").write_text(json.dumps({"step": step, **meta}, indent=2, sort_keys=True))


def commit_checkpoint(run_dir: str | Path, tmp: Path, step: int) -> Path:
    """Rename a completely written `tmp` to `run_dir/step_NNNNNN/` and clean up leftovers.

    With several ranks, call it on the main rank only and only after every rank has finished
    writing into `tmp` (a barrier).
    """
    final = Path(run_dir) / f"step_{step:06d}"
    _swap_into_place(tmp, final)
    clean_temporaries(run_dir)
    return final


def clean_temporaries(run_dir: str | Path) -> None:
    """Remove leftovers of interrupted saves (directories and files with the temporary prefix)."""
    for p in Path(run_dir).glob(f"{_TMP_PREFIX}*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under `run_dir` as (step, path), oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = []
    for p in run_dir.iterdir():
        m = STEP_DIR.match(p.name)
        if m and p.is_dir() and (p / "state.pt").exists() and (p / "meta.json").exists():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def read_meta(ckpt: str | Path) -> dict:
    return json.loads((Path(ckpt) / "meta.json").read_text())


def load_state(ckpt: str | Path) -> dict:
    """The training state saved with a checkpoint (optimizer, schedule, sampler, RNG, step)."""
    import torch

    return torch.load(Path(ckpt) / "state.pt", weights_only=False)


def best_checkpoint(run_dir: str | Path, metric: str) -> Path | None:
    """The checkpoint with the highest `meta["eval"][metric]` (latest wins ties), or None."""
    best, best_key = None, None
    for step, path in list_checkpoints(run_dir):
        value = read_meta(path).get("eval", {}).get(metric)
        if value is None:
            continue
        key = (value, step)
        if best_key is None or key > best_key:
            best, best_key = path, key
    return best


def apply_retention(run_dir: str | Path, keep_last: int, keep_best: bool, metric: str) -> list[Path]:
    """Delete checkpoints except the last `keep_last` and (when `keep_best`) the best by `metric`.

    Returns the deleted paths.
    """
    found = list_checkpoints(run_dir)
    keep = {p for _, p in found[-keep_last:]}
    if keep_best:
        best = best_checkpoint(run_dir, metric)
        if best is not None:
            keep.add(best)
    deleted = []
    for _, p in found:
        if p not in keep:
            shutil.rmtree(p, ignore_errors=True)
            deleted.append(p)
    return deleted


def capture_rng() -> dict:
    """RNG states of python, numpy and torch (CPU and CUDA when present)."""
    import random

    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    import random

    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
