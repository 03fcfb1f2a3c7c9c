"""Files every layer writes and reads: atomic writes, JSON, Parquet and JSON lines, done one way.

A write goes to a temporary file beside its target, is flushed to disk, and is renamed over the
target (`os.replace`), so a reader or a rerun sees the old file or the new one, never half of one;
a failed write removes its temporary file. The temporary name starts with `.tmp-` (a checkpoint's
retention sweeps leftovers of a killed run by that prefix).

JSON lines are split on "\\n" only: a sample's text may hold U+2028 and the like, which JSON keeps
unescaped and `str.splitlines` would cut. A line that is not JSON is an error naming the file and
line, with the fix for the common cause (a run killed mid-write leaves a partial last line).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a fresh name that `write` creates, so the file gets the umask's mode (mkstemp's would be 0600)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")
    try:
        write(Path(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj: Any, *, indent: int = 2, sort_keys: bool = False) -> Path:
    """Pretty JSON (non-ASCII kept as is; values JSON has no type for written with `str`)."""
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False, default=str) + "\n"
    return write_text(path, text)


def write_parquet(path: str | Path, df) -> Path:
    """A polars frame as Parquet."""
    return atomic_write(path, lambda tmp: df.write_parquet(tmp))


def append_jsonl(path: str | Path, record: dict) -> None:
    """Append one JSON line, flushed, so a killed run keeps every line it finished."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()


def read_jsonl(path: str | Path, *, limit: int | None = None, missing_ok: bool = False) -> list[dict]:
    """The JSON lines of `path` (blank lines skipped), at most `limit` of them; [] for a missing file
    when `missing_ok`."""
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}:{number} is not valid JSON ({exc}); a run killed while writing leaves a "
                "partial last line: delete that line and rerun"
            ) from exc
        if limit is not None and len(rows) >= limit:
            break
    return rows
