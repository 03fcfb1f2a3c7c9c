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

ProgressFn = Callable[[float], None]


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
              "device": t.device, **model_settings(t)}
    key = stage_key("sft", inputs, ["training"])

    def build(out: Path):
        stats = steps.call("sft", run_sft, {"spec_json": spec.model_dump_json(), "base_dir": str(spec.base_dir),
                                            "train": str(split.path("train")),
                                            "verified": str(verified.path("verified")), "out": str(out)})
        return {"sft": "sft"}, stats

    return build_stage(root, "sft", key, build, force)


# ----- tier: pass@k of the SFT model on the train split (fanned out in chunks) ------------------


def device_name(spec: DomainSpec) -> str:
    from training.modeling import pick_device

    return str(pick_device(spec.training.device))


def run_tier_chunk(train: str, ids: list, model: str, curriculum_json: str, seed: int,
                   device: str, workers: int, out_prefix: str, torch_threads: int = 0,
                   timeout_s: float = 30.0) -> dict:
    """curriculum.tier_rows on the train rows with these ids (whole engine calls), with its own engine."""
    import polars as pl

    from training.modeling import set_threads

    from curriculum.config import CurriculumConfig
    from curriculum.engines import HFEngine
    from curriculum.tiering import default_score_fn, tier_rows

    set_threads(torch_threads)  # training.torch_threads: the engine's sampling obeys it too
    cfg = CurriculumConfig.model_validate_json(curriculum_json)
    df = pl.read_parquet(train).filter(pl.col("id").is_in(ids))
    engine = HFEngine.from_pretrained(model, device=device, batch_size=cfg.engine_batch_size)
    tiered = tier_rows(df, engine, cfg, seed, score_fn=default_score_fn(workers, timeout_s))  # the pool serializes callers
    Path(out_prefix).parent.mkdir(parents=True, exist_ok=True)
    tiered.write_parquet(f"{out_prefix}.parquet")
    return {"path": f"{out_prefix}.parquet", "rows": tiered.height, "ids": list(ids)}


def merge_tiers(parts: list[dict], out: str, k: int) -> dict:
    """Concatenate the tiered chunks into tiers.parquet and write the tier report (curriculum.tier_report)."""
    import shutil

    import polars as pl

    from curriculum.report import tier_report

    tiered = pl.concat([pl.read_parquet(p["path"]) for p in parts], how="diagonal_relaxed").sort("id")
    expected = sum(len(p.get("ids", [])) for p in parts) if all("ids" in p for p in parts) else tiered.height
    if tiered.height != expected or tiered["id"].n_unique() != tiered.height:
        raise StageFailed(f"tier: merged {tiered.height} rows ({tiered['id'].n_unique()} distinct ids) from chunks "
                          f"that were given {expected}")
    tiered.write_parquet(Path(out) / "tiers.parquet")
    tier_report(tiered, out, k=k)
    shutil.rmtree(Path(out) / "chunks", ignore_errors=True)
    counts = {t: int(n) for t, n in tiered["tier"].value_counts().iter_rows()} if tiered.height else {}
    return {"rows_in": tiered.height, "rows_kept": tiered.height, "rows_rejected": 0,
            "rejected_by_reason": {}, "tiers": counts}


def tier_stage(spec: DomainSpec, root: Path, split: Manifest, sft: Manifest, force: bool = False,
               steps=LOCAL) -> Manifest:
    """Tier the train split by the SFT model's pass@k into ROOT/stages/tier/<key>/tiers.parquet."""
    c = spec.curriculum
    inputs = {"train": split.digests["train"], "model": sft.digests["sft"], "curriculum": c,
              "seed": spec.training.seed, "device": spec.training.device}  # chunk_rows changes nothing
    key = stage_key("tier", inputs, ["curriculum", "verifiers"])

    def build(out: Path):
        import polars as pl

        from curriculum.tiering import call_chunks

        train = split.path("train")
        ids = pl.read_parquet(train, columns=["id"])["id"].to_list()
        if None in ids or len(set(ids)) != len(ids):  # chunks select rows by id
            raise StageFailed(f"tier: the train split's ids must be unique and non-empty ({len(ids)} rows, "
                              f"{len(set(ids) - {None})} distinct ids); the split stage should have rejected this")
        device = device_name(spec)
        # chunks of whole engine calls in tiering's own order, all with the run's seed: the tiers
        # are the same for any chunk_rows and for `rlvrflow tier` (see curriculum/tiering.py)
        plan = [{"train": str(train), "ids": chunk, "model": str(sft.path("sft")),
                 "curriculum_json": c.model_dump_json(), "seed": spec.training.seed, "device": device,
                 "workers": spec.orchestration.workers, "torch_threads": spec.training.torch_threads,
                 "timeout_s": spec.verifiers.timeout_s, "out_prefix": str(out / "chunks" / f"tier-{i:05d}")}
                for i, chunk in enumerate(call_chunks(ids, spec.training.seed, spec.orchestration.chunk_rows))]
        parts = steps.map("tier-chunk", run_tier_chunk, plan)
        stats = steps.call("tier-merge", merge_tiers, {"parts": parts, "out": str(out), "k": c.k})
        return {"tiers": "tiers.parquet", "table": "tier_table.csv", "markdown": "tier_report.md"}, stats

    return build_stage(root, "tier", key, build, force)


