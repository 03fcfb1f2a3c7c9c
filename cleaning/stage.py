"""The shape every stage returns and writes: kept rows, rejected rows with reasons, and stats.

`StageResult(kept, rejects, stats)` refuses to exist unless `rows_in == rows_kept + rows_rejected`
and the two tables have those heights. `write_stage` writes `<name>.parquet`,
`<name>_rejects.parquet` and `<name>_stats.json` atomically (a temp file in the same folder, then
`os.replace`), so a crash never leaves a half-written table that a rerun would trust.
Other packages (verifiers attach, curriculum split/tier) reuse both for their own stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from rlvrflow.io import write_json, write_parquet

__all__ = ["StageResult", "write_stage", "make_stats", "reject_frame", "ReconciliationError"]

REJECT_COLUMNS = ("stage", "reason", "detail")


class ReconciliationError(AssertionError):
    """rows_in != rows_kept + rows_rejected: a stage lost or invented rows (a bug, never data)."""


def make_stats(
    rows_in: int, kept: pl.DataFrame, rejects: pl.DataFrame, seconds: float, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The standard stats block of a stage (counts per reject reason, most frequent first)."""
    by_reason: dict[str, int] = {}
    if rejects.height:
        counts = rejects.group_by("reason").len().sort(["len", "reason"], descending=[True, False])
        by_reason = dict(zip(counts["reason"].to_list(), counts["len"].to_list()))
    stats = {
        "rows_in": int(rows_in),
        "rows_kept": kept.height,
        "rows_rejected": rejects.height,
        "rejected_by_reason": by_reason,
        "seconds": round(float(seconds), 3),
    }
    stats.update(extra or {})
    return stats


def reject_frame(rows: pl.DataFrame, stage: str, reason: str | pl.Expr, detail: str | pl.Expr) -> pl.DataFrame:
    """`rows` plus the `stage`, `reason` and `detail` columns of a rejects table."""
    as_expr = lambda v: v if isinstance(v, pl.Expr) else pl.lit(v, dtype=pl.String)  # noqa: E731
    return rows.with_columns(
        pl.lit(stage, dtype=pl.String).alias("stage"), as_expr(reason).alias("reason"), as_expr(detail).alias("detail")
    )


def _check(stats: dict[str, Any], kept: pl.DataFrame, rejects: pl.DataFrame) -> None:
    rows_in, n_kept, n_rej = stats.get("rows_in"), stats.get("rows_kept"), stats.get("rows_rejected")
    if rows_in is None or n_kept is None or n_rej is None:
        raise ReconciliationError("stats must hold rows_in, rows_kept and rows_rejected")
    if rows_in != n_kept + n_rej:
        raise ReconciliationError(f"rows_in={rows_in} != rows_kept={n_kept} + rows_rejected={n_rej}")
    if kept.height != n_kept or rejects.height != n_rej:
        raise ReconciliationError(
            f"tables hold {kept.height} kept / {rejects.height} rejected rows, stats say {n_kept} / {n_rej}"
        )
    if rejects.height and "reason" not in rejects.columns:
        raise ReconciliationError("a rejects table needs a `reason` column")


@dataclass(frozen=True)
class StageResult:
    """A stage's output. Constructing one checks that no row was lost or invented."""

    kept: pl.DataFrame
    rejects: pl.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.stats, self.kept, self.rejects)


def write_stage(
    out_dir: str | Path, name: str, kept: pl.DataFrame, rejects: pl.DataFrame, stats: dict[str, Any]
) -> dict[str, Path]:
    """Write a stage's three files (reconciliation checked first); returns their paths."""
    _check(stats, kept, rejects)
    out = Path(out_dir)
    return {
        "kept": write_parquet(out / f"{name}.parquet", kept),
        "rejects": write_parquet(out / f"{name}_rejects.parquet", rejects),
        "stats": write_json(out / f"{name}_stats.json", stats),
    }
