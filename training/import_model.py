"""Import a GGUF model file (llama.cpp's format) as a plain Hugging Face model folder.

`rlvrflow import-model FILE.gguf --out DIR` calls `import_gguf`: transformers' own GGUF support
(`from_pretrained(folder, gguf_file=name)`, which needs the `gguf` package) dequantizes the weights
to float; the result is copied into a fresh model built from the config without its
`quantization_config` (transformers refuses to save a GGUF-loaded model) and saved as safetensors,
with the tokenizer (and its chat template) and a generation config whose eos comes from the tokenizer.
The folder is what `training.model`, peft and vLLM load.

Before loading, the file's architecture and tensor types are read with `gguf.GGUFReader`, so an
architecture transformers cannot load or a quant type `gguf` cannot dequantize fails with a message
naming the file, what is unsupported and what is. The output is written to a temporary folder next to
DIR and renamed into place. transformers and gguf are imported when used.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["GGUFImportError", "import_gguf", "check_gguf", "check_quant_types", "supported_quant_types", "DTYPES"]

DTYPES = ("float32", "bfloat16")
_INSTALL = "pip install 'gguf>=0.10'  (or: pip install 'rlvrflow[gguf]')"


class GGUFImportError(ValueError):
    """The GGUF file cannot be imported: the message names the file, what is unsupported and the fix."""


def _gguf():
    try:
        import gguf
    except ModuleNotFoundError:
        raise GGUFImportError(f"reading GGUF files needs the `gguf` package: {_INSTALL}") from None
    return gguf


def supported_quant_types() -> list[str]:
    """Tensor types whose weights `gguf` turns into floats: the plain float types and its dequantizers."""
    gguf = _gguf()
    from gguf.quants import _type_traits  # the dequantizers `gguf.quants.dequantize` dispatches on

    plain = {gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F64}
    return sorted({t.name for t in plain} | {t.name for t in _type_traits})


# GGUF architecture names that transformers' loader renames before its support check
# (transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint)
_RENAMED = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
    "t5encoder": "t5",
}


def _supported_architectures() -> list[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    # its mapping table also holds the non-architecture sections "general" and "tokenizer"
    return sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"})


def check_gguf(path: Path) -> dict:
    """Read the file's header: its architecture and tensor types; raise GGUFImportError on what cannot load."""
    gguf = _gguf()
    path = Path(path)
    if not path.is_file():
        raise GGUFImportError(f"{path}: file not found; pass a .gguf model file")
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # a truncated or non-GGUF file: the reader's own words
        raise GGUFImportError(f"{path}: not a readable GGUF file ({exc})") from None
    field = reader.get_field("general.architecture")
    if field is None:
        raise GGUFImportError(f"{path}: no general.architecture field; not a GGUF model file")
    arch = field.contents()
    supported = _supported_architectures()
    if _RENAMED.get(arch, arch) not in supported:
        raise GGUFImportError(
            f"{path}: architecture {arch!r} is not supported by transformers' GGUF loader; "
            f"supported: {', '.join(supported)}"
        )
    types = sorted({t.tensor_type.name for t in reader.tensors})
    check_quant_types(path, types)
    return {"architecture": arch, "tensor_types": types}


def check_quant_types(path: Path, types: list[str]) -> None:
    ok = supported_quant_types()
    bad = [t for t in types if t not in ok]
    if bad:
        raise GGUFImportError(
            f"{path}: tensor type(s) {', '.join(bad)} cannot be dequantized by the installed "
            f"`gguf` package; supported: {', '.join(ok)}. Re-quantize the file (e.g. to Q8_0) or "
            "upgrade gguf"
        )


def _check_out(path: Path, out: Path, force: bool) -> None:
    """Refuse an --out that would lose the user's files: a non-empty folder without --force, and even
    with --force anything but an earlier model folder, the current folder or one holding it, or the
    folder the source file is in."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not force:
        raise GGUFImportError(f"{out}: exists and is not empty; pass --force to replace it, or another --out")
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents or out == path.parent or out in path.parents:
        raise GGUFImportError(
            f"{out}: holds the current folder or the source file; --force replaces only an "
            "earlier model folder: choose a new --out"
        )
    if not out.is_dir() or out.is_symlink() or not (out / "config.json").is_file():
        raise GGUFImportError(
            f"{out}: is not a model folder (no config.json); --force replaces only an earlier "
            "import: choose another --out or remove it yourself"
        )


def import_gguf(path: Path, out: Path, *, dtype: str = "float32", force: bool = False) -> dict:
    """Write `path` (a .gguf file) as a Hugging Face folder at `out`; return what was written."""
    path, out = Path(path).resolve(), Path(out).resolve()
    if dtype not in DTYPES:
        raise GGUFImportError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}")
    _check_out(path, out, force)
    header = check_gguf(path)
    started = time.perf_counter()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    torch_dtype = getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch_dtype)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are floats now; this marker blocks save_pretrained
    config.dtype = torch_dtype
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(
            f"{path}: the dequantized weights do not fit the config's model "
            f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    model.tie_weights()
    del loaded

    if tokenizer.eos_token_id is not None:
        config.eos_token_id = tokenizer.eos_token_id
    if tokenizer.bos_token_id is not None:
        config.bos_token_id = tokenizer.bos_token_id
    generation = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the model folder is an ordinary one
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        generation.save_pretrained(tmp)
        old = None
        if out.exists():  # swap: the old folder is removed only once the new one is in place
            old = out.with_name(f".{out.name}.replaced-{os.getpid()}")
            out.rename(old)
        try:
            tmp.rename(out)
        except BaseException:
            if old is not None:
                old.rename(out)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {
        "source": str(path),
        "out": str(out),
        "architecture": header["architecture"],
        "model_type": config.model_type,
        "tensor_types": header["tensor_types"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": dtype,
        "vocab_size": len(tokenizer),
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "seconds": round(time.perf_counter() - started, 1),
    }
