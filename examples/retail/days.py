"""One more day's ticket log for the retail sample: what a nightly retraining run finds in the source glob.

    python examples/retail/generate.py --out examples/retail/raw --seed 0 --day 1 [--day-rows 200]
    python examples/retail/generate.py --out examples/retail/raw --seed 0 --day 2 --rename-field answer=resolution
    python examples/retail/generate.py --out examples/retail/raw --seed 0 --day 3 --shift-answers 100

Day N writes `tickets_2026-04-DD.jsonl` (day 1 is 1 April 2026, the day after the sample's quarter),
which the spec's `raw/tickets_2026-*.jsonl` glob picks up beside the sample's files: the help desk's
export format and fields, every category in the sample's mix (CATEGORY_WEIGHTS, tool calls on top at
TOOL_CALL_RATE, as many of them in the March export's JSON form as in the sample), clean rows only. Ids are
`T260401-0001`, ... (the day's date in them, so no two days share one, nor the sample's `T2601-00001`),
and no question repeats one already in the folder's files. Same seed, same day and the same files
already there (the sample, then days 1 .. N-1): same bytes.

Two options make the nights a retraining run must refuse:
- `--rename-field answer=resolution`: the export logs a field under another name (a broken field
  mapping): every row of the day loses its reference at ingest.
- `--shift-answers 100`: each numeric answer of the math categories multiplied by 100, as if logged
  in another unit (fen for yuan); the questions are unchanged, so the answers are wrong.
Each day is recorded in manifest.json under `days`.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import random
import re
from pathlib import Path

import build_db
import rawfiles as rf
import tasks_tools
from generate import CATEGORY_WEIGHTS, MATH, TOOL_CALL_RATE, Drawer, RecordMaker, lang_for, quotas

FIRST_DAY = dt.date(2026, 4, 1)
TICKET_FIELDS = tuple(dict.fromkeys([*rf.FIELD_NAMES["tickets"].values(), "created_at", "channel", "lang", "agent"]))


def day_file(day: int) -> str:
    return f"tickets_{FIRST_DAY + dt.timedelta(days=day - 1)}.jsonl"


class DayRecordMaker(RecordMaker):
    """RecordMaker for one day's file: ids and timestamps carry the day's date."""

    def __init__(self, rng: random.Random, worked_fraction: float, date: dt.date):
        super().__init__(rng, worked_fraction)
        self.date = date

    def next_id(self, file: str) -> str:
        self.counter += 1
        return f"T{self.date:%y%m%d}-{self.counter:04d}"

    def make(self, task, file: str) -> rf.Record:
        record = super().make(task, file)
        hour, minute = self.rng.randint(8, 21), self.rng.randint(0, 59)
        record.fields["created_at"] = f"{self.date}T{hour:02d}:{minute:02d}:00+08:00"
        return record


def _jsonl_questions(path: Path):
    for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # the sample's malformed lines
        if isinstance(row, dict) and isinstance(row.get("body"), str):
            yield row["body"]


def known_questions(folder: Path) -> list[str]:
    """The questions already in the folder's files (the sample's and earlier days'), in a fixed order."""
    found: list[str] = []
    for path in sorted(folder.glob("*.jsonl")):
        found += _jsonl_questions(path)
    if (folder / rf.CSV_FILE).is_file():
        text = (folder / rf.CSV_FILE).read_bytes().decode(rf.CSV_ENCODING, errors="replace")
        found += [row.get("问题描述") or "" for row in csv.DictReader(io.StringIO(text))]
    if (folder / rf.PARQUET_FILE).is_file() and rf.have_pyarrow():
        import pyarrow.parquet as pq

        found += [
            q for q in pq.read_table(folder / rf.PARQUET_FILE, columns=["request_text"]).column(0).to_pylist() if q
        ]
    return found


def shifted(answer: str, factor: float) -> str:
    """A numeric answer times `factor` ('12.5' x 100 -> '1250'); anything else as it is."""
    if not re.fullmatch(r"-?\d+(\.\d+)?", answer.strip()):
        return answer
    value = round(float(answer) * factor, 6)
    return str(int(value)) if value == int(value) else f"{value:g}"


def parse_rename(text: str) -> tuple[str, str]:
    """'answer=resolution' -> ('answer', 'resolution'), checked against the ticket export's fields."""
    old, sep, new = text.partition("=")
    if not sep or not old or not new:
        raise ValueError(f"--rename-field {text!r}: write FIELD=NEW_NAME, e.g. answer=resolution")
    if old not in TICKET_FIELDS:
        raise ValueError(f"--rename-field {text!r}: {old!r} is not a ticket field; one of {', '.join(TICKET_FIELDS)}")
    if new in TICKET_FIELDS:
        raise ValueError(f"--rename-field {text!r}: {new!r} is already a ticket field; pick a new name")
    return old, new


def generate_day(
    out: Path,
    day: int,
    seed: int = 0,
    rows: int = 200,
    db_path: Path | None = None,
    worked_fraction: float = 0.06,
    rename: tuple[str, str] | None = None,
    shift: float | None = None,
) -> dict:
    """Write day `day`'s ticket file into `out` (beside the sample) and record it in manifest.json;
    returns the day's entry."""
    if day < 1:
        raise ValueError(f"--day {day}: days count from 1")
    out = Path(out)
    if not (out / "manifest.json").is_file():
        raise FileNotFoundError(f"{out / 'manifest.json'}: generate the sample there first (without --day)")
    name, date = day_file(day), FIRST_DAY + dt.timedelta(days=day - 1)
    rng = random.Random(f"retail-day:{seed}:{day}")
    drawer = Drawer(rng, build_db.build(db_path or Path(__file__).resolve().parent / "shop.db"))
    for question in known_questions(out):
        drawer._is_new(question)  # marks it seen: the day's questions are all new
    maker = DayRecordMaker(rng, worked_fraction, date)
    wanted = [c for c, n in quotas(CATEGORY_WEIGHTS, rows).items() for _ in range(n)]
    tools = round(TOOL_CALL_RATE * rows)
    forms = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["tool_call"]["reference_forms"]
    as_json = set(rng.sample(range(tools), round(tools * forms["json"] / max(sum(forms.values()), 1))))
    records = []
    for i, category in enumerate(wanted + ["tool_call"] * tools):
        lang = lang_for(name, rng)
        task = drawer.draw(category, lang) or drawer.draw("arithmetic", lang)
        if task is None:
            raise RuntimeError(f"day {day}: the task templates ran out of distinct questions; use fewer --day-rows")
        if task.category == "tool_call" and i - len(wanted) in as_json:
            task = dataclasses.replace(task, answer=tasks_tools.as_json(task.answer))
        if shift is not None and task.category in MATH:
            task = dataclasses.replace(task, answer=shifted(task.answer, shift))
        record = maker.make(task, name)
        if rename:
            record.fields[rename[1]] = record.fields.pop(rename[0], rf.ABSENT)
        records.append(record)
    rng.shuffle(records)
    rf.write_jsonl(out / name, records, bom=False)
    by_cat: dict[str, int] = {}
    for r in records:
        by_cat[r.category] = by_cat.get(r.category, 0) + 1
    entry = {
        "file": name,
        "seed": seed,
        "rows": len(records),
        "by_category": dict(sorted(by_cat.items())),
        "renamed_field": "=".join(rename) if rename else None,
        "shifted_answers": shift,
    }
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest.setdefault("days", {})[str(day)] = entry
    rf.write_atomic(out / "manifest.json", (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return entry
