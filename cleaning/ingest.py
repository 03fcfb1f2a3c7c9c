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
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from .config import REQUIRED_FIELDS, SourceSpec
from .decode import Line, Undecodable, decode_file, looks_binary
from .linestream import stream_lines
from .stage import StageResult, make_stats

__all__ = [
    "ingest",
    "ingest_source",
    "read_one",
    "expand",
    "label_of",
    "Sink",
    "IngestError",
    "ROW_COLUMNS",
    "REJECT_COLUMNS_INGEST",
]

ROW_COLUMNS = ("id", "domain", "category", "question", "reference", "solution", "source")
REJECT_COLUMNS_INGEST = (*ROW_COLUMNS, "raw", "stage", "reason", "detail")
RAW_PREVIEW = 500
PROGRESS_MIN_ROWS = 50_000  # files shorter than this get no per-row bar


class IngestError(ValueError):
    """A source that cannot be read at all because the spec points nowhere (not a data problem)."""


class Sink:
    """Collects rows and rejects for one source; counts everything it is given. With `on_chunk`,
    every `chunk_rows` records (rows + rejects) are handed to it and the lists start empty again;
    call `flush()` after the last file for the remainder."""

    def __init__(
        self,
        spec: SourceSpec,
        domain: str,
        progress: bool = False,
        chunk_rows: int = 0,
        on_chunk: Callable[[list[dict], list[dict]], None] | None = None,
    ) -> None:
        self.spec, self.domain, self.progress = spec, domain, progress
        self.chunk_rows, self.on_chunk = chunk_rows, on_chunk
        self.rows: list[dict[str, str]] = []
        self.rejects: list[dict[str, Any]] = []
        self.blank_lines = self.n_rows = self.n_rejects = 0

    def _added(self) -> None:
        if self.on_chunk is not None and len(self.rows) + len(self.rejects) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        if self.on_chunk is not None and (self.rows or self.rejects):
            self.on_chunk(self.rows, self.rejects)
            self.rows, self.rejects = [], []

    def rows_bar(self, items, total: int, label: str):
        """Iterate `items` with a per-row progress bar on stderr (long files only, if asked)."""
        from tqdm.auto import tqdm

        return tqdm(
            items,
            total=total,
            desc=label,
            unit="row",
            leave=False,
            disable=not self.progress or total < PROGRESS_MIN_ROWS,
        )

    def reject(self, source: str, reason: str, detail: str, raw: Any = "", row: dict | None = None) -> None:
        preview = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        self.rejects.append(
            {
                **(row or {}),
                "source": source,
                "raw": preview[:RAW_PREVIEW],
                "stage": "ingest",
                "reason": reason,
                "detail": detail,
            }
        )
        self.n_rejects += 1
        self._added()

    def record(self, source: str, record: Any, raw_size: int, raw: Any) -> None:
        """Map one parsed record onto the row schema, or reject it with the reason."""
        spec = self.spec
        if not isinstance(record, dict):
            return self.reject(source, "malformed_json", f"expected a JSON object, got {type(record).__name__}", raw)
        if raw_size > spec.max_row_bytes:
            return self.reject(source, "oversized_row", f"{raw_size} bytes > max_row_bytes={spec.max_row_bytes}", raw)
        row = {"id": "", "domain": self.domain, "source": source}
        for name in ("id", "question", "reference", "category", "solution"):
            column = getattr(spec.fields, name)
            value = record.get(column) if column is not None else None
            text = (
                value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False, default=str)
            )
            if (text is None or text.strip() == "") and name in spec.defaults:
                text = spec.defaults[name]
            row[name] = text if text is not None else ""
            if name in REQUIRED_FIELDS and (text is None or not text.strip()):
                return self.reject(
                    source,
                    f"missing_field:{name}",
                    f"no value in source column {column!r}; map it in the source's `fields` or set `defaults`",
                    raw,
                    row,
                )
            if text and looks_binary(text):
                return self.reject(
                    source, "binary_junk", f"{name} is binary data: it holds many NUL or control characters", raw, row
                )
        self.rows.append(row)
        self.n_rows += 1
        self._added()


