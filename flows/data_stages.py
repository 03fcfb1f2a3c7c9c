"""The data stages as plain functions: prepare, attach verifiers, split. No Prefect in here.

Each stage computes its content-hash key (input file digests + its spec section + library code),
returns the cached folder when that key is finished, and otherwise calls the library into a fresh
stage folder (see flows/cache.py). The Prefect flows and the CLI both call these, so `rlvrflow
clean` and the `prepare` flow produce the same folders.

Each library call goes through `steps.call(name, fn, kwargs)` / `steps.map(name, fn, items)`:
`LocalSteps` runs it inline (CLI, tests), `flows.tasks.PrefectSteps` runs it as a Prefect task.
`attach_stage` cuts the clean rows into chunks of `orchestration.chunk_rows` and maps
`attach_chunk` over them, so verification fans out on threads or Dask without knowing which.
"""
from __future__ import annotations

import glob
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

from flows.cache import Manifest, build_stage, file_digest, stage_key
from flows.spec import DomainSpec, spec_from_dict


log = logging.getLogger("rlvrflow.attach")


class StageFailed(RuntimeError):
    """A stage could not produce its output; the message says which stage, where and why."""


class LocalSteps:
    """Runs stage steps inline, in this process (the CLI and tests)."""

    def call(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return fn(**kwargs)

    def map(self, name: str, fn: Callable[..., Any], items: list[dict[str, Any]]) -> list[Any]:
        return [fn(**kw) for kw in items]


LOCAL = LocalSteps()


def format_stats(stats: dict) -> str:
    """One line per stage: rows in / kept / rejected and the rejects by reason."""
    rows = stats.get("stages", {"": stats}) if isinstance(stats, dict) else {}
    lines = []
    for name, st in rows.items():
        if not isinstance(st, dict) or "rows_in" not in st:
            continue
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(st.get("rejected_by_reason", {}).items()))
        lines.append(f"{name or 'total':>10}: in {st['rows_in']:>6}  kept {st['rows_kept']:>6}  "
                     f"rejected {st['rows_rejected']:>5}" + (f"  ({reasons})" if reasons else ""))
    return "\n".join(lines) or json.dumps(stats, indent=1, default=str)


# ----- prepare: ingest + clean + validate -----------------------------------------------------


def source_files(spec: DomainSpec) -> list[Path]:
    """Every file the spec's sources match; a source that matches nothing is an error."""
    files: list[Path] = []
    for i, src in enumerate(spec.sources):
        patterns = src.path if isinstance(src.path, (list, tuple)) else [src.path]
        matched: list[Path] = []
        for pattern in patterns:
            full = spec.resolve(pattern)
            matched += [Path(p) for p in sorted(glob.glob(str(full), recursive=True))]
        if not matched:
            raise StageFailed(
                f"prepare: sources[{i}] ({src.name}): {patterns} matches no file under {spec.base_dir}; "
                "fix `path` in the spec or generate the raw logs first "
                "(e.g. python examples/retail/generate.py --out examples/retail/raw --seed 0)"
            )
        files += matched
    return files


