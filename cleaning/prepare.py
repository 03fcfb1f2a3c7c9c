"""`prepare`: ingest -> clean -> dedup -> validate, with every stage's output written to disk.

    result = prepare(spec.sources, spec.cleaning, spec.validation, spec.domain, spec.base_dir, "runs/x")

writes into `out_dir`:
    clean.parquet      the valid rows: id, domain, category, question, reference, solution, prompt, source
    rejects.parquet    every row dropped anywhere, with stage, reason (slug) and detail
    stats.json         rows_in, rows_kept, rows_rejected, rejected_by_reason, and per stage the same
                       (stages.clean.pii: PII replaced by kind, when cleaning.pii is on)
    validation.json    the Great Expectations result (also written when validation fails)
    stages/<stage>.parquet, <stage>_rejects.parquet, <stage>_stats.json for ingest, clean, dedup, validate

It prints nothing: progress bars (tqdm, stderr) only with `progress=True`, and INFO lines on the
`rlvrflow.cleaning` logger. A failed validation raises `ValidationFailed` after writing
validation.json and the stages before it.

`prepare` streams (cleaning/stream.py): memory follows `cleaning.chunk_rows`, not the input, and
it returns a StoredResult whose `kept`/`rejects` are read from disk when asked for.
`prepare_in_memory` is the same pipeline on whole tables (one DataFrame per stage), kept as the
reference the streaming path is tested against and as the benchmark's baseline.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from .config import CleaningConfig, SourceSpec, ValidationConfig
from .dedup import dedup
from .ingest import ingest
from .pii import scrub_frame
from rlvrflow.io import write_json, write_parquet

from .stage import StageResult, make_stats, reject_frame, write_stage
from .template import build_prompts
from .transforms import clean_frame
from .validate import ValidationFailed, validate

__all__ = ["prepare", "prepare_in_memory", "clean_stage", "row_id", "OUTPUT_COLUMNS"]

OUTPUT_COLUMNS = ("id", "domain", "category", "question", "reference", "solution", "prompt", "source")
log = logging.getLogger("rlvrflow.cleaning")


def row_id(domain: str, question: str) -> str:
    """The id of a row whose log has none: sha1(domain + "\\n" + cleaned question)[:16]."""
    return hashlib.sha1(f"{domain}\n{question}".encode("utf-8")).hexdigest()[:16]


def clean_stage(df: pl.DataFrame, cfg: CleaningConfig, domain: str) -> StageResult:
    """Clean the text, scrub PII when `cfg.pii` is on (stats: `pii` counts by kind, `pii_rows`),
    reject rows left without a question or reference, fill ids, build prompts."""
    start = time.perf_counter()
    out = clean_frame(df, cfg)
    extra = {}
    if cfg.pii.enabled:
        out, by_kind, rows = scrub_frame(out, cfg.pii.kinds)
        extra = {"pii": by_kind, "pii_rows": rows}
    empty_q = pl.col("question") == ""
    empty_r = (pl.col("reference") == "") & ~empty_q
    rejects = pl.concat(
        [
            reject_frame(out.filter(empty_q), "clean", "empty_question", "question is empty after cleaning"),
            reject_frame(out.filter(empty_r), "clean", "empty_reference", "reference is empty after cleaning"),
        ]
    )
    kept = out.filter(~empty_q & ~empty_r)
    missing = kept["id"].fill_null("") == ""
    if missing.any():
        idx = missing.arg_true()
        ids = [row_id(domain, q) for q in kept["question"].gather(idx).to_list()]
        kept = kept.with_columns(kept["id"].fill_null("").clone().scatter(idx, ids))
    kept = build_prompts(kept, cfg.template).select(OUTPUT_COLUMNS)
    return StageResult(kept, rejects, make_stats(df.height, kept, rejects, time.perf_counter() - start, extra))


def _combine(stages: dict[str, StageResult], rows_in: int, seconds: float, domain: str) -> StageResult:
    kept = stages["validate"].kept
    rejects = pl.concat([s.rejects for s in stages.values()], how="diagonal_relaxed")
    stats = make_stats(
        rows_in,
        kept,
        rejects,
        seconds,
        {
            "domain": domain,
            "stages": {name: {k: v for k, v in s.stats.items() if k != "files"} for name, s in stages.items()},
            "files": stages["ingest"].stats.get("files", []),
        },
    )
    return StageResult(kept, rejects, stats)


def prepare(
    sources: Sequence[SourceSpec],
    cleaning: CleaningConfig,
    validation: ValidationConfig,
    domain: str,
    base_dir: str | Path,
    out_dir: str | Path,
    progress: bool = False,
):
    """Run ingest -> clean -> dedup -> validate a chunk at a time and write the outputs (see the
    module docstring); returns a StoredResult (stats, and kept/rejects read on demand)."""
    from .stream import prepare_stream

    return prepare_stream(sources, cleaning, validation, domain, base_dir, out_dir, progress)


def prepare_in_memory(
    sources: Sequence[SourceSpec],
    cleaning: CleaningConfig,
    validation: ValidationConfig,
    domain: str,
    base_dir: str | Path,
    out_dir: str | Path,
    progress: bool = False,
) -> StageResult:
    """The same pipeline on whole tables, writing the same outputs (see the module docstring)."""
    from tqdm.auto import tqdm

    start = time.perf_counter()
    out, stages = Path(out_dir), {}
    bar = tqdm(total=4, desc="prepare", unit="stage", disable=not progress)

    def done(name: str, result: StageResult) -> StageResult:
        write_stage(out / "stages", name, result.kept, result.rejects, result.stats)
        stages[name] = result
        log.info(
            "%s: %d in, %d kept, %d rejected %s",
            name,
            result.stats["rows_in"],
            result.stats["rows_kept"],
            result.stats["rows_rejected"],
            result.stats["rejected_by_reason"],
        )
        bar.update(1)
        return result

    try:
        ing = done("ingest", ingest(list(sources), domain, base_dir, progress))
        cleaned = done("clean", clean_stage(ing.kept, cleaning, domain))
        deduped = done("dedup", dedup(cleaned.kept, cleaning.dedup))
        try:
            validated, report = validate(deduped.kept, validation)
        except ValidationFailed as exc:
            write_json(out / "validation.json", exc.report)
            raise
        write_json(out / "validation.json", report)
        done("validate", validated)
    finally:
        bar.close()
    result = _combine(stages, ing.stats["rows_in"], time.perf_counter() - start, domain)
    write_parquet(out / "clean.parquet", result.kept)
    write_parquet(out / "rejects.parquet", result.rejects)
    write_json(out / "stats.json", result.stats)
    return result
