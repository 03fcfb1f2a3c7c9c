"""Build the rollout engine for a model directory, `hf` (transformers) or `vllm`, prompting both the same way.

    engine = make_engine(spec.curriculum.engine, "runs/demo/sft", device="cuda", dtype="bfloat16",
                         field="curriculum.engine")
    groups = engine.generate(prompts, n=8, sampling=SamplingParams(temperature=1.0), seed=0)

Tiering (`curriculum.tiering.tier_to_dir`) and evaluation (`training.eval.evaluate`) build their engine
here from their config's `engine` field. Both kinds read a prompt in the format the directory was
trained with (its rlvrflow_prompt.json; else chat when the tokenizer has a chat template) as the same
token ids: `HFEngine` encodes them itself, and vLLM gets the ids `PromptFormat.encode` makes (through
`FormattedEngine`), never text it would tokenize again, so a template that writes its own BOS gets no
second one from vLLM's tokenizer. Both stop on the same ids: the generation config's EOS (else the
tokenizer's) plus, in chat format, the template's end-of-turn token (`stop_token_ids`). `dtype="auto"`
means the checkpoint's own dtype for both, so vLLM does not silently run a float32 model in half
precision (its own `auto` would).

Lifetime: each stage call builds one engine, uses it for all its generate calls (eval: the greedy and
sampled passes, and the regression sets when the caller passes the engine on) and `release`s it at
the end. Not cached across calls: a vLLM engine holds its GPU memory (KV cache included) while it
lives, tiering and eval are separate stage calls (often separate processes), and in-process vLLM
engines take turns, one alive per process (engines/vllm_engine.py says why). Also left out:
tensor parallelism, and LoRA adapter directories under vLLM (export merged weights first).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from rlvrflow.engines.hf_engine import HF_LOAD_LOCK, FormattedEngine, HFEngine, PromptFormat, stop_token_ids

ENGINES = ("hf", "vllm")
VLLM_INSTALL = (
    "on a GPU machine `pip install 'rlvrflow[gpu]'`; on a CPU-only one `bash scripts/setup_vllm.sh`, "
    "then run with .venv-vllm/bin/python"
)
MAX_MODEL_LEN = 4096  # vLLM's context when the caller gives none (capped by the model's own)


def check_engine(kind: str, field: str = "engine") -> None:
    """Raise unless `kind` names an engine this environment can run: ValueError for an unknown name,
    ImportError (with the install command) for vllm where it is not installed."""
    if kind not in ENGINES:
        raise ValueError(f"{field}={kind!r} is not an engine; use one of: {', '.join(ENGINES)}")
    if kind == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ImportError(
            f"{field} is 'vllm' but vllm is not installed in this Python ({sys.executable}); "
            f"install it ({VLLM_INSTALL}) or set {field}: hf"
        )


def make_engine(
    kind: str,
    model_dir: str | Path,
    *,
    device: str = "cpu",
    dtype: str = "auto",
    prompt_format: PromptFormat | None = None,
    batch_size: int = 64,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.3,
    seed: int = 0,
    load=None,
    field: str = "engine",
):
    """A `RolloutEngine` over the Hugging Face model directory `model_dir`.

    kind: "hf" (an `HFEngine` on `device`, `batch_size` sequences per forward) or "vllm" (a `VLLMEngine`
    inside a `FormattedEngine`; vLLM schedules its own batches and runs on the device its build targets).
    dtype: "auto" (the checkpoint's), "float32", "bfloat16" or "float16". prompt_format: None reads the
    directory's (see the module docstring). load: for "hf", a function path -> (model, tokenizer) that
    replaces the plain transformers load (training passes its loader, which also reads LoRA adapter
    checkpoints). max_model_len, gpu_memory_utilization and seed go to vLLM (0.3 leaves room for a
    trainer, or memory torch still caches from an earlier stage in the process). field: the config
    field named in errors.
    """
    check_engine(kind, field)
    path = Path(model_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"{field}: no model directory at {path}")
    if kind == "hf":
        if load is None:
            model, tokenizer = _load_hf(path, device, dtype)
        else:
            model, tokenizer = load(path)
        fmt = prompt_format or PromptFormat.for_model_dir(path, tokenizer)
        return HFEngine(model, tokenizer, device=device, batch_size=batch_size, prompt_format=fmt)
    return _vllm_engine(path, str(device), dtype, prompt_format, max_model_len, gpu_memory_utilization, seed, field)


def release(engine) -> None:
    """Shut a vLLM engine down now: its GPU memory comes back and another vLLM engine may start in this
    process (see engines/vllm_engine.py: one at a time). An HF engine needs nothing: its model is
    freed with the last reference."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()


def _load_hf(path: Path, device: str, dtype: str):
    import torch

    from rlvrflow.engines.attention import use_cpu_gqa

    with HF_LOAD_LOCK:  # importing transformers and from_pretrained are not thread-safe (see engines.hf_engine)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype if dtype == "auto" else getattr(torch, dtype))
        use_cpu_gqa(model, device)  # grouped KV heads without transformers' copy of them (engines/attention.py)
    return model.to(device).eval(), tokenizer


def _vllm_engine(
    path: Path, device: str, dtype: str, prompt_format, max_model_len, gpu_memory_utilization, seed: int, field: str
) -> FormattedEngine:
    from rlvrflow.engines.vllm_engine import VLLMEngine

    if (path / "adapter_config.json").is_file():
        raise ValueError(
            f"{field}: vllm cannot load the LoRA adapter checkpoint {path}; export merged weights "
            f"(`rlvrflow export {path} --out DIR --merge`) and use that directory, or set {field}: hf"
        )
    tokenizer, fmt, stops = vllm_prompting(path, prompt_format)
    config = _config(path)
    engine = VLLMEngine(
        str(path),
        dtype=checkpoint_dtype(config) if dtype == "auto" else dtype,
        max_model_len=max_model_len or default_max_model_len(path),
        gpu_memory_utilization=gpu_memory_utilization,
        enforce_eager=not device.startswith("cuda"),
        seed=seed,
        stop_token_ids=stops,
    )
    return FormattedEngine(engine, tokenizer, fmt)


def vllm_prompting(path: str | Path, prompt_format: PromptFormat | None = None):
    """(tokenizer, prompt format, stop token ids) for a vLLM engine over `path`: the same format and
    stop ids `HFEngine` gets for that directory, read without loading the weights."""
    path = Path(path)
    with HF_LOAD_LOCK:
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        tokenizer = AutoTokenizer.from_pretrained(path)
        if (path / "generation_config.json").is_file():
            gen = GenerationConfig.from_pretrained(path)
        else:  # what transformers gives a loaded model without one
            gen = GenerationConfig.from_model_config(AutoConfig.from_pretrained(path))
    fmt = prompt_format or PromptFormat.for_model_dir(path, tokenizer)
    return tokenizer, fmt, stop_token_ids(SimpleNamespace(generation_config=gen), tokenizer, fmt)


def _config(path: Path) -> dict:
    data = json.loads((path / "config.json").read_text())
    return {**data.get("text_config", {}), **data}


def checkpoint_dtype(config: dict) -> str:
    """The dtype a checkpoint's config.json names (`dtype`, or `torch_dtype` before transformers 5);
    float32 when it names none."""
    name = config.get("dtype") or config.get("torch_dtype") or "float32"
    return str(name).removeprefix("torch.")


def default_max_model_len(path: str | Path) -> int:
    """vLLM's context for the checkpoint at `path`: MAX_MODEL_LEN, or the model's own positions when fewer
    (vLLM refuses a longer one)."""
    return min(MAX_MODEL_LEN, _max_positions(_config(Path(path))) or MAX_MODEL_LEN)


def _max_positions(config: dict) -> int | None:
    value = config.get("max_position_embeddings")
    return int(value) if value else None
