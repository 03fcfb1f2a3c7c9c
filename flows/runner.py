"""The one stage runner: every stage of the table in flows/stages.py runs through `run_stage`.

From a stage's declarations it derives the cache key (its inputs' digests + the spec sections it
reads + extra key parts such as source files + the library code version, flows/cache.py), and on a
miss builds the stage folder: it calls the stage's library function once, or once per item of the
stage's fan-out plan and then merges, through a `steps` object that decides where calls run:

    LocalSteps()       inline, in this process (the CLI, tests)
    ThreadSteps(n)     n threads in this process
    PrefectSteps(spec) (flows/tasks.py) named Prefect tasks on the flow's task runner (threads, Dask)

A library function takes a `Job` (plain, picklable: the spec as JSON, input paths, the output folder,
a fan-out item) and returns a `Result`. Rows it returns are written here, in the task, as
`<stage>.parquet`, `<stage>_rejects.parquet` and `<stage>_stats.json` (cleaning.write_stage checks
rows_in == kept + rejected), checked against the row type (flows/rows.py), and named `rows`,
`rejects`, `stats` in the manifest. The runner prints one counts line per stage, cached or not.
The same spec and seed give the same outputs for any steps object and any `orchestration.chunk_rows`:
a stage's plan never depends on the runner, and chunked stages seed by row, not by chunk.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from rlvrflow.flows.cache import Manifest, build_stage, stage_key
from rlvrflow.flows.errors import StageFailed, classify
from rlvrflow.flows.rows import check_rows
from rlvrflow.flows.spec import DomainSpec, spec_data, spec_from_dict

Echo = Callable[[str], None]
Progress = Callable[[float], None]


@lru_cache(maxsize=8)
def _spec(spec_json: str, base_dir: str) -> DomainSpec:
    return spec_from_dict(json.loads(spec_json), base_dir)


@dataclass(frozen=True)
class Job:
    """What one library call gets: the spec, its inputs' files, its output folder, its fan-out item."""

    stage: str
    spec_json: str
    base_dir: str
    root: str  # the cache root (OUT): stage folders live in ROOT/stages/
    out: str  # this stage's folder
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> output name -> path ("dir" too)
    item: dict[str, Any] | None = None
    index: int = 0
    progress: Progress | None = field(default=None, compare=False)  # not pickled (see __getstate__)

    @property
    def spec(self) -> DomainSpec:
        return _spec(self.spec_json, self.base_dir)

    def input(self, stage: str, name: str) -> Path:
        return Path(self.inputs[stage][name])

    def __getstate__(self):
        state = dict(self.__dict__)
        state["progress"] = None  # a callback into this process never travels to a Dask worker
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


@dataclass(frozen=True)
class Result:
    """What a library function returns: rows (kept and rejects) for a row stage, the files it wrote
    into `job.out` (name -> relative path) and its stats (rows_in/kept/rejected for row stages)."""

    stats: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    kept: Any = None  # polars.DataFrame
    rejects: Any = None
    tables: dict[str, tuple[str, Any]] = field(default_factory=dict)  # name -> (file name, frame): side tables


# ----- where calls run ------------------------------------------------------------------------