def expand(spec: SourceSpec, base_dir: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in spec.paths:
        full = pattern if Path(pattern).is_absolute() else str(base_dir / pattern)
        matched = sorted(Path(p) for p in glob.glob(full, recursive=True))
        if not matched:
            raise IngestError(
                f"source {spec.name!r}: path {pattern!r} matches nothing under {base_dir}; "
                "fix `path` (a file or glob relative to the spec file)"
            )
        files += matched
    return files


def label_of(path: Path, base_dir: Path) -> str:
    """The file as the spec names it: relative to the spec's folder when inside it."""
    try:
        return path.resolve().relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def _jsonl(sink: Sink, label: str, lines: Iterable[Line], total: int) -> None:
    for line in sink.rows_bar(lines, total, label):
        where = f"{label}:{line.number}"
        if line.text is None:
            sink.reject(where, line.reason, line.detail, line.raw)
        elif not line.text.strip():
            sink.blank_lines += 1
        elif len(line.raw) > sink.spec.max_row_bytes:
            sink.reject(
                where, "oversized_row", f"{len(line.raw)} bytes > max_row_bytes={sink.spec.max_row_bytes}", line.raw
            )
        else:
            try:
                record = json.loads(line.text, strict=False)  # a raw control char in a string is noise
            except json.JSONDecodeError as exc:
                sink.reject(where, "malformed_json", f"not JSON: {exc.msg} (column {exc.colno})", line.raw)
                continue
            sink.record(where, record, len(line.raw), line.raw)


def _csv_texts(sink: Sink, label: str, lines: Iterable[Line], last: list[str]) -> Iterator[str]:
    """The lines as the csv reader reads them from "\n".join(texts): an unreadable line is rejected
    and read as empty (which keeps the numbering), and a final empty line is not read at all;
    `last` holds the latest line handed out, for a reject's preview."""
    pending: str | None = None
    for line in lines:
        if line.text is None:
            sink.reject(f"{label}:{line.number}", line.reason, line.detail, line.raw)
        if pending is not None:
            last[0] = pending
            yield pending + "\n"
        pending = line.text or ""
    if pending:
        last[0] = pending
        yield pending


def _csv(sink: Sink, label: str, lines: Iterable[Line], total: int = 0) -> None:
    last = [""]
    reader = csv.reader(_csv_texts(sink, label, lines, last), delimiter=sink.spec.csv_delimiter, strict=True)
    header: list[str] | None = None
    while True:
        first_line = reader.line_num + 1  # a quoted field may span lines: report where it starts
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            sink.reject(f"{label}:{reader.line_num}", "malformed_csv_row", str(exc), last[0])
            continue
        where = f"{label}:{first_line}"
        if not values or not any(v.strip() for v in values):
            sink.blank_lines += 1
        elif header is None:
            header = values
        elif len(values) != len(header):
            sink.reject(
                where,
                "malformed_csv_row",
                f"expected {len(header)} fields (the header's), "
                f"found {len(values)}; quote fields that contain the delimiter",
                ",".join(values),
            )
        else:
            raw = sink.spec.csv_delimiter.join(values)
            sink.record(where, dict(zip(header, values)), len(raw.encode("utf-8")), raw)


def _table_records(sink: Sink, label: str, df: pl.DataFrame, first: int = 0) -> None:
    for i, record in enumerate(sink.rows_bar(df.iter_rows(named=True), df.height, label), first):
        raw = json.dumps(record, ensure_ascii=False, default=str)
        sink.record(f"{label}:row {i}", record, len(raw.encode("utf-8")), raw)


def _hf_frames(path: Path, label: str, split: str | None) -> Iterator[tuple[str, Any]]:
    """(label, arrow table) per split."""
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
            yield f"{label}[{name}]", loaded[name].flatten_indices().data.table
    else:
        yield label, loaded.flatten_indices().data.table


def _batches(sink: Sink, label: str, batches: Iterable[Any]) -> None:
    """Arrow record batches -> records, numbered on from 0 across the batches."""
    first = 0
    for batch in batches:
        _table_records(sink, label, pl.from_arrow(batch), first)
        first += batch.num_rows


def _read_file(sink: Sink, path: Path, label: str, stream: bool = False) -> str:
    """Read one file into the sink; returns the encoding used (or the format). With `stream`, the
    file is read a batch or a line at a time (linestream.stream_lines) instead of whole."""
    fmt, batch = sink.spec.format, max(sink.chunk_rows, 1024)
    if fmt == "parquet":
        if stream:
            import pyarrow.parquet as pq

            _batches(sink, label, pq.ParquetFile(path).iter_batches(batch_size=batch))
        else:
            _table_records(sink, label, pl.read_parquet(path))
        return "parquet"
    if fmt == "hf_disk":
        for split_label, table in _hf_frames(path, label, sink.spec.split):
            _batches(sink, split_label, table.to_batches(max_chunksize=batch) if stream else [table])
        return "arrow"
    try:
        if stream:
            encoding, lines, total = *stream_lines(path, sink.spec.encoding), 0
        else:
            decoded = decode_file(path.read_bytes(), sink.spec.encoding)
            encoding, lines, total = decoded.encoding, decoded.lines, len(decoded.lines)
    except Undecodable as exc:
        sink.reject(
            label,
            "undecodable_file",
            f"{exc}; set the source's `encoding` (e.g. gb18030, latin-1) or re-export the file as UTF-8",
        )
        return "undecodable"
    (_jsonl if fmt == "jsonl" else _csv)(sink, label, lines, total)
    return encoding


def ingest_source(spec: SourceSpec, domain: str, base_dir: Path, progress: bool = False) -> tuple[Sink, list[dict]]:
    """Read all files of one source; returns the sink and a per-file summary."""
    sink, files = Sink(spec, domain, progress), []
    paths = expand(spec, Path(base_dir))
    from tqdm.auto import tqdm

    for path in tqdm(paths, desc=f"ingest {spec.name}", unit="file", disable=not progress):
        files.append(read_one(sink, path, label_of(path, Path(base_dir))))
    return sink, files


def read_one(sink: Sink, path: Path, label: str, stream: bool = False) -> dict:
    """Read one file into the sink; returns its summary (source, file, encoding, rows, rejected)."""
    before_rows, before_rej = sink.n_rows, sink.n_rejects
    encoding = _read_file(sink, path, label, stream)
    return {
        "source": sink.spec.name,
        "file": label,
        "encoding": encoding,
        "rows": sink.n_rows - before_rows,
        "rejected": sink.n_rejects - before_rej,
    }


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
    stats = make_stats(
        len(rows) + len(rejects), kept, rej, time.perf_counter() - start, {"files": files, "blank_lines": blank}
    )
    return StageResult(kept, rej, stats)
