"""The model stages as plain functions: SFT, tier, GRPO, evaluate. No Prefect in here.

Same shape as flows/data_stages.py: a content-hash key (input digests + the spec sections the
stage reads + library code), a cached folder under ROOT/stages/<stage>/<key>/, and library calls
through `steps` so the flows run them as Prefect tasks. Each `run_*` function is what one task
runs: plain arguments (paths, JSON), one library call, outputs on disk, a small dict back.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from flows.cache import Manifest, build_stage, stage_key
from flows.data_stages import LOCAL, StageFailed
from flows.spec import DomainSpec, spec_from_dict


def _spec(spec_json: str, base_dir: str) -> DomainSpec:
    return spec_from_dict(json.loads(spec_json), base_dir)


def training_config(spec: DomainSpec):
    """The training section with a local model path made absolute against the spec's folder."""
    cfg = spec.training
    if cfg.is_embedded:
        return cfg
    return cfg.model_copy(update={"model": str(spec.resolve(cfg.model))})


def _model_identity(spec: DomainSpec) -> Any:
    """What identifies the base model cheaply: 'embedded', or each file's name, size and mtime."""
    cfg = training_config(spec)
    if cfg.is_embedded:
        return "embedded"
    root = Path(cfg.model)
    if not root.is_dir():
        return str(root)
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())


# ----- SFT --------------------------------------------------------------------------------------


def corpus_texts(df) -> list[str]:
    """Texts the embedded tokenizer is built from: every prompt, solution and reference."""
    texts: list[str] = []
    for col in ("prompt", "solution", "reference"):
        if col in df.columns:
            texts += [t for t in df[col].to_list() if t]
    return texts


def run_sft(spec_json: str, base_dir: str, train: str, verified: str, out: str) -> dict:
    """training.resolve_base_model + training.run_sft into out/base and out/sft."""
    import polars as pl

    from training.sft import run_sft as sft
    from training.tiny_model import resolve_base_model

    spec = _spec(spec_json, base_dir)
    cfg = training_config(spec)
    texts = corpus_texts(pl.read_parquet(verified))
    base = resolve_base_model(cfg, texts, Path(out) / "base", cfg.seed)
    sft_dir = sft(base, pl.read_parquet(train), cfg, Path(out) / "sft", cfg.seed)
    stats = json.loads((Path(sft_dir) / "sft_stats.json").read_text())
    return {**stats, "base_model": str(base)}


def sft_stage(spec: DomainSpec, root: Path, verified: Manifest, split: Manifest, force: bool = False,
              steps=LOCAL) -> Manifest:
    t = spec.training
    inputs = {"verified": verified.digests["verified"], "train": split.digests["train"],
              "model": _model_identity(spec), "tiny": t.tiny, "sft": t.sft, "seed": t.seed,
              "device": t.device}
    key = stage_key("sft", inputs, ["training"])

    def build(out: Path):
        stats = steps.call("sft", run_sft, {"spec_json": spec.model_dump_json(), "base_dir": str(spec.base_dir),
                                            "train": str(split.path("train")),
                                            "verified": str(verified.path("verified")), "out": str(out)})
        return {"sft": "sft"}, stats

    return build_stage(root, "sft", key, build, force)


# ----- evaluate: the SFT baseline and every GRPO checkpoint --------------------------------------


def run_evaluate(spec_json: str, base_dir: str, model: str, name: str, eval_path: str, out: str) -> dict:
    """training.evaluate of one checkpoint on the held-out split; writes out/<name>.json."""
    import polars as pl

    from training.eval import evaluate

    spec = _spec(spec_json, base_dir)
    result = evaluate(model, pl.read_parquet(eval_path), spec.eval, spec.training.seed,
                      workers=spec.eval.workers, device=spec.training.device)
    result = {"name": name, **result}
    (Path(out) / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def evaluate_stage(spec: DomainSpec, root: Path, split: Manifest, models: dict[str, str],
                   model_digests: dict[str, str], force: bool = False, steps=LOCAL) -> Manifest:
    """Evaluate each named model directory (e.g. sft, step_000002) on the eval split, in parallel."""
    inputs = {"eval": split.digests["eval"], "eval_cfg": spec.eval, "seed": spec.training.seed,
              "models": model_digests}
    key = stage_key("evaluate", inputs, ["training", "verifiers", "curriculum"])

    def build(out: Path):
        items = [{"spec_json": spec.model_dump_json(), "base_dir": str(spec.base_dir), "model": path,
                  "name": name, "eval_path": str(split.path("eval")), "out": str(out)}
                 for name, path in models.items()]
        results = steps.map("evaluate", run_evaluate, items)
        table = [{k: r.get(k) for k in ("name", "model", "pass_at_1_greedy", "pass_at_1_sampled",
                                        "pass_at_k", "format_rate", "length_mean", "n_prompts")}
                 for r in results]
        (out / "eval_table.json").write_text(json.dumps(table, indent=1, default=str))
        outputs = {r["name"]: f"{r['name']}.json" for r in results}
        return {"table": "eval_table.json", **outputs}, {"models": len(results)}

    return build_stage(root, "evaluate", key, build, force)


def headline(result: dict) -> dict:
    return {k: result.get(k) for k in ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate")}


def read_eval(manifest: Manifest, name: str) -> dict:
    return json.loads(manifest.path(name).read_text())


def require(cond: bool, message: str) -> None:
    if not cond:
        raise StageFailed(message)


ProgressFn = Callable[[float], None]