class LocalSteps:
    """Runs every call inline, in order."""

    def call(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return fn(**kwargs)

    def map(
        self, name: str, fn: Callable[..., Any], items: list[dict[str, Any]], done: Callable[[int], None] | None = None
    ) -> list[Any]:
        out = []
        for kw in items:
            out.append(fn(**kw))
            if done:
                done(len(out))
        return out


class ThreadSteps(LocalSteps):
    """Fans `map` out over a pool of threads (results come back in item order)."""

    def __init__(self, workers: int):
        self.workers = workers

    def map(self, name, fn, items, done=None):
        with ThreadPoolExecutor(self.workers, thread_name_prefix=name) as pool:
            futures = [pool.submit(fn, **kw) for kw in items]
            out = []
            for f in futures:
                out.append(f.result())
                if done:
                    done(len(out))
        return out


# ----- the task bodies -------------------------------------------------------------------------


def execute(fn: Callable[[Job], Result], job: Job, row_stage: bool, file: str) -> dict[str, Any]:
    """Run one library call and write what it returned; returns paths and stats (never frames)."""
    from rlvrflow import cleaning
    from rlvrflow.io import write_parquet

    result = fn(job)
    out = Path(job.out)
    files = dict(result.files)
    chunk = None if job.item is None else f"chunks/{job.stage}-{job.index:05d}"
    if result.kept is not None:
        written = cleaning.write_stage(out, chunk or file, result.kept, result.rejects, dict(result.stats))
        files.update({k: str(Path(p).relative_to(out)) for k, p in written.items()})
        files["rows"] = files.pop("kept")
    tables = {}
    for name, (filename, frame) in result.tables.items():
        rel = f"{chunk}.{filename}" if chunk else filename
        write_parquet(out / rel, frame)
        files[name], tables[name] = rel, filename
    if row_stage and "rows" not in files:
        raise StageFailed(f"{job.stage}: the library call returned no rows for a row stage (a bug)", "bug")
    return {
        "files": files,
        "stats": dict(result.stats),
        "pid": os.getpid(),
        "given": (job.item or {}).get("rows"),
        "tables": tables,
    }


def _concat_tables(out: Path, parts: list[dict[str, Any]], sort_by: str | None) -> dict[str, str]:
    """Each side table of the parts, concatenated in plan order (stable-sorted by `sort_by`)."""
    import polars as pl

    from rlvrflow.io import write_parquet

    files = {}
    for name, filename in parts[0]["tables"].items():
        frame = pl.concat([pl.read_parquet(out / p["files"][name]) for p in parts], how="diagonal_relaxed")
        if sort_by and sort_by in frame.columns:
            frame = frame.sort(sort_by, maintain_order=True)
        write_parquet(out / filename, frame)
        files[name] = filename
    return files


def merge(job: Job, parts: list[dict[str, Any]], row_stage: bool, sort_by: str | None, file: str) -> dict[str, Any]:
    """Join the fan-out's parts: rows and rejects concatenated in plan order (all columns kept),
    counts summed and checked against what the plan gave; other files and stats by part."""
    import polars as pl

    from rlvrflow import cleaning

    out = Path(job.out)
    files: dict[str, str] = {}
    for p in parts:
        files.update({k: v for k, v in p["files"].items() if k not in ("rows", "rejects", "stats", *p["tables"])})
    files.update(_concat_tables(out, parts, sort_by))
    if not row_stage:
        return {"files": files, "stats": {}, "pids": sorted({p["pid"] for p in parts})}
    kept = pl.concat([pl.read_parquet(out / p["files"]["rows"]) for p in parts], how="diagonal_relaxed")
    rejects = pl.concat([pl.read_parquet(out / p["files"]["rejects"]) for p in parts], how="diagonal_relaxed")
    if sort_by:
        kept = kept.sort(sort_by, maintain_order=True)
    stats = sum_stats([p["stats"] for p in parts])
    given = [p["given"] for p in parts]
    if None not in given and sum(given) != stats["rows_in"]:
        raise StageFailed(
            f"{job.stage}: the chunks were given {sum(given)} rows and returned "
            f"{stats['rows_in']} (a bug: a chunk lost or duplicated rows)",
            "bug",
        )
    if "id" in kept.columns and kept["id"].n_unique() != kept.height:
        raise StageFailed(f"{job.stage}: merged rows hold duplicate ids (a bug in the fan-out plan)", "bug")
    written = cleaning.write_stage(out, file, kept, rejects, stats)
    files.update({"rows": f"{file}.parquet", "rejects": f"{file}_rejects.parquet", "stats": f"{file}_stats.json"})
    shutil.rmtree(out / "chunks", ignore_errors=True)
    assert all(Path(p).exists() for p in written.values())
    return {"files": files, "stats": {**stats, "chunks": len(parts)}, "pids": sorted({p["pid"] for p in parts})}


def sum_stats(parts: list[dict]) -> dict:
    """Per-chunk row stats summed (the row counts, seconds, reasons, and any other integer count a
    call returns, such as attach's outcome_only_rows); rows_in == rows_kept + rows_rejected still holds."""
    total = {"rows_in": 0, "rows_kept": 0, "rows_rejected": 0, "rejected_by_reason": {}, "seconds": 0.0}
    for st in parts:
        for k in ("rows_in", "rows_kept", "rows_rejected"):
            total[k] += int(st.get(k, 0))
        for k, v in st.items():
            if (
                k not in ("rows_in", "rows_kept", "rows_rejected", "seconds")
                and isinstance(v, int)
                and not isinstance(v, bool)
            ):
                total[k] = total.get(k, 0) + v
        total["seconds"] += float(st.get("seconds", 0.0))
        for reason, n in st.get("rejected_by_reason", {}).items():
            total["rejected_by_reason"][reason] = total["rejected_by_reason"].get(reason, 0) + int(n)
    total["seconds"] = round(total["seconds"], 3)
    return total


# ----- the stage table's row type and the runner ---------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One row of the stage table (flows/stages.py).

    inputs    "stage.output" names this stage reads; their digests enter the key
    sections  dotted spec paths it reads ("verifiers", "training.seed"); their values enter the key
    code      library packages whose source enters the key
    call      the library function, Job -> Result (module-level, so Dask can ship it)
    plan      optional fan-out: Job -> list of items (dicts; "rows": how many rows the item holds);
              `call` then runs once per item and the parts are merged (rows in plan order)
    finish    optional: Job, merged stats -> Result run after the merge (reports, canaries)
    extra_key optional: (spec, upstream manifests) -> more key parts (files outside the spec)
    rows      a row stage: its kept rows are checked against flows/rows.py after this stage
    all_ranks under a multi-rank launch, every rank runs the call with rank 0's job (flows/ranks.py)
    """

    name: str
    inputs: tuple[str, ...]
    sections: tuple[str, ...]
    code: tuple[str, ...]
    call: Callable[[Job], Result]
    plan: Callable[[Job], list[dict[str, Any]]] | None = None
    finish: Callable[[Job, dict[str, Any]], Result] | None = None
    extra_key: Callable[[DomainSpec, dict[str, Manifest]], dict[str, Any]] | None = None
    rows: bool = False
    file: str = ""  # a row stage's file stem (default: its name): FILE.parquet, FILE_rejects.parquet, FILE_stats.json
    sort_by: str | None = None
    resumable: bool = False
    summary: Callable[[dict[str, Any]], str] | None = None
    all_ranks: bool = False

    @property
    def stem(self) -> str:
        return self.file or self.name

    @property
    def upstream(self) -> list[str]:
        return sorted({ref.split(".", 1)[0] for ref in self.inputs})


def section(spec: DomainSpec, dotted: str) -> Any:
    """The value at a dotted spec path ("training.sft.max_steps")."""
    value: Any = spec
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def key_parts(stage: Stage, spec: DomainSpec, upstream: dict[str, Manifest]) -> dict[str, Any]:
    """What a stage's cache key hashes, by name: input digests, spec sections, extra parts."""
    parts: dict[str, Any] = {}
    for ref in stage.inputs:
        name, output = ref.split(".", 1)
        parts[ref] = upstream[name].digests[output]
    parts.update({dotted: section(spec, dotted) for dotted in stage.sections})
    if stage.extra_key is not None:
        parts.update(stage.extra_key(spec, upstream))
    return parts


def stage_key_of(stage: Stage, spec: DomainSpec, upstream: dict[str, Manifest]) -> str:
    """The stage's cache key: its name, its inputs' digests, its spec sections and its code."""
    return stage_key(stage.name, key_parts(stage, spec, upstream), list(stage.code))


def row_counts(st: dict) -> str:
    """`in N, kept K, rejected R (reason=n, ...)` of a row stage's stats."""
    reasons = ", ".join(f"{k}={v}" for k, v in sorted(st.get("rejected_by_reason", {}).items()))
    return f"in {st['rows_in']}, kept {st['rows_kept']}, rejected {st['rows_rejected']}" + (
        f" ({reasons})" if reasons else ""
    )


def counts_line(name: str, m: Manifest, summary: Callable[[dict], str] | None = None) -> str:
    """What the terminal shows per stage: its counts, then cached (and key) or computed in N s."""
    st = m.stats
    if summary is not None:
        what = summary(st)
    elif "rows_in" in st:
        what = row_counts(st)
    else:
        what = ", ".join(f"{k} {v}" for k, v in st.items() if isinstance(v, (int, float)))
    cpu = "" if m.cpu_seconds is None else f" ({m.cpu_seconds:.1f} s CPU)"
    how = f"cached {m.key}" if m.cached else f"computed in {m.seconds:.1f} s{cpu}: {m.reason}"
    return f"  {name:<9} {what}  [{how}]"


def print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _job(
    stage: Stage, spec: DomainSpec, root: Path, out: Path, upstream: dict[str, Manifest], progress: Progress | None
) -> Job:
    inputs = {name: {"dir": str(m.dir), **{k: str(m.path(k)) for k in m.outputs}} for name, m in upstream.items()}
    return Job(
        stage.name, json.dumps(spec_data(spec)), str(spec.base_dir), str(root), str(out), inputs, progress=progress
    )


def _build(stage: Stage, spec: DomainSpec, root: Path, upstream: dict[str, Manifest], steps, progress: Progress | None):
    def build(out: Path):
        job = _job(stage, spec, root, out, upstream, progress)
        if stage.plan is None:
            kwargs = {"fn": stage.call, "job": job, "row_stage": stage.rows, "file": stage.stem}
            from rlvrflow.flows import ranks

            if stage.all_ranks and ranks.active():
                # Every rank is inside this one attempt: no retry (a rerun on rank 0 alone would pair its
                # collectives with the other ranks' first attempt), and a failure ends the launch now.
                ranks.publish(stage.name, stage.call, replace(job, progress=None))
                try:
                    done = execute(**kwargs)
                except BaseException as exc:
                    ranks.abort(stage.name, exc)
            else:
                done = steps.call(stage.name, execute, kwargs)
        else:
            items = stage.plan(job)
            jobs = [
                {
                    "fn": stage.call,
                    "job": replace(job, item=it, index=i, progress=None),
                    "row_stage": stage.rows,
                    "file": stage.stem,
                }
                for i, it in enumerate(items)
            ]
            tick = (lambda n: progress(n / max(1, len(items)))) if progress else None
            parts = steps.map(f"{stage.name}-chunk", execute, jobs, done=tick)
            done = steps.call(
                f"{stage.name}-merge",
                merge,
                {"job": job, "parts": parts, "row_stage": stage.rows, "sort_by": stage.sort_by, "file": stage.stem},
            )
            if "pids" in done:
                done["stats"]["chunk_pids"] = done["pids"]
        files, stats = dict(done["files"]), dict(done["stats"])
        if stage.finish is not None:
            extra = steps.call(f"{stage.name}-finish", stage.finish, {"job": job, "stats": stats})
            files.update(extra.files)
            stats.update(extra.stats)
        if stage.rows:
            import polars as pl

            check_rows(pl.read_parquet_schema(out / files["rows"]), stage.name, str(out / files["rows"]))
        return files, stats

    return build


def run_stage(
    stage: Stage,
    spec: DomainSpec,
    root: str | Path,
    upstream: dict[str, Manifest],
    steps: Any = None,
    force: bool = False,
    echo: Echo | None = print_line,
    progress: Progress | None = None,
) -> Manifest:
    """The stage's manifest: cached when its key is finished (and its outputs check out), else built
    into ROOT/stages/<stage>/<key>/. A failure becomes StageFailed naming the stage, the domain, the
    spec and the cause, with the cause's kind (flows/errors.py)."""
    root = Path(root)
    steps = steps or LocalSteps()
    try:
        missing = [name for name in stage.upstream if name not in upstream]
        if missing:
            raise StageFailed(f"needs the output of {', '.join(missing)} (a bug in the wiring)", "bug")
        key = stage_key_of(stage, spec, upstream)
        m = build_stage(
            root,
            stage.name,
            key,
            _build(stage, spec, root, upstream, steps, progress),
            force,
            resumable=stage.resumable,
        )
    except Exception as exc:
        where = spec.path or spec.base_dir
        raise StageFailed(
            f"stage '{stage.name}' failed (domain {spec.domain}, spec {where}): {type(exc).__name__}: {exc}",
            classify(exc),
        ) from exc
    if progress is not None:
        progress(1.0)
    if echo is not None:
        echo(counts_line(stage.name, m, stage.summary))
    return m
