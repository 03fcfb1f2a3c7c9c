"""Ingest: raw files (JSONL, CSV, Parquet, Hugging Face datasets on disk) -> rows of the one schema.

Every input record ends up either as a row (`id, domain, category, question, reference, solution,
source`, all strings; `id` empty when the log has none) or in the quarantine table with its
`source` (`file:line`, or `file:row N` for Parquet/HF, 0-based), a `reason` slug and a `detail`:

    malformed_json, malformed_csv_row, missing_field:<field>, oversized_row, binary_junk,
    undecodable_line, undecodable_file (one reject for the whole file)

A required field that is absent, null or blank is `missing_field:<field>` (CSV cannot tell an
empty cell from a missing value); a value that only becomes empty when cleaned is rejected later
(`empty_reference`). Blank lines are not records and are only counted (`blank_lines` in the stats). Values that are not
strings (numbers, lists, objects) are kept as JSON text, so `42` becomes "42". A stray control
character (a BEL, even unescaped inside a JSON string) keeps the row, and the clean stage drops
it; only a value that really is binary (decode.looks_binary) is `binary_junk`.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from .config import REQUIRED_FIELDS, SourceSpec
from .decode import DecodedFile, Undecodable, decode_file, looks_binary
from .stage import StageResult, make_stats

__all__ = ["ingest", "ingest_source", "IngestError", "ROW_COLUMNS", "REJECT_COLUMNS_INGEST"]

ROW_COLUMNS = ("id", "domain", "category", "question", "reference", "solution", "source")
REJECT_COLUMNS_INGEST = (*ROW_COLUMNS, "raw", "stage", "reason", "detail")
RAW_PREVIEW = 500
PROGRESS_MIN_ROWS = 50_000  # files shorter than this get no per-row bar


class IngestError(ValueError):
    """A source that cannot be read at all because the spec points nowhere (not a data problem)."""


class _Sink:
    """Collects rows and rejects for one source; counts everything it is given."""

    def __init__(self, spec: SourceSpec, domain: str, progress: bool = False) -> None:
        self.spec, self.domain, self.progress = spec, domain, progress
        self.rows: list[dict[str, str]] = []
        self.rejects: list[dict[str, Any]] = []
        self.blank_lines = 0

    def rows_bar(self, items, total: int, label: str):
        """Iterate `items` with a per-row progress bar on stderr (long files only, if asked)."""
        from tqdm.auto import tqdm

        return tqdm(items, total=total, desc=label, unit="row", leave=False,
                    disable=not self.progress or total < PROGRESS_MIN_ROWS)

    def reject(self, source: str, reason: str, detail: str, raw: Any = "", row: dict | None = None) -> None:
        preview = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        self.rejects.append({**(row or {}), "source": source, "raw": preview[:RAW_PREVIEW],
                             "stage": "ingest", "reason": reason, "detail": detail})

    def record(self, source: str, record: Any, raw_size: int, raw: Any) -> None:
        """Map one parsed record onto the row schema, or reject it with the reason."""
        spec = self.spec
        if not isinstance(record, dict):
            return self.reject(source, "malformed_json", f"expected a JSON object, got {type(record).__name__}", raw)
        if raw_size > spec.max_row_bytes:
            return self.reject(source, "oversized_row", f"{raw_size} bytes > max_row_bytes={spec.max_row_bytes}",
                               raw)
        row = {"id": "", "domain": self.domain, "source": source}
        for name in ("id", "question", "reference", "category", "solution"):
            column = getattr(spec.fields, name)
            value = record.get(column) if column is not None else None
            text = value if isinstance(value, str) or value is None else json.dumps(
                value, ensure_ascii=False, default=str)
            if (text is None or text.strip() == "") and name in spec.defaults:
                text = spec.defaults[name]
            row[name] = text if text is not None else ""
            if name in REQUIRED_FIELDS and (text is None or not text.strip()):
                return self.reject(source, f"missing_field:{name}",
                                   f"no value in source column {column!r}; map it in the source's "
                                   f"`fields` or set `defaults`", raw, row)
            if text and looks_binary(text):
                return self.reject(source, "binary_junk", f"{name} is binary data: it holds many NUL "
                                   "or control characters", raw, row)
        self.rows.append(row)


def _expand(spec: SourceSpec, base_dir: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in spec.paths:
        full = pattern if Path(pattern).is_absolute() else str(base_dir / pattern)
        matched = sorted(Path(p) for p in glob.glob(full, recursive=True))
        if not matched:
            raise IngestError(f"source {spec.name!r}: path {pattern!r} matches nothing under {base_dir}; "
                              "fix `path` (a file or glob relative to the spec file)")
        files += matched
    return files


def _label(path: Path, base_dir: Path) -> str:
    """The file as the spec names it: relative to the spec's folder when inside it."""
    try:
        return path.resolve().relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def _jsonl(sink: _Sink, label: str, decoded: DecodedFile) -> None:
    for line in sink.rows_bar(decoded.lines, len(decoded.lines), label):
        where = f"{label}:{line.number}"
        if line.text is None:
            sink.reject(where, line.reason, line.detail, line.raw)
        elif not line.text.strip():
            sink.blank_lines += 1
        elif len(line.raw) > sink.spec.max_row_bytes:
            sink.reject(where, "oversized_row", f"{len(line.raw)} bytes > max_row_bytes="
                        f"{sink.spec.max_row_bytes}", line.raw)
        else:
            try:
                record = json.loads(line.text, strict=False)  # a raw control char in a string is noise
            except json.JSONDecodeError as exc:
                sink.reject(where, "malformed_json", f"not JSON: {exc.msg} (column {exc.colno})", line.raw)
                continue
            sink.record(where, record, len(line.raw), line.raw)


