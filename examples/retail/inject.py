"""Puts the messiness into the retail records: fixable noise on clean rows, plus rows to reject.

`apply_noise` damages disjoint sets of clean rows (so each kind's count is exact and a test can
find them again); `add_rejects` builds the extra rows a cleaner must drop (duplicates, malformed
lines, missing fields, oversized rows, binary junk); `order_files` shuffles each file and places
every exact duplicate after the row it copies. All randomness comes from the caller's rng.
"""

from __future__ import annotations

import copy
import random

import noise
import rawfiles as rf

MATH = ("arithmetic", "discount", "order_total", "unit_conversion")
OVERSIZED_BYTES = 70_000  # spec.yaml sets max_row_bytes: 65536
GBK_UNSAFE = ("mojibake", "zero_width")  # their characters do not exist in GBK
VERBATIM = ("sql", "code", "reply_format", "tool_call")  # spec.yaml's cleaning.verbatim_categories


def _eligible(kind: str, record: rf.Record) -> bool:
    if record.file == rf.CSV_FILE and kind in GBK_UNSAFE:
        return False
    if kind == "mojibake":
        return not record.get("question").isascii()
    if kind == "fullwidth":
        return record.category in MATH + ("policy_choice",)
    if kind == "latex":
        return record.category in MATH
    return True


def _apply(kind: str, record: rf.Record, rng: random.Random) -> None:
    question, solution, reference = record.get("question"), record.get("solution"), record.get("reference")
    if kind == "mojibake":  # the whole row went through a wrong decode, reply included
        record.set("question", noise.mojibake(question))
        if solution:
            record.set("solution", noise.mojibake(solution))
    elif kind == "fullwidth":
        record.set("reference", noise.fullwidth(reference))
        if record.lang == "zh" and rng.random() < 0.5:
            record.set("question", noise.fullwidth(question, digits_only=True))
    elif kind == "special_tokens":  # never inside code or SQL: cleaners keep those verbatim
        if solution and rng.random() < 0.5 and record.category not in VERBATIM:
            record.set("solution", noise.special_tokens(solution, rng))
        else:
            record.set("question", noise.special_tokens(question, rng))
    elif kind == "zero_width":
        record.set("question", noise.zero_width(question, rng))
        if record.category in MATH and rng.random() < 0.3:
            record.set("reference", noise.zero_width(reference, rng, n=1))
    elif kind == "latex":
        record.set("reference", noise.latex(reference, rng))
    record.noise.append(kind)


def apply_noise(records: list[rf.Record], counts: dict[str, int], rng: random.Random) -> dict[str, int]:
    """Apply each kind to `counts[kind]` eligible rows, no row twice; return the counts applied."""
    used: set[int] = set()
    applied = {}
    for kind, n in counts.items():
        eligible = [i for i, r in enumerate(records) if i not in used and _eligible(kind, r)]
        chosen = rng.sample(eligible, min(n, len(eligible)))
        for i in chosen:
            _apply(kind, records[i], rng)
            used.add(i)
        applied[kind] = len(chosen)
    return applied


def _blank(record: rf.Record, name: str, rng: random.Random) -> None:
    """Lose a field the way each system loses it: key absent, null, empty or blank."""
    if record.file == rf.CSV_FILE:
        value = rng.choice(["", "  "])
    elif record.file == rf.PARQUET_FILE:
        value = rng.choice([None, ""])
    else:
        value = rng.choice([rf.ABSENT, None, "", "   "])
    record.set(name, value)
    record.noise.append(
        "absent" if value is rf.ABSENT else "null" if value is None else "empty" if value == "" else "blank"
    )


def _csv_broken(record: rf.Record, rng: random.Random) -> bytes:
    """An ERP row whose question has an unquoted ASCII comma: one field too many."""
    question = record.get("question").replace("，", ",").replace('"', "")
    if "," not in question:
        cut = question.find(" ") if " " in question else len(question) // 2
        question = question[:cut] + "," + question[cut:]
    values = [str(record.fields[h]) for h in rf.CSV_HEADER[:4]] + [question, record.get("reference"), ""]
    return ",".join(values).encode("utf-8")


def add_rejects(
    base: list[rf.Record], fresh, new_id, counts: dict[str, int], rng: random.Random, files: set[str]
) -> list[rf.Record]:
    """Rows a cleaner must reject. `fresh(file, category)` makes a new unique record;
    `new_id(file)` gives a copied record an id of its own."""
    out = []
    clean = [r for r in base if not r.noise]
    for kind, n in counts.items():
        for i in range(n):
            if kind in ("exact_duplicate", "near_duplicate"):
                original = rng.choice(clean)
                record = copy.deepcopy(original)
                record.origin = original
                if kind == "exact_duplicate":
                    if original.file in rf.TICKET_FILES[:2] and rng.random() < 0.3:
                        record.file = rf.TICKET_FILES[rf.TICKET_FILES.index(original.file) + 1]
                else:
                    record.set("id", new_id(record.file))
                    record.set("question", noise.near_duplicate(original.get("question"), rng))
            elif kind == "malformed_json":
                record = fresh(rng.choice(rf.TICKET_FILES), None)
                record.raw = noise.malformed_json(rf.json_line(record).decode("utf-8"), rng).encode("utf-8")
            elif kind == "malformed_csv":
                record = fresh(rf.CSV_FILE, None)
                record.raw = _csv_broken(record, rng)
            elif kind in ("missing_question", "missing_reference"):
                like = rng.choice(base)
                record = fresh(like.file, like.category)
                _blank(record, kind.split("_")[1], rng)
            elif kind == "oversized_row":
                record = fresh(rf.TICKET_FILES[2 * (i % 2)], "arithmetic")
                pasted = noise.oversized_body(rng, OVERSIZED_BYTES)
                record.set("question", record.get("question") + "\n\n" + pasted)
            else:  # binary_junk
                record = rf.Record(rf.TICKET_FILES[2], {}, raw=noise.binary_junk(rng))
            record.kind = kind
            out.append(record)
    return [r for r in out if r.file in files]


def order_files(records: list[rf.Record], rng: random.Random) -> dict[str, list[rf.Record]]:
    """Shuffle each file's rows, then put each duplicate somewhere after its original, so that
    a keep-the-first dedup keeps the original and rejects exactly the injected rows."""
    by_file: dict[str, list[rf.Record]] = {}
    for record in records:
        if record.origin is None:
            by_file.setdefault(record.file, []).append(record)
    for name in sorted(by_file):
        rng.shuffle(by_file[name])
    for record in records:
        if record.origin is None:
            continue
        rows = by_file.setdefault(record.file, [])
        at = next((i for i, r in enumerate(rows) if r is record.origin), -1)
        rows.insert(rng.randint(at + 1, len(rows)), record)
    return dict(sorted(by_file.items()))