def _files_digest(paths: list[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        if p.is_dir():
            from flows.cache import tree_digest

            out[str(p)] = tree_digest(p)
        else:
            out[str(p)] = file_digest(p)
    return out


def prepare_key(spec: DomainSpec) -> str:
    inputs = {
        "files": _files_digest(source_files(spec)),
        "domain": spec.domain,
        "sources": spec.sources,
        "cleaning": spec.cleaning,
        "validation": spec.validation,
    }
    return stage_key("prepare", inputs, ["cleaning"])


def run_prepare(spec_json: str, base_dir: str, out: str) -> dict:
    """cleaning.prepare into `out`; returns its stats (the frames stay on disk)."""
    import cleaning

    spec = spec_from_dict(json.loads(spec_json), base_dir)
    result = cleaning.prepare(spec.sources, spec.cleaning, spec.validation, spec.domain,
                              spec.base_dir, Path(out), False)
    return dict(result.stats)


def prepare_stage(spec: DomainSpec, root: Path, force: bool = False, steps=LOCAL) -> Manifest:
    """Ingest + clean + validate into ROOT/stages/prepare/<key>/ (cleaning.prepare)."""

    def build(out: Path):
        stats = steps.call("prepare", run_prepare, {"spec_json": spec.model_dump_json(),
                                                    "base_dir": str(spec.base_dir), "out": str(out)})
        outputs = {"clean": "clean.parquet", "rejects": "rejects.parquet", "stats": "stats.json",
                   "validation": "validation.json"}
        return {k: v for k, v in outputs.items() if (out / v).exists()}, stats

    return build_stage(root, "prepare", prepare_key(spec), build, force)


def prepare_plain(spec: DomainSpec, out_dir: Path):
    """`rlvrflow clean`: cleaning.prepare straight into out_dir (no cache folders)."""
    import cleaning

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return cleaning.prepare(spec.sources, spec.cleaning, spec.validation, spec.domain,
                            spec.base_dir, Path(out_dir), False)


# ----- attach verifiers (fanned out in chunks) -------------------------------------------------


def referenced_files(spec: DomainSpec) -> list[Path]:
    """Files named by verifier params (e.g. the SQL database): their content is part of the key."""
    found: list[Path] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value and len(value) < 512 and "\n" not in value:
            p = spec.resolve(value)
            if p.exists() and p != spec.base_dir:
                found.append(p)

    walk(spec.verifiers.model_dump(mode="json"))
    return sorted(set(found))


def attach_key(spec: DomainSpec, clean: Manifest) -> str:
    inputs = {"clean": clean.digests["clean"], "verifiers": spec.verifiers,
              "files": _files_digest(referenced_files(spec)), "chunk_rows": spec.orchestration.chunk_rows}
    return stage_key("attach", inputs, ["verifiers"])


def attach_chunks(clean_path: Path, chunk_rows: int, out: Path) -> list[dict]:
    """The fan-out plan: one kwargs dict per chunk of the clean rows."""
    import polars as pl

    n = pl.scan_parquet(clean_path).select(pl.len()).collect().item()
    return [{"clean_path": str(clean_path), "offset": off, "length": chunk_rows,
             "out_prefix": str(out / "chunks" / f"attach-{i:05d}")}
            for i, off in enumerate(range(0, max(n, 1), chunk_rows))]


def attach_chunk(clean_path: str, offset: int, length: int, out_prefix: str,
                 verifiers_json: str, base_dir: str, workers: int) -> dict:
    """verifiers.attach on rows [offset, offset+length) of the clean table; writes two parquet files."""
    import polars as pl

    import verifiers
    from verifiers.config import VerifierConfig

    df = pl.read_parquet(clean_path).slice(offset, length)
    cfg = VerifierConfig.model_validate_json(verifiers_json)
    result = verifiers.attach(df, cfg, Path(base_dir), workers=workers)  # the pool serializes its own callers
    kept, rejects, stats = _unpack(result)
    Path(out_prefix).parent.mkdir(parents=True, exist_ok=True)
    kept.write_parquet(f"{out_prefix}.parquet")
    rejects.write_parquet(f"{out_prefix}_rejects.parquet")
    return {"kept": f"{out_prefix}.parquet", "rejects": f"{out_prefix}_rejects.parquet", "stats": stats,
            "pid": os.getpid()}


def _unpack(result: Any):
    if isinstance(result, tuple):
        return result
    return result.kept, result.rejects, dict(result.stats)


def merge_stats(parts: list[dict]) -> dict:
    """Sum per-chunk stats; rows_in == rows_kept + rows_rejected still holds for the sum."""
    total = {"rows_in": 0, "rows_kept": 0, "rows_rejected": 0, "rejected_by_reason": {}, "seconds": 0.0}
    for st in parts:
        for k in ("rows_in", "rows_kept", "rows_rejected"):
            total[k] += int(st.get(k, 0))
        total["seconds"] += float(st.get("seconds", 0.0))
        for reason, n in st.get("rejected_by_reason", {}).items():
            total["rejected_by_reason"][reason] = total["rejected_by_reason"].get(reason, 0) + int(n)
    assert total["rows_in"] == total["rows_kept"] + total["rows_rejected"], total
    total["seconds"] = round(total["seconds"], 3)
    return total


def merge_chunks(parts: list[dict], out: Path, name: str) -> dict:
    """Concatenate chunk outputs into <name>.parquet / <name>_rejects.parquet via cleaning.write_stage."""
    import shutil

    import polars as pl

    import cleaning

    kept = pl.concat([pl.read_parquet(p["kept"]) for p in parts], how="diagonal_relaxed")
    rejects = pl.concat([pl.read_parquet(p["rejects"]) for p in parts], how="diagonal_relaxed")
    stats = merge_stats([p["stats"] for p in parts])
    cleaning.write_stage(out, name, kept, rejects, stats)
    stats["chunks"] = len(parts)
    stats["chunk_pids"] = sorted({p["pid"] for p in parts if "pid" in p})  # where the fan-out ran
    shutil.rmtree(Path(out) / "chunks", ignore_errors=True)
    return stats


def attach_stage(spec: DomainSpec, root: Path, clean: Manifest, force: bool = False,
                 steps=LOCAL) -> Manifest:
    """Attach a verifier to each clean row (fanned out in chunks), rejecting unverifiable rows."""
    verifiers_json = spec.verifiers.model_dump_json()

    def build(out: Path):
        plan = attach_chunks(clean.path("clean"), spec.orchestration.chunk_rows, out)
        for item in plan:
            item.update(verifiers_json=verifiers_json, base_dir=str(spec.base_dir),
                        workers=spec.orchestration.workers)
        parts = steps.map("attach-chunk", attach_chunk, plan)
        stats = steps.call("attach-merge", merge_chunks, {"parts": parts, "out": out, "name": "attach"})
        if spec.verifiers.canaries.enabled:
            stats["canaries"] = steps.call("attach-canaries", run_canaries, {
                "verified": str(out / "attach.parquet"), "verifiers_json": verifiers_json,
                "report_path": str(root / "canary_report.json"), "workers": spec.orchestration.workers})
        return {"verified": "attach.parquet", "rejects": "attach_rejects.parquet",
                "stats": "attach_stats.json"}, stats

    return build_stage(root, "attach", attach_key(spec, clean), build, force)


def run_canaries(verified: str, verifiers_json: str, report_path: str, workers: int | None) -> dict:
    """Probe every rule with the reward canaries (verifiers/canary.py); write the report next to
    the run; raise StageFailed naming the rule, the canary and example rows when one scores."""
    import polars as pl

    from verifiers import canary
    from verifiers.config import VerifierConfig

    cfg = VerifierConfig.model_validate_json(verifiers_json)
    rows = pl.read_parquet(verified, columns=["id", "category", "prompt", "reference", "verifier",
                                              "verifier_params"]).to_dicts()
    report = canary.probe(rows, cfg.rules, cfg.canaries, workers=workers, timeout_s=cfg.timeout_s)
    Path(report_path).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    log.info(canary.summary(report))
    if not report["ok"]:
        raise StageFailed(f"attach: {canary.summary(report)}\n  full report: {report_path}")
    return {"ok": True, "rules": len(report["rules"]),
            "verdicts": sum(r["verdicts"] for r in report["rules"]),
            "scored": {r["category"]: r["scored"] for r in report["rules"] if r["scored"]}}


# ----- split: train / held-out eval -------------------------------------------------------------


def split_key(spec: DomainSpec, verified: Manifest) -> str:
    inputs = {"verified": verified.digests["verified"], "eval_fraction": spec.curriculum.eval_fraction,
              "seed": spec.training.seed, "max_rows": spec.orchestration.max_rows}
    return stage_key("split", inputs, ["curriculum"])


def run_split(verified: str, out: str, eval_fraction: float, seed: int, max_rows: int) -> dict:
    """curriculum.assign_split, then train.parquet / eval.parquet (each capped at max_rows if set)."""
    import polars as pl

    import curriculum

    df = curriculum.assign_split(pl.read_parquet(verified), eval_fraction, seed)
    stats = {"rows_in": df.height}
    for part in ("train", "eval"):
        rows = df.filter(pl.col("split") == part).sort("id")
        if max_rows:
            rows = rows.head(max_rows)
        rows.write_parquet(Path(out) / f"{part}.parquet")
        stats[f"rows_{part}"] = rows.height
    if stats["rows_train"] == 0 or stats["rows_eval"] == 0:
        raise StageFailed(f"split: {stats['rows_train']} train and {stats['rows_eval']} eval rows from "
                          f"{verified}; both must be non-empty: add rows or change curriculum.eval_fraction")
    return stats


def split_stage(spec: DomainSpec, root: Path, verified: Manifest, force: bool = False,
                steps=LOCAL) -> Manifest:
    """Held-out split of the verified rows into ROOT/stages/split/<key>/{train,eval}.parquet."""

    def build(out: Path):
        stats = steps.call("split", run_split, {
            "verified": str(verified.path("verified")), "out": str(out),
            "eval_fraction": spec.curriculum.eval_fraction, "seed": spec.training.seed,
            "max_rows": spec.orchestration.max_rows})
        return {"train": "train.parquet", "eval": "eval.parquet"}, stats

    return build_stage(root, "split", split_key(spec, verified), build, force)
