"""How the retail raw logs look on disk: three systems, three formats, three sets of field names.

- `tickets_2026-0{1,2,3}.jsonl`: the help desk's ticket export, UTF-8 JSON lines (the February file
  starts with a BOM). Fields: ticket_id, created_at, channel, lang, type, body, answer, reply, agent.
- `orders_export_gbk.csv`: the Chinese ERP's export, GBK-encoded, CRLF line ends, Chinese headers
  (单号, 下单日期, 门店, 业务类型, 问题描述, 标准答案, 客服回复); a reply cell may span lines.
- `reports_2026q1.parquet`: the BI tool's report requests (request_id, requested_by, created_at,
  request_text, gold_sql, analyst_sql); written only when pyarrow is importable.
`Record` is one row on its way to a file; the writers return, per record, where it landed
(1-based physical line for JSONL/CSV, 0-based row for Parquet) so the manifest can point at it.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

TICKET_FILES = ["tickets_2026-01.jsonl", "tickets_2026-02.jsonl", "tickets_2026-03.jsonl"]
BOM_FILE = "tickets_2026-02.jsonl"
CSV_FILE = "orders_export_gbk.csv"
CSV_ENCODING = "gbk"
PARQUET_FILE = "reports_2026q1.parquet"

# the row schema's names -> each source's own names (spec.yaml's `fields` maps them back)
FIELD_NAMES = {
    "tickets": {"id": "ticket_id", "question": "body", "reference": "answer", "category": "type", "solution": "reply"},
    "erp": {
        "id": "单号",
        "question": "问题描述",
        "reference": "标准答案",
        "category": "业务类型",
        "solution": "客服回复",
    },
    "reports": {"id": "request_id", "question": "request_text", "reference": "gold_sql", "solution": "analyst_sql"},
}
CSV_HEADER = ["单号", "下单日期", "门店", "业务类型", "问题描述", "标准答案", "客服回复"]
PARQUET_COLUMNS = ["request_id", "requested_by", "created_at", "request_text", "gold_sql", "analyst_sql"]


class _Absent:
    """A key left out of a JSON object (unlike None, which is written as null); survives copying."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __copy__(self) -> "_Absent":
        return self

    def __deepcopy__(self, memo: dict) -> "_Absent":
        return self


ABSENT = _Absent()


def source_of(file: str) -> str:
    return "tickets" if file.endswith(".jsonl") else "erp" if file == CSV_FILE else "reports"


@dataclass
class Record:
    """One raw row: its file, its fields under the source's own names, and what was done to it."""

    file: str
    fields: dict
    kind: str = "clean"  # clean, or the rejecting kind injected (exact_duplicate, ...)
    noise: list[str] = field(default_factory=list)
    raw: bytes | None = None  # exact bytes of a line that is not a serialized record
    category: str = ""
    lang: str = ""
    origin: "Record | None" = None  # for an exact or near duplicate: the record it copies

    def get(self, name: str):
        """A row-schema field (question, reference, ...) read through the source's field names."""
        value = self.fields.get(FIELD_NAMES[source_of(self.file)][name], ABSENT)
        return None if value is ABSENT else value

    def set(self, name: str, value) -> None:
        self.fields[FIELD_NAMES[source_of(self.file)][name]] = value


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary name, then rename: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def json_line(record: Record) -> bytes:
    if record.raw is not None:
        return record.raw
    obj = {k: v for k, v in record.fields.items() if v is not ABSENT}
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def write_jsonl(path: Path, records: list[Record], bom: bool) -> list[int]:
    """Write one JSON object per line; return each record's 1-based line number."""
    lines = [json_line(r) for r in records]
    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + b"\n"
    write_atomic(path, data)
    return list(range(1, len(records) + 1))


def csv_row(record: Record) -> str:
    """One CSV record as text (CRLF-terminated); a malformed record is already raw text."""
    if record.raw is not None:
        return record.raw.decode("utf-8") + "\r\n"
    buf = io.StringIO()
    values = ["" if record.fields.get(h) in (None, ABSENT) else record.fields[h] for h in CSV_HEADER]
    csv.writer(buf, lineterminator="\r\n").writerow(values)
    return buf.getvalue()


def write_csv(path: Path, records: list[Record]) -> list[int]:
    """Write the GBK CSV (header on line 1); return each record's first physical line."""
    header = io.StringIO()
    csv.writer(header, lineterminator="\r\n").writerow(CSV_HEADER)
    parts, starts, line = [header.getvalue()], [], 2
    for record in records:
        text = csv_row(record)
        starts.append(line)
        line += text.count("\n")
        parts.append(text)
    write_atomic(path, "".join(parts).encode(CSV_ENCODING))  # strict: a non-GBK character is a bug
    return starts


def have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(path: Path, records: list[Record]) -> list[int]:
    """Write the report requests with pyarrow (imported here: generate.py itself is stdlib-only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {c: [None if r.fields.get(c) is ABSENT else r.fields.get(c) for r in records] for c in PARQUET_COLUMNS}
    table = pa.table({c: pa.array(v, type=pa.string()) for c, v in columns.items()})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)
    return list(range(len(records)))