def _csv(sink: _Sink, label: str, decoded: DecodedFile) -> None:
    texts = []
    for line in decoded.lines:
        if line.text is None:  # keep numbering: the reader sees an empty line there
            sink.reject(f"{label}:{line.number}", line.reason, line.detail, line.raw)
        texts.append(line.text or "")
    reader = csv.reader(io.StringIO("\n".join(texts)), delimiter=sink.spec.csv_delimiter, strict=True)
    header: list[str] | None = None
    while True:
        first_line = reader.line_num + 1  # a quoted field may span lines: report where it starts
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            sink.reject(f"{label}:{reader.line_num}", "malformed_csv_row", str(exc),
                        texts[reader.line_num - 1] if 0 < reader.line_num <= len(texts) else "")
            continue
        where = f"{label}:{first_line}"
        if not values or not any(v.strip() for v in values):
            sink.blank_lines += 1
        elif header is None:
            header = values
        elif len(values) != len(header):
            sink.reject(where, "malformed_csv_row", f"expected {len(header)} fields (the header's), "
                        f"found {len(values)}; quote fields that contain the delimiter", ",".join(values))
        else:
            raw = sink.spec.csv_delimiter.join(values)
            sink.record(where, dict(zip(header, values)), len(raw.encode("utf-8")), raw)


def _table_records(sink: _Sink, label: str, df: pl.DataFrame) -> None:
    for i, record in enumerate(sink.rows_bar(df.iter_rows(named=True), df.height, label)):
        raw = json.dumps(record, ensure_ascii=False, default=str)
        sink.record(f"{label}:row {i}", record, len(raw.encode("utf-8")), raw)


def _hf_frames(path: Path, label: str, split: str | None) -> Iterator[tuple[str, pl.DataFrame]]:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a core dependency
        raise IngestError("hf_disk sources need `datasets`: pip install datasets") from exc
    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        names = [split] if split else list(loaded.keys())
        for name in names:
            if name not in loaded:
                raise IngestError(f"{label}: no split {name!r}; splits are {list(loaded.keys())}")
            yield f"{label}[{name}]", pl.from_arrow(loaded[name].flatten_indices().data.table)
    else:
        yield label, pl.from_arrow(loaded.flatten_indices().data.table)


def _read_file(sink: _Sink, path: Path, label: str) -> str:
    """Read one file into the sink; returns the encoding used (or the format)."""
    fmt = sink.spec.format
    if fmt == "parquet":
        _table_records(sink, label, pl.read_parquet(path))
        return "parquet"
    if fmt == "hf_disk":
        for split_label, df in _hf_frames(path, label, sink.spec.split):
            _table_records(sink, split_label, df)
        return "arrow"
    try:
        decoded = decode_file(path.read_bytes(), sink.spec.encoding)
    except Undecodable as exc:
        sink.reject(label, "undecodable_file", f"{exc}; set the source's `encoding` "
                    "(e.g. gb18030, latin-1) or re-export the file as UTF-8")
        return "undecodable"
    (_jsonl if fmt == "jsonl" else _csv)(sink, label, decoded)
    return decoded.encoding


def ingest_source(spec: SourceSpec, domain: str, base_dir: Path, progress: bool = False) -> tuple[_Sink, list[dict]]:
    """Read all files of one source; returns the sink and a per-file summary."""
    sink, files = _Sink(spec, domain, progress), []
    paths = _expand(spec, Path(base_dir))
    from tqdm.auto import tqdm

    for path in tqdm(paths, desc=f"ingest {spec.name}", unit="file", disable=not progress):
        before_rows, before_rej = len(sink.rows), len(sink.rejects)
        label = _label(path, Path(base_dir))
        encoding = _read_file(sink, path, label)
        files.append({"source": spec.name, "file": label, "encoding": encoding,
                      "rows": len(sink.rows) - before_rows, "rejected": len(sink.rejects) - before_rej})
    return sink, files


def ingest(sources: list[SourceSpec], domain: str, base_dir: str | Path, progress: bool = False) -> StageResult:
    """All sources -> one StageResult (kept rows + quarantine), reconciled."""
    start = time.perf_counter()
    rows: list[dict] = []
    rejects: list[dict] = []
    files: list[dict] = []
    blank = 0
    for spec in sources:
        sink, summary = ingest_source(spec, domain, Path(base_dir), progress)
        rows += sink.rows
        rejects += sink.rejects
        files += summary
        blank += sink.blank_lines
    schema = {c: pl.String for c in ROW_COLUMNS}
    kept = pl.DataFrame(rows, schema=schema)
    rej = pl.DataFrame(rejects, schema={c: pl.String for c in REJECT_COLUMNS_INGEST})
    stats = make_stats(len(rows) + len(rejects), kept, rej, time.perf_counter() - start,
                       {"files": files, "blank_lines": blank})
    return StageResult(kept, rej, stats)