def tier_plain(spec: DomainSpec, model: Path, out_dir: Path) -> dict:
    """`rlvrflow tier`: prepare, attach, split (cached under out_dir/stages), then curriculum.tier_to_dir
    writing out_dir/tiers.parquet and the tier report beside it."""
    import polars as pl

    from curriculum.tiering import tier_to_dir
    from flows.data_stages import attach_stage, prepare_stage, split_stage

    clean = prepare_stage(spec, out_dir)
    verified = attach_stage(spec, out_dir, clean)
    split = split_stage(spec, out_dir, verified)
    target = Path(out_dir)
    from training.modeling import set_threads

    set_threads(spec.training.torch_threads)
    from curriculum.tiering import default_score_fn

    tier_to_dir(pl.read_parquet(split.path("train")), model, spec.curriculum, target, spec.training.seed,
                score_fn=default_score_fn(spec.orchestration.workers, spec.verifiers.timeout_s),
                device=device_name(spec))
    return json.loads((target / "tiers_stats.json").read_text())


# ----- GRPO -------------------------------------------------------------------------------------


def run_grpo(spec_json: str, base_dir: str, sft: str, tiers: str, eval_path: str, out: str,
             on_progress: ProgressFn | None = None) -> dict:
    """training.train_grpo from the SFT model on the tiered train rows; resumes from out's checkpoints."""
    import polars as pl

    from training.grpo import train_grpo

    spec = _spec(spec_json, base_dir)
    total = spec.training.grpo.steps

    def progress(step: int, steps: int, metrics: dict) -> None:
        if on_progress is not None:
            on_progress(step / max(1, steps or total))

    return train_grpo(sft, pl.read_parquet(tiers), training_config(spec), spec.curriculum,
                      spec.verifiers.reward, pl.read_parquet(eval_path), spec.eval, out,
                      spec.training.seed, on_progress=progress)


def grpo_stage(spec: DomainSpec, root: Path, split: Manifest, sft: Manifest, tiers: Manifest,
               force: bool = False, steps=LOCAL, on_progress: ProgressFn | None = None) -> Manifest:
    """GRPO into ROOT/stages/grpo/<key>/ (checkpoints step_NNNNNN/, metrics.jsonl, summary.json)."""
    t = spec.training
    inputs = {"sft": sft.digests["sft"], "tiers": tiers.digests["tiers"], "eval": split.digests["eval"],
              "grpo": t.grpo, "checkpoint": t.checkpoint, "seed": t.seed, "device": t.device,
              "curriculum": spec.curriculum, "reward": spec.verifiers.reward, "eval_cfg": spec.eval,
              **model_settings(t)}
    key = stage_key("grpo", inputs, ["training", "curriculum", "verifiers"])

    def build(out: Path):
        summary = steps.call("grpo", run_grpo, {
            "spec_json": spec.model_dump_json(), "base_dir": str(spec.base_dir), "sft": str(sft.path("sft")),
            "tiers": str(tiers.path("tiers")), "eval_path": str(split.path("eval")), "out": str(out),
            "on_progress": on_progress})
        stats = {k: summary.get(k) for k in ("steps", "seconds", "steps_per_second", "zero_variance_fraction",
                                             "final_checkpoint", "best_checkpoint", "warnings")}
        return {"summary": "summary.json", "metrics": "metrics.jsonl"}, stats

    return build_stage(root, "grpo", key, build, force, resumable=True)


def checkpoints(grpo: Manifest) -> dict[str, str]:
    """The GRPO checkpoints still on disk, by folder name (oldest first)."""
    from training.checkpoint import list_checkpoints

    return {Path(p).name: str(p) for _, p in list_checkpoints(grpo.dir)}


def model_settings(t) -> dict:
    """The training fields that change what SFT and GRPO produce beyond their own sections: how
    prompts are rendered, the precision and the LoRA adapter (part of both stages' cache keys)."""
    return {"prompt_format": t.prompt_format, "system_prompt": t.system_prompt, "dtype": t.dtype,
            "lora": t.lora}


# ----- evaluate: the SFT baseline and every GRPO checkpoint --------------------------------------


def run_evaluate(spec_json: str, base_dir: str, model: str, name: str, eval_path: str, out: str) -> dict:
    """training.evaluate of one checkpoint on the held-out split; writes out/<name>.json."""
    import polars as pl

    from training.eval import evaluate
    from training.modeling import set_threads

    spec = _spec(spec_json, base_dir)
    set_threads(spec.training.torch_threads)
    result = evaluate(model, pl.read_parquet(eval_path), spec.eval, spec.training.seed,
                      workers=spec.eval.workers, device=spec.training.device, dtype=spec.training.dtype)
    result = {"name": name, **result}
    (Path(out) / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def evaluate_stage(spec: DomainSpec, root: Path, split: Manifest, models: dict[str, str],
                   model_digests: dict[str, str], force: bool = False, steps=LOCAL) -> Manifest:
    """Evaluate each named model directory (e.g. sft, step_000002) on the eval split, in parallel."""
    inputs = {"eval": split.digests["eval"], "eval_cfg": spec.eval, "seed": spec.training.seed,
              "models": model_digests, "dtype": spec.training.dtype}
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


