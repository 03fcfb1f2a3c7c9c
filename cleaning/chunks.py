"""The per-chunk work of the streaming path: pass 1 (ingest + clean + dedup signatures, per file)
and pass 2 (dedup decisions + the row checks, per chunk). Plain functions of paths and configs,
so a local loop or a Dask worker runs them alike; everything they make goes to `work` on disk.

A row's `_row` is (file number << 40) | (chunk << 24) | position in the chunk: unique, and
sorted like the input, so "the first row" means the same as in the in-memory path.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .config import CleaningConfig, SourceSpec, ValidationConfig
from .ingest import REJECT_COLUMNS_INGEST, ROW_COLUMNS, Sink, read_one
from .prepare import clean_stage
from .shard import write_signatures
from .stage import reject_frame

__all__ = ["FileTask", "scan_file", "finish_chunk", "reasons", "bar", "part"]


@dataclass(frozen=True)
class FileTask:
    """One input file: its number in input order, its source and the label rejects name it by."""

    index: int
    source: SourceSpec
    path: str
    label: str


def part(work: Path, what: str, name: str) -> Path:
    """work/<what>/<name>.parquet, its folder created."""
    path = Path(work) / what / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def reasons(df: pl.DataFrame) -> dict[str, int]:
    return dict(Counter(df["reason"].to_list())) if df.height else {}


def bar(progress: bool, **kw):
    """A tqdm bar on stderr: only when asked and stderr is a terminal."""
    from tqdm.auto import tqdm

    return tqdm(disable=not progress or not sys.stderr.isatty(), **kw)


def _chunk(
    task: FileTask,
    work: Path,
    cleaning: CleaningConfig,
    domain: str,
    number: int,
    rows: list[dict],
    rejects: list[dict],
) -> dict[str, Any]:
    if number >= 1 << 16:  # _row keeps 16 bits for the chunk number (see the module docstring)
        raise ValueError(
            f"{task.label}: more than 65,536 chunks of cleaning.chunk_rows={cleaning.chunk_rows} "
            "records; raise cleaning.chunk_rows so that one file fits in 65,536 chunks"
        )
    name = f"{task.index:06d}-{number:05d}"
    ing = pl.DataFrame(rows, schema={c: pl.String for c in ROW_COLUMNS})
    ing_rej = pl.DataFrame(rejects, schema={c: pl.String for c in REJECT_COLUMNS_INGEST})
    ing.write_parquet(part(work, "ingest/kept", name))
    ing_rej.write_parquet(part(work, "ingest/rejects", name))
    cleaned = clean_stage(ing, cleaning, domain)
    positions = (
        (np.uint64(task.index) << np.uint64(40))
        | (np.uint64(number) << np.uint64(24))
        | np.arange(cleaned.kept.height, dtype=np.uint64)
    )
    cleaned.kept.with_columns(pl.Series("_row", positions, dtype=pl.UInt64)).write_parquet(
        part(work, "clean/kept", name)
    )
    cleaned.rejects.write_parquet(part(work, "clean/rejects", name))
    write_signatures(Path(work), name, cleaned.kept, positions, cleaning.dedup, cleaning.dedup.shards)
    return {
        "name": name,
        "ingest": {"in": len(rows) + len(rejects), "kept": len(rows), "reasons": reasons(ing_rej)},
        "clean": {
            "in": ing.height,
            "kept": cleaned.kept.height,
            "reasons": reasons(cleaned.rejects),
            "pii": cleaned.stats.get("pii"),
            "pii_rows": cleaned.stats.get("pii_rows"),
        },
    }


def scan_file(
    task: FileTask, work: str, cleaning: CleaningConfig, domain: str, progress: bool = False
) -> dict[str, Any]:
    """Pass 1 for one file: read it a chunk at a time, write each chunk's ingest and clean parts and
    dedup signatures. Returns the file's summary, its blank lines and one entry per chunk."""
    chunks: list[dict[str, Any]] = []
    shown = bar(progress, desc=f"ingest {task.label}", unit="row", leave=False)

    def on_chunk(rows: list[dict], rejects: list[dict]) -> None:
        chunks.append(_chunk(task, Path(work), cleaning, domain, len(chunks), rows, rejects))
        shown.update(len(rows) + len(rejects))

    sink = Sink(task.source, domain, False, cleaning.chunk_rows, on_chunk)
    summary = read_one(sink, Path(task.path), task.label, stream=True)
    sink.flush()
    shown.close()
    return {"file": summary, "blank_lines": sink.blank_lines, "chunks": chunks}


def _decisions(work: Path, lo: int, hi: int) -> pl.DataFrame:
    """(_row, reason, detail) of the dedup rejects with lo <= _row <= hi."""
    frames = []
    exact = sorted((work / "exact_out").glob("*.parquet"))
    if exact:
        frames.append(
            pl.scan_parquet(exact)
            .filter(pl.col("_row").is_between(lo, hi))
            .with_columns(pl.lit("duplicate_exact").alias("reason"))
            .collect()
        )
    if (work / "near_out.parquet").exists():
        frames.append(
            pl.scan_parquet(work / "near_out.parquet")
            .filter(pl.col("_row").is_between(lo, hi))
            .with_columns(pl.lit("duplicate_near").alias("reason"))
            .collect()
        )
    empty = pl.DataFrame(schema={"_row": pl.UInt64, "detail": pl.String, "reason": pl.String})
    return pl.concat([empty, *[f.select(empty.columns) for f in frames]])


def finish_chunk(work: str, name: str, validation: ValidationConfig) -> dict[str, Any]:
    """Pass 2 for one chunk: drop its exact and near duplicates, run the row checks on the rest.
    Writes dedup/kept, dedup/rejects and checked/<name> (the rows with `_reason`, null when they
    passed); returns the counts and the chunk's GX results."""
    from .validate import check_rows

    work_dir = Path(work)
    kept = pl.read_parquet(part(work_dir, "clean/kept", name))
    decided = (
        _decisions(work_dir, kept["_row"].min(), kept["_row"].max())
        if kept.height
        else pl.DataFrame(schema={"_row": pl.UInt64, "detail": pl.String, "reason": pl.String})
    )
    marked = kept.join(decided, on="_row", how="left", maintain_order="left")
    dup = pl.col("reason").is_not_null()
    rejects = reject_frame(
        marked.filter(dup).drop("reason", "detail"), "dedup", marked.filter(dup)["reason"], marked.filter(dup)["detail"]
    )
    deduped = marked.filter(~dup).drop("reason", "detail")
    rejects.drop("_row").write_parquet(part(work_dir, "dedup/rejects", name))
    deduped.drop("_row").write_parquet(part(work_dir, "dedup/kept", name))
    result: dict[str, Any] = {
        "name": name,
        "dedup": {"in": kept.height, "kept": deduped.height, "reasons": reasons(rejects)},
        "gx": None,
        "failures": [],
        "stop": [],
    }
    row_reasons: list[str | None] = []
    if deduped.height:
        row_reasons, result["gx"], result["failures"], result["stop"] = check_rows(deduped.drop("_row"), validation)
    deduped.drop("_row").with_columns(pl.Series("_reason", row_reasons, dtype=pl.String)).write_parquet(
        part(work_dir, "checked", name)
    )
    return result
