"""The streaming `prepare`: ingest -> clean -> dedup -> validate with memory bounded by a chunk.

    result = prepare_stream(sources, cleaning, validation, domain, base_dir, out_dir)

Same outputs as the in-memory path (prepare.prepare_in_memory): the same kept rows in the same
order, the same rejects with the same reasons and details, the same stats (seconds aside); tests/
cleaning/test_stream.py compares them. How it goes (datatrove's shape: steps that never know who
runs them, near-dedup as separate passes over signatures on disk):

    pass 1, per file     read `cleaning.chunk_rows` records at a time; each chunk is ingested,
                         cleaned and written as Parquet parts, with its dedup signatures (shard.py)
    dedup, per shard     exact duplicates, then candidate near-duplicate pairs, each hash shard alone
    near resolve         the greedy near-duplicate choice over the candidate pairs (one task)
    pass 2, per chunk    drop the chunk's duplicates, run the row checks (Great Expectations)
    ids and counts       unique ids (a sorted array of 64-bit id hashes), the row count and the
                         rejected share on running counts, in input order
    outputs              the parts are streamed into the usual files (polars sink_parquet)

`run_all(fn, [args, ...], desc) -> [result, ...]` runs the per-file, per-shard and per-chunk tasks:
LocalRun is a plain loop, cleaning/dask_run.py's DaskRun a Dask cluster. Progress (tqdm on stderr,
only on a terminal): rows read and their rate per file on a local run, tasks done per pass. The scratch parts live in
`out_dir/_parts` while the run lasts and are removed after it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .chunks import FileTask, bar, finish_chunk, part, reasons, scan_file
from .config import CleaningConfig, SourceSpec, ValidationConfig
from .ingest import expand, label_of
from .shard import exact_shard, pairs_shard, resolve_near
from rlvrflow.io import atomic_write, write_json

from .validate import ValidationFailed, streamed_report

__all__ = ["prepare_stream", "LocalRun", "file_tasks", "RunAll", "StoredResult"]

RunAll = Callable[[Callable[..., Any], list[tuple], str], list[Any]]
STAGES = ("ingest", "clean", "dedup", "validate")


class LocalRun:
    """Runs the tasks one after another in this process."""

    local = True

    def __init__(self, progress: bool = False) -> None:
        self.progress = progress

    def __call__(self, fn: Callable[..., Any], items: list[tuple], desc: str) -> list[Any]:
        with bar(self.progress and len(items) > 1, total=len(items), desc=desc, unit="task", leave=False) as shown:
            out = []
            for args in items:
                out.append(fn(*args))
                shown.update(1)
        return out


def file_tasks(sources: Sequence[SourceSpec], base_dir: str | Path) -> list[FileTask]:
    """Every input file in input order (sources, then each source's sorted matches)."""
    tasks: list[FileTask] = []
    for spec in sources:
        for path in expand(spec, Path(base_dir)):
            tasks.append(FileTask(len(tasks), spec, str(path), label_of(path, Path(base_dir))))
    return tasks


class StoredResult:
    """What prepare returns after a streamed run: `stats` at once; `kept` and `rejects` are read
    from clean.parquet and rejects.parquet when first asked for (they may not fit in memory)."""

    def __init__(self, kept_path: Path, rejects_path: Path, stats: dict[str, Any]) -> None:
        self.kept_path, self.rejects_path, self.stats = kept_path, rejects_path, stats
        self._kept: pl.DataFrame | None = None
        self._rejects: pl.DataFrame | None = None

    @property
    def kept(self) -> pl.DataFrame:
        if self._kept is None:
            self._kept = pl.read_parquet(self.kept_path)
        return self._kept

    @property
    def rejects(self) -> pl.DataFrame:
        if self._rejects is None:
            self._rejects = pl.read_parquet(self.rejects_path)
        return self._rejects


class _Tally:
    """Running counts of one stage: rows in, kept, rejected by reason, seconds."""

    def __init__(self) -> None:
        self.rows_in = self.rows_kept = 0
        self.by_reason: dict[str, int] = {}
        self.seconds = 0.0

    def add(self, rows_in: int, kept: int, by_reason: dict[str, int]) -> None:
        self.rows_in, self.rows_kept = self.rows_in + rows_in, self.rows_kept + kept
        for reason, n in by_reason.items():
            self.by_reason[reason] = self.by_reason.get(reason, 0) + n

    def stats(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        ordered = dict(sorted(self.by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
        return {
            "rows_in": self.rows_in,
            "rows_kept": self.rows_kept,
            "rows_rejected": sum(ordered.values()),
            "rejected_by_reason": ordered,
            "seconds": round(self.seconds, 3),
            **(extra or {}),
        }


def _pass1(
    tasks: list[FileTask],
    work: Path,
    cleaning: CleaningConfig,
    domain: str,
    run_all: RunAll,
    progress: bool,
    tallies: dict[str, _Tally],
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    start = time.perf_counter()
    rows_bar = progress and getattr(run_all, "local", False)  # a worker's bar would not reach this terminal
    scanned = run_all(scan_file, [(t, str(work), cleaning, domain, rows_bar) for t in tasks], "ingest+clean files")
    names: list[str] = []
    pii: dict[str, int] = {}
    pii_rows = 0
    for one in scanned:
        for c in one["chunks"]:
            names.append(c["name"])
            tallies["ingest"].add(c["ingest"]["in"], c["ingest"]["kept"], c["ingest"]["reasons"])
            tallies["clean"].add(c["clean"]["in"], c["clean"]["kept"], c["clean"]["reasons"])
            for kind, n in (c["clean"]["pii"] or {}).items():
                pii[kind] = pii.get(kind, 0) + n
            pii_rows += c["clean"]["pii_rows"] or 0
    tallies["ingest"].seconds = tallies["clean"].seconds = (time.perf_counter() - start) / 2
    ingest_extra = {
        "files": [one["file"] for one in scanned],
        "blank_lines": sum(one["blank_lines"] for one in scanned),
    }
    clean_extra = (
        {"pii": dict(sorted(pii.items(), key=lambda kv: (-kv[1], kv[0]))), "pii_rows": pii_rows}
        if cleaning.pii.enabled
        else {}
    )
    return sorted(names), ingest_extra, clean_extra


def _dedup_passes(work: Path, cleaning: CleaningConfig, run_all: RunAll) -> None:
    cfg, shards = cleaning.dedup, list(range(cleaning.dedup.shards))
    if cfg.exact:
        run_all(exact_shard, [(str(work), s) for s in shards], "dedup: exact shards")
    if cfg.near:
        run_all(pairs_shard, [(str(work), s) for s in shards], "dedup: near-duplicate candidate shards")
        run_all(resolve_near, [(str(work), cfg)], "dedup: near-duplicate choice")


def _check_ids(work: Path, names: list[str], validation: ValidationConfig, tally: _Tally) -> list[dict[str, Any]]:
    """Unique ids on running hashes, in input order: the first copy that passed the row checks
    stays, later copies are `duplicate_id`. Writes validate/kept and validate/rejects parts."""
    from .validate import detail_of

    seen = np.zeros(0, dtype=np.uint64)
    shown_rows: list[dict[str, Any]] = []
    for name in names:
        df = pl.read_parquet(part(work, "checked", name))
        ids = df["id"].hash(seed=3).to_numpy()
        passed = df["_reason"].is_null().to_numpy()
        candidates = np.flatnonzero(passed)
        h = ids[candidates]
        _, first = np.unique(h, return_index=True)
        repeat = np.ones(len(h), dtype=bool)
        repeat[first] = False
        pos = np.searchsorted(seen, h)
        repeat |= (pos < len(seen)) & (seen[np.minimum(pos, len(seen) - 1)] == h) if len(seen) else False
        reason = df["_reason"].to_list()
        for k in candidates[repeat].tolist():
            reason[k] = "duplicate_id"
        seen = np.union1d(seen, h)
        df = df.with_columns(pl.Series("_reason", reason, dtype=pl.String))
        bad = df["_reason"].is_not_null()
        rejected = df.filter(bad).with_columns(
            pl.lit("validate").alias("stage"),
            pl.col("_reason").alias("reason"),
            pl.col("_reason").map_elements(lambda r: detail_of(r, validation), return_dtype=pl.String).alias("detail"),
        )
        rejected.drop("_reason").write_parquet(part(work, "validate/rejects", name))
        df.filter(~bad).drop("_reason").write_parquet(part(work, "validate/kept", name))
        tally.add(df.height, df.height - rejected.height, reasons(rejected))
        shown_rows += [
            {"id": i, "source": s}
            for i, s in zip(*df.filter(pl.col("_reason") == "duplicate_id").select("id", "source").get_columns())
        ]
    return shown_rows


def _sink(work: Path, what: str, path: Path) -> None:
    files = sorted((work / what).glob("*.parquet"))
    if not files:  # no records reached this stage (empty sources): an empty table, not a crash
        atomic_write(path, lambda tmp: pl.DataFrame().write_parquet(tmp))
        return
    atomic_write(
        path,
        lambda tmp: (
            pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")
            .select(pl.exclude("_row"))
            .sink_parquet(tmp)
        ),
    )


def _write_stage(work: Path, out: Path, name: str, stats: dict[str, Any]) -> None:
    _sink(work, f"{name}/kept", out / "stages" / f"{name}.parquet")
    _sink(work, f"{name}/rejects", out / "stages" / f"{name}_rejects.parquet")
    write_json(out / "stages" / f"{name}_stats.json", stats)


def _all_rejects(work: Path, path: Path) -> None:
    files = [f for s in STAGES for f in sorted((work / s / "rejects").glob("*.parquet"))]
    if not files:
        atomic_write(path, lambda tmp: pl.DataFrame().write_parquet(tmp))
        return
    atomic_write(
        path, lambda tmp: pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed").sink_parquet(tmp)
    )


def prepare_stream(
    sources: Sequence[SourceSpec],
    cleaning: CleaningConfig,
    validation: ValidationConfig,
    domain: str,
    base_dir: str | Path,
    out_dir: str | Path,
    progress: bool = False,
    run_all: RunAll | None = None,
) -> StoredResult:
    """prepare's outputs (see prepare.py), a chunk at a time; `run_all` runs the tasks (default:
    LocalRun(progress))."""
    run_all = run_all or LocalRun(progress)
    start, out = time.perf_counter(), Path(out_dir)
    work = out / "_parts"
    shutil.rmtree(work, ignore_errors=True)
    tallies = {s: _Tally() for s in STAGES}
    stages: dict[str, dict[str, Any]] = {}

    def done(name: str, extra: dict[str, Any] | None = None) -> None:
        stages[name] = tallies[name].stats(extra)
        _write_stage(work, out, name, stages[name])

    try:
        names, ingest_extra, clean_extra = _pass1(
            file_tasks(sources, base_dir), work, cleaning, domain, run_all, progress, tallies
        )
        done("ingest", ingest_extra)
        done("clean", clean_extra)
        mark = time.perf_counter()
        _dedup_passes(work, cleaning, run_all)
        checked = run_all(finish_chunk, [(str(work), n, validation) for n in names], "dedup+checks chunks")
        for c in checked:
            tallies["dedup"].add(c["dedup"]["in"], c["dedup"]["kept"], c["dedup"]["reasons"])
        tallies["dedup"].seconds = time.perf_counter() - mark
        done("dedup")
        mark = time.perf_counter()
        repeats = _check_ids(work, names, validation, tallies["validate"])
        v = tallies["validate"]
        report = streamed_report(checked, repeats, v.rows_in, v.rows_in - v.rows_kept, validation)
        write_json(out / "validation.json", report)
        if not report["success"]:
            raise ValidationFailed(report)
        v.seconds = time.perf_counter() - mark
        done("validate")
        _sink(work, "validate/kept", out / "clean.parquet")
        _all_rejects(work, out / "rejects.parquet")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = _Tally()
    total.add(tallies["ingest"].rows_in, tallies["validate"].rows_kept, {})
    for t in tallies.values():
        total.add(0, 0, t.by_reason)
    total.seconds = time.perf_counter() - start
    stats = total.stats(
        {
            "domain": domain,
            "files": ingest_extra["files"],
            "stages": {n: {k: v for k, v in st.items() if k != "files"} for n, st in stages.items()},
        }
    )
    stats = {
        k: stats[k]
        for k in ("rows_in", "rows_kept", "rows_rejected", "rejected_by_reason", "seconds", "domain", "stages", "files")
    }
    write_json(out / "stats.json", stats)
    return StoredResult(out / "clean.parquet", out / "rejects.parquet", stats)
