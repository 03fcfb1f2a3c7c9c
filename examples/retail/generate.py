"""Generates the retail sample domain's raw logs: realistic, messy, and deterministic by seed.

    python examples/retail/generate.py --out examples/retail/raw --seed 0 [--rows 5000] [--worked-fraction 0.06]

Writes three ticket JSONL files, a GBK-encoded ERP CSV and a Parquet file of SQL report requests
(see rawfiles.py for their layouts), builds shop.db beside this script (build_db.py), and writes
`manifest.json`: every file, every category count, each kind of injected messiness with its count,
and where each row that a cleaner must reject sits (file, line, reason), so tests can check a
pipeline's reject counts against it. Rows given personal data list it (`pii`: kind, field, text;
totals in `pii_by_kind`), and rows given near misses list what must survive scrubbing (`kept`).
`--rows` is the number of raw records written before the tool-call rows (tasks_tools.py), which
come on top (TOOL_CALL_RATE of it) from a random stream of their own, so every other line is what
it was before they existed; about 80% of the clean rows are short arithmetic in English and
Chinese, built from a few shared skills (see tasks_math.py). The agent console's multi-step
tickets (tasks_episodes.py, MULTI_STEP_RATE of --rows) go to a file of their own, agent_console.jsonl,
from a random stream of their own, after everything else: the other files are what they were without
them, and the manifest counts them under `multi_step`, apart from `clean_rows`. `--worked-fraction` (default 0.06) of the
rows carry the agent's worked reply; every row carries its gold outcome. Stdlib only, except the Parquet file, which is skipped (and noted in
the manifest) when pyarrow is missing.

    python examples/retail/generate.py --out examples/retail/raw --seed 0 --day 1 [--day-rows 200]

`--day N` writes one more day's ticket log into a folder that holds the sample, for a nightly
retraining run (days.py; `--rename-field` and `--shift-answers` make a broken and a shifted day).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import re
import sys
import time
from array import array
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import build_db  # noqa: E402
import inject  # noqa: E402
import rawfiles as rf  # noqa: E402
import tasks_math  # noqa: E402
import tasks_episodes  # noqa: E402
import tasks_other  # noqa: E402
import tasks_tools  # noqa: E402
from catalog import CUSTOMERS_EN, STORES  # noqa: E402
from tasks_sql import SqlTasks  # noqa: E402

# SQL and code stay few: their replies are ~10x longer than a math reply, so in a token-mean SFT
# loss even 5% of rows weigh as much as a third of the math rows; with tool calls they are the
# too-hard tier the tiny model shows, so a few of each is enough
CATEGORY_WEIGHTS = {
    "arithmetic": 0.29,
    "discount": 0.19,
    "order_total": 0.19,
    "unit_conversion": 0.15,
    "policy_choice": 0.07,
    "sql": 0.03,
    "code": 0.03,
    "reply_format": 0.05,
}
MATH = ("arithmetic", "discount", "order_total", "unit_conversion")
# Share of rows whose log has the agent's worked reply (the SFT target), the same in every category:
# a desk records the outcome of every ticket (the refund, the total, the chosen option, the query's
# result) but a written-out reply for a minority. The rest are outcome-only rows: SFT cannot learn
# from them, RL with a verifier can (`--worked-fraction`; the manifest records it).
WORKED_FRACTION = 0.06
# tool-call rows (support-desk actions), as a fraction of --rows, written on top of them into the
# ticket files; January and February log the action in call syntax, March's export as JSON. A few
# of them are exported twice (exact duplicates, as a fraction of the tool-call rows).
TOOL_CALL_RATE = 0.03
TOOL_CALL_DUPLICATE_RATE = 0.04
JSON_ACTIONS_FILE = rf.TICKET_FILES[2]
# the agent console's multi-step tickets (tasks_episodes.py), as a fraction of --rows
MULTI_STEP_RATE = 0.02
# fixable noise, as a fraction of --rows; each hits a disjoint set of clean rows
NOISE_RATES = {"mojibake": 0.03, "fullwidth": 0.05, "special_tokens": 0.04, "zero_width": 0.03, "latex": 0.03}
# rows a cleaner must reject, as a fraction of --rows (at least one of each)
REJECT_RATES = {
    "exact_duplicate": 0.04,
    "near_duplicate": 0.03,
    "malformed_json": 0.008,
    "malformed_csv": 0.002,
    "missing_question": 0.008,
    "missing_reference": 0.008,
}
FIXED_REJECTS = {"oversized_row": 2, "binary_junk": 1}
# personal data a cleaner with `cleaning.pii` on must replace (`pii`: phones, e-mails, resident IDs,
# bank cards, IPs in the question, and in a reply_format row's reply too), and near misses it must
# keep (`pii_near_miss`: order numbers, amounts, IDs and cards failing their checksums); as a
# fraction of --rows, on clean rows that carry no other noise
PII_RATES = {"pii": 0.02, "pii_near_miss": 0.02}
PII_KINDS = ("phone", "email", "id_number", "bank_card", "ip_address")
# the reject reasons a correct cleaner may give each injected kind (a retyped question is an exact
# duplicate once spacing, case and the final mark are normalized away, else a near one); a missing
# field may be absent, null, empty or blank: the manifest records each one's `form`
EXPECTED_REASONS = {
    "exact_duplicate": ["duplicate_exact"],
    "near_duplicate": ["duplicate_exact", "duplicate_near"],
    "malformed_json": ["malformed_json"],
    "malformed_csv": ["malformed_csv_row"],
    "missing_question": ["missing_field:question"],
    "missing_reference": ["missing_field:reference"],
    "oversized_row": ["oversized_row"],
    "binary_junk": ["binary_junk"],
}


def quotas(weights: dict[str, float], n: int) -> dict[str, int]:
    """Split n by weights, largest remainder first, so the parts always sum to n."""
    raw = {k: w * n for k, w in weights.items()}
    out = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (out[k] - raw[k], k))[: n - sum(out.values())]:
        out[k] += 1
    return out


NEAR = 0.8  # below the spec's dedup threshold (0.85), so only injected duplicates look alike


def _shingles(text: str, n: int = 5) -> frozenset[str]:
    return frozenset(text[i : i + n] for i in range(max(1, len(text) - n + 1)))


class NearIndex:
    """Answers `any(J(s, o) >= NEAR for o in sets)` exactly without comparing s to every set: an o
    with J >= NEAR shares at least need = ceil(NEAR * |s|) of s's shingles, so it holds one of any
    |s| - need + 1 of them; only the sets holding s's rarest shingles so far are compared. Linear in
    practice where a scan of the whole group was quadratic (templated questions share most
    shingles). Shingles are stored as ids in arrays (a frozenset of strings per row cost ~10 KB),
    and a group gets its inverted index only once it has INDEX_AT sets: most groups (questions
    with the same numbers) hold one or two, and a scan of those is cheap."""

    INDEX_AT = 32

    def __init__(self, ids: dict[str, int]) -> None:
        self.ids = ids  # shingle -> id, shared by all groups
        self.sets: list[array] = []
        self.postings: dict[int, array] | None = None

    def _ids(self, shingles: frozenset[str]) -> frozenset[int]:
        return frozenset(self.ids.setdefault(t, len(self.ids)) for t in shingles)

    def _candidates(self, s: frozenset[int]):
        if self.postings is None:
            yield from range(len(self.sets))
            return
        keep = len(s) - math.ceil(NEAR * len(s)) + 1
        compared: set[int] = set()
        for postings in sorted((self.postings.get(t, ()) for t in s), key=len)[:keep]:
            for k in postings:
                if k not in compared:
                    compared.add(k)
                    yield k

    def any_near(self, shingles: frozenset[str]) -> bool:
        s = self._ids(shingles)
        for k in self._candidates(s):
            other = frozenset(self.sets[k])
            if len(s & other) >= NEAR * len(s | other):
                return True
        return False

    def _index(self, k: int, s) -> None:
        for t in s:
            self.postings.setdefault(t, array("I")).append(k)

    def add(self, shingles: frozenset[str]) -> None:
        s = self._ids(shingles)
        self.sets.append(array("I", s))
        if self.postings is not None:
            self._index(len(self.sets) - 1, s)
        elif len(self.sets) >= self.INDEX_AT:
            self.postings = {}
            for k, members in enumerate(self.sets):
                self._index(k, members)


class Drawer:
    """Draws tasks whose questions are all different: no two equal after lowercasing and dropping
    punctuation, and no two with the same numbers whose character 5-grams overlap NEAR or more
    (what a near-duplicate filter would flag), so the manifest's clean rows all survive dedup."""

    def __init__(self, rng: random.Random, db_path: Path):
        self.rng = rng
        self.generators = {
            **tasks_math.GENERATORS,
            **tasks_other.GENERATORS,
            **tasks_tools.GENERATORS,
            "sql": SqlTasks(db_path),
        }
        self.seen: set[str] = set()
        self.by_numbers: dict[tuple[str, ...], NearIndex] = {}
        self.shingle_ids: dict[str, int] = {}
        self.exhausted: set[str] = set()

    def _is_new(self, question: str) -> bool:
        key = re.sub(r"\W+", "", question.lower())
        if key in self.seen:
            return False
        squeezed = re.sub(r"\s+", "", question.lower())
        shingles = _shingles(squeezed)
        group = self.by_numbers.setdefault(
            tuple(re.findall(r"[0-9]+(?:\.[0-9]+)?", squeezed)), NearIndex(self.shingle_ids)
        )
        if group.any_near(shingles):
            return False
        self.seen.add(key)
        group.add(shingles)
        return True

    def draw(self, category: str, lang: str, rng: random.Random | None = None) -> tasks_math.Task | None:
        """A new task (drawn with `rng`, else the drawer's own), or None once the category's pool
        is used up at this size."""
        if category in self.exhausted:
            return None
        for _ in range(100):
            task = self.generators[category](rng or self.rng, lang)
            if self._is_new(task.question):
                return task
        self.exhausted.add(category)
        return None


def file_for(category: str, rng: random.Random) -> str:
    if category == "sql":
        return rf.PARQUET_FILE
    if category == "order_total" or (category == "discount" and rng.random() < 0.5):
        return rf.CSV_FILE
    return rng.choices(rf.TICKET_FILES, weights=[0.3, 0.35, 0.35])[0]


def lang_for(file: str, rng: random.Random) -> str:
    return "zh" if rng.random() < (0.85 if file == rf.CSV_FILE else 0.5) else "en"


class RecordMaker:
    """Turns a Task into a Record with the target system's field names and side columns."""

    def __init__(self, rng: random.Random, worked_fraction: float = WORKED_FRACTION):
        self.rng = rng
        self.counter = 0
        self.worked_fraction = worked_fraction

    def next_id(self, file: str) -> str:
        self.counter += 1
        source = rf.source_of(file)
        if source == "tickets":
            return f"T26{file[13:15]}-{self.counter:05d}"
        return f"ERP{202600000 + self.counter}" if source == "erp" else f"RPT-{self.counter:05d}"

    def make(self, task: tasks_math.Task, file: str) -> rf.Record:
        rng, source = self.rng, rf.source_of(file)
        row_id = self.next_id(file)
        month = int(file[13:15]) if source == "tickets" else rng.randint(1, 3)
        stamp = f"2026-{month:02d}-{rng.randint(1, 28):02d}T{rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}:00+08:00"
        keep = rng.random() < self.worked_fraction
        solution = task.solution if keep else None
        if source == "tickets":
            fields = {
                "ticket_id": row_id,
                "created_at": stamp,
                "channel": rng.choice(["email", "chat", "phone", "chat"]),
                "lang": task.lang,
                "type": task.category,
                "body": task.question,
                "answer": task.answer,
                "reply": solution if keep else rng.choice([None, rf.ABSENT]),
                "agent": f"agent_{rng.randint(1, 12):02d}",
            }
        elif source == "erp":
            fields = {
                "单号": row_id,
                "下单日期": stamp[:10],
                "门店": rng.choice(STORES)[3] + "店",
                "业务类型": task.category,
                "问题描述": task.question,
                "标准答案": task.answer,
                "客服回复": solution or "",
            }
        else:
            fields = {
                "request_id": row_id,
                "requested_by": rng.choice(CUSTOMERS_EN),
                "created_at": stamp,
                "request_text": task.question,
                "gold_sql": task.answer,
                "analyst_sql": solution,
            }
        return rf.Record(file, fields, category=task.category, lang=task.lang)


class _Slots:
    """A file's rows as its shuffled originals with a gap before each (and one at the end) holding
    inserted rows: where an original sits and where an index falls in O(log n) (a Fenwick tree
    over the gaps' sizes), where a list scan and insert made placing duplicates quadratic."""

    def __init__(self, originals: list[rf.Record]) -> None:
        self.originals, self.gaps = originals, [[] for _ in range(len(originals) + 1)]
        self.tree = [0] * (len(self.gaps) + 1)
        self.size = len(originals)

    def _grow(self, gap: int) -> None:
        i = gap + 1
        while i < len(self.tree):
            self.tree[i] += 1
            i += i & -i

    def _inserted_through(self, gap: int) -> int:
        i, total = gap + 1, 0
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total

    def index_of(self, k: int) -> int:
        """The current index of original k."""
        return k + self._inserted_through(k)

    def insert(self, at: int, record: rf.Record) -> None:
        """list.insert(at, record) on the rows as they stand."""
        lo, hi = 0, len(self.originals)  # the first original at or after `at`, else the end gap
        while lo < hi:
            mid = (lo + hi) // 2
            if self.index_of(mid) >= at:
                hi = mid
            else:
                lo = mid + 1
        start = lo + (self._inserted_through(lo - 1) if lo else 0)  # index of the gap's first row
        self.gaps[lo].insert(at - start, record)
        self._grow(lo)
        self.size += 1

    def rows(self) -> list[rf.Record]:
        out = []
        for gap, original in zip(self.gaps, self.originals):
            out += gap
            out.append(original)
        return out + self.gaps[-1]


def order_files(records: list[rf.Record], rng: random.Random) -> dict[str, list[rf.Record]]:
    """inject.order_files's result and random draws (each file shuffled, each duplicate put at a
    random place after its original), in O(n log n)."""
    by_file: dict[str, list[rf.Record]] = {}
    for record in records:
        if record.origin is None:
            by_file.setdefault(record.file, []).append(record)
    for name in sorted(by_file):
        rng.shuffle(by_file[name])
    slots = {name: _Slots(rows) for name, rows in by_file.items()}
    where = {id(r): (name, k) for name, rows in by_file.items() for k, r in enumerate(rows)}
    for record in records:
        if record.origin is None:
            continue
        file = slots.setdefault(record.file, _Slots([]))
        name, k = where.get(id(record.origin), (None, -1))
        at = file.index_of(k) if name == record.file else -1  # an original in another file: anywhere
        file.insert(rng.randint(at + 1, file.size), record)
    return dict(sorted((name, s.rows()) for name, s in slots.items()))


def draw_base(drawer: Drawer, maker: RecordMaker, n: int, files: set[str]) -> list[rf.Record]:
    """The clean rows: categories by CATEGORY_WEIGHTS; an exhausted pool falls back to arithmetic."""
    records, rng = [], drawer.rng
    for category, count in quotas(CATEGORY_WEIGHTS, n).items():
        for _ in range(count):
            cat, file = category, file_for(category, rng)
            if file not in files:  # no pyarrow: the report requests cannot be written
                cat, file = "arithmetic", rng.choice(rf.TICKET_FILES)
            task = drawer.draw(cat, lang_for(file, rng))
            if task is None:
                file = rng.choice(rf.TICKET_FILES)
                task = drawer.draw("arithmetic", lang_for(file, rng))
            if task is None:
                raise RuntimeError(f"{n} rows: the task templates ran out of distinct questions; use fewer rows")
            records.append(maker.make(task, file))
    return records


def _digits(rng: random.Random, n: int) -> str:
    return "".join(str(rng.randrange(10)) for _ in range(n))


def _luhn_digit(body: str) -> str:
    """The check digit that makes body + digit pass Luhn."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (1 if i % 2 else 2)
        total += d - 9 if d > 9 else d
    return str(-total % 10)


def _id_check(body: str) -> str:
    """GB 11643 check character of the first 17 digits of a resident ID (ISO 7064 mod 11-2)."""
    return "10X98765432"[sum(int(d) * (2 ** (17 - i) % 11) for i, d in enumerate(body)) % 11]


def _mobile(rng: random.Random) -> str:
    return "1" + rng.choice("3456789") + _digits(rng, 9)


def pii_value(kind: str, rng: random.Random) -> str:
    """One made-up piece of personal data of `kind`, written the ways Chinese support logs write it."""
    if kind == "phone":
        m, area = _mobile(rng), rng.choice(["10", "21", "755", "571"])
        local = f"{rng.randint(2, 8)}{_digits(rng, 7 if len(area) == 2 else rng.choice([6, 7]))}"
        return rng.choice(
            [
                m,
                f"{m[:3]}-{m[3:7]}-{m[7:]}",
                f"+86 {m[:3]} {m[3:7]} {m[7:]}",
                f"0{area}-{local}",
                f"+1 415-555-{_digits(rng, 4)}",
                f"+44 20 7946 {_digits(rng, 4)}",
            ]
        )
    if kind == "email":
        return (
            f"{rng.choice(['lin.wei', 'zhang_min', 'a.chen', 'wang88'])}{rng.randint(1, 99)}"
            f"@{rng.choice(['example.com', 'mail.example.cn', 'qq.com', '163.com'])}"
        )
    if kind == "id_number":
        body = (
            rng.choice(["110101", "310104", "440305", "330106", "510107"])
            + f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
            + _digits(rng, 3)
        )
        return body + _id_check(body)
    if kind == "bank_card":
        card = "6222" + _digits(rng, 11)
        card += _luhn_digit(card)
        return card if rng.random() < 0.5 else " ".join(card[i : i + 4] for i in range(0, 16, 4))
    return f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


PII_SENTENCES = {
    "en": {
        "phone": " My phone is {}.",
        "email": " Please email me at {}.",
        "id_number": " My ID number is {}.",
        "bank_card": " I paid with card {}.",
        "ip_address": " I ordered from IP {}.",
    },
    "zh": {
        "phone": "我的电话是{}。",
        "email": "邮箱{}。",
        "id_number": "身份证号{}。",
        "bank_card": "付款卡号{}。",
        "ip_address": "下单IP {}。",
    },
}


def near_miss(rng: random.Random, lang: str) -> tuple[str, str]:
    """(sentence, the part of it a PII scrubber must keep): an order number shaped like a mobile
    behind a letter prefix or an order label, an 11-digit id no mobile starts with, an amount with
    separators, an ID whose check character is wrong, or a card number failing Luhn."""
    style = rng.randrange(5)
    if style == 0:
        keep = f"SO{_mobile(rng)}" if lang == "en" else f"订单号{_mobile(rng)}"
    elif style == 1:
        keep = "1" + rng.choice("012") + _digits(rng, 9)
    elif style == 2:
        keep = (
            f"￥{rng.randint(10_000, 999_999):,}"
            if lang == "zh"
            else f"{rng.randint(1_000_000, 9_999_999):,}.{rng.randint(0, 99):02d}"
        )
    elif style == 3:
        body = "110101" + f"{rng.randint(1950, 2005)}0{rng.randint(1, 9)}1{rng.randint(0, 9)}" + _digits(rng, 3)
        keep = body + rng.choice([c for c in "0123456789X" if c != _id_check(body)])
    else:
        body = "6222" + _digits(rng, 11)
        keep = body + str((int(_luhn_digit(body)) + rng.randint(1, 9)) % 10)
    text = {"en": [" Ref {}.", " Order ref {}.", " Paid {} so far."], "zh": ["参考号{}。", "备注{}。", "记录{}。"]}[
        lang
    ]
    return rng.choice(text).format(keep), keep


def apply_pii(base: list[rf.Record], counts: dict[str, int], rng: random.Random) -> dict[int, dict]:
    """Put personal data (or near misses) into rows without other noise; returns, per record id,
    what the manifest says about it: `pii` [{kind, field, text}] or `kept` [{field, text}]."""
    details: dict[int, dict] = {}
    for kind, n in counts.items():
        free = [r for r in base if not r.noise]
        for record in rng.sample(free, min(n, len(free))):
            question = record.get("question")
            if kind == "pii_near_miss":
                sentence, keep = near_miss(rng, record.lang)
                record.set("question", question + sentence)
                details[id(record)] = {"kept": [{"field": "question", "text": keep}]}
            else:
                found = []
                for pii_kind in rng.sample(PII_KINDS, rng.randint(1, 2)):
                    value = pii_value(pii_kind, rng)
                    question += PII_SENTENCES[record.lang][pii_kind].format(value)
                    found.append({"kind": pii_kind, "field": "question", "text": value})
                record.set("question", question)
                if record.category == "reply_format" and record.get("solution"):
                    value = pii_value("phone", rng)
                    record.set("solution", record.get("solution") + PII_SENTENCES[record.lang]["phone"].format(value))
                    found.append({"kind": "phone", "field": "solution", "text": value})
                details[id(record)] = {"pii": found}
            record.noise.append(kind)
    return details


def add_tool_calls(
    by_file: dict[str, list[rf.Record]],
    drawer: Drawer,
    first_id: int,
    n: int,
    rng: random.Random,
    worked_fraction: float = WORKED_FRACTION,
) -> list[rf.Record]:
    """Insert n tool-call rows at random lines of the ticket files, and a few exact duplicates of
    them after their originals; every draw comes from `rng`, so the other rows keep their bytes and
    order. Returns the records added."""
    maker = RecordMaker(rng, worked_fraction)
    maker.counter = first_id  # ids continue after the other rows'
    added = []
    for _ in range(n):
        file = rng.choices(rf.TICKET_FILES, weights=[0.3, 0.35, 0.35])[0]
        task = drawer.draw("tool_call", lang_for(file, rng), rng)
        if task is None:
            raise RuntimeError(f"{n} tool-call rows: the templates ran out of distinct questions")
        if file == JSON_ACTIONS_FILE:
            task = dataclasses.replace(task, answer=tasks_tools.as_json(task.answer))
        record = maker.make(task, file)
        rows = by_file[file]
        rows.insert(rng.randint(0, len(rows)), record)
        added.append(record)
    for original in rng.sample(added, max(1, round(TOOL_CALL_DUPLICATE_RATE * n)) if n else 0):
        twin = dataclasses.replace(
            original, fields=dict(original.fields), noise=[], kind="exact_duplicate", origin=original
        )
        rows = by_file[original.file]
        at = next(i for i, r in enumerate(rows) if r is original)
        rows.insert(rng.randint(at + 1, len(rows)), twin)
        added.append(twin)
    return added


def _counts(rates: dict[str, float], rows: int) -> dict[str, int]:
    return {k: max(1, round(r * rows)) for k, r in rates.items()}


def _where(file: str, position: int) -> dict:
    """Manifest pointer: 1-based physical line for JSONL/CSV, 0-based row for Parquet."""
    if file == rf.PARQUET_FILE:
        return {"file": file, "row": position, "source": f"{file}:row {position}"}
    return {"file": file, "line": position, "source": f"{file}:{position}"}


def write_files(out: Path, by_file: dict[str, list[rf.Record]]) -> dict[str, list[int]]:
    positions = {}
    for name, records in by_file.items():
        if name == rf.CSV_FILE:
            positions[name] = rf.write_csv(out / name, records)
        elif name == rf.PARQUET_FILE:
            positions[name] = rf.write_parquet(out / name, records)
        else:
            positions[name] = rf.write_jsonl(out / name, records, bom=name == rf.BOM_FILE)
    return positions


def _file_info(name: str, records: list[rf.Record]) -> dict:
    fmt = {"jsonl": "jsonl", "csv": "csv", "parquet": "parquet"}[name.rsplit(".", 1)[1]]
    by_cat: dict[str, int] = {}
    by_lang: dict[str, int] = {}
    for r in records:
        if r.kind == "clean":
            by_cat[r.category] = by_cat.get(r.category, 0) + 1
            by_lang[r.lang] = by_lang.get(r.lang, 0) + 1
    return {
        "format": fmt,
        "encoding": rf.CSV_ENCODING if name == rf.CSV_FILE else "utf-8",
        "bom": name == rf.BOM_FILE,
        "fields": rf.FIELD_NAMES[rf.source_of(name)],
        "records": len(records),
        "clean_rows": sum(by_cat.values()),
        "by_category": dict(sorted(by_cat.items())),
        "by_lang": dict(sorted(by_lang.items())),
    }


def build_manifest(
    seed: int,
    rows: int,
    by_file: dict,
    positions: dict,
    noise_applied: dict,
    db_path: Path,
    skipped: dict,
    pii: dict[int, dict],
    tools: list[rf.Record],
) -> dict:
    rejects, noisy, by_cat, worked, injected = [], [], {}, {}, dict(noise_applied)
    pii_by_kind = dict.fromkeys(PII_KINDS, 0)
    where = {id(r): _where(name, pos) for name, records in by_file.items() for r, pos in zip(records, positions[name])}
    for name, records in by_file.items():
        for record, pos in zip(records, positions[name]):
            if record.kind != "clean":
                injected[record.kind] = injected.get(record.kind, 0) + 1
                entry = {**_where(name, pos), "kind": record.kind, "reasons": EXPECTED_REASONS[record.kind]}
                if record.origin is not None:
                    entry["duplicate_of"] = where[id(record.origin)]["source"]
                if record.noise:  # how a missing field is missing: absent, null, empty or blank
                    entry["form"] = record.noise[0]
                rejects.append(entry)
            else:
                by_cat[record.category] = by_cat.get(record.category, 0) + 1
                if record.get("solution") not in (None, "", rf.ABSENT):
                    worked[record.category] = worked.get(record.category, 0) + 1
                if record.noise:
                    noisy.append({**_where(name, pos), "kinds": record.noise, **pii.get(id(record), {})})
                for found in pii.get(id(record), {}).get("pii", []):
                    pii_by_kind[found["kind"]] += 1
    clean = sum(by_cat.values())
    return {
        "generator": "examples/retail/generate.py",
        "seed": seed,
        "rows_requested": rows,
        "records_total": sum(len(r) for r in by_file.values()),
        "tool_call": {
            "records": len(tools),
            "reference_forms": {
                "call": sum(r.kind == "clean" and r.file != JSON_ACTIONS_FILE for r in tools),
                "json": sum(r.kind == "clean" and r.file == JSON_ACTIONS_FILE for r in tools),
            },
        },
        "clean_rows": clean,
        "clean_by_category": dict(sorted(by_cat.items())),
        "worked_by_category": dict(sorted(worked.items())),
        "math_share": round(sum(by_cat.get(c, 0) for c in MATH) / max(clean, 1), 3),
        "files": {name: _file_info(name, recs) for name, recs in by_file.items()},
        "skipped_files": skipped,
        "injected": injected,
        "expected_reasons": EXPECTED_REASONS,
        "rejects": rejects,
        "noisy_rows": noisy,
        "pii_by_kind": pii_by_kind,
        "database": {"path": db_path.name, "tables": build_db.table_counts(db_path)},
    }


def generate(
    out: Path, seed: int = 0, rows: int = 5000, db_path: Path | None = None, worked_fraction: float = WORKED_FRACTION
) -> dict:
    """Write the raw files and manifest.json under `out` (and shop.db); return the manifest."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db_path = build_db.build(db_path or HERE / "shop.db")
    files = set(rf.TICKET_FILES) | {rf.CSV_FILE}
    skipped = {}
    if rf.have_pyarrow():
        files.add(rf.PARQUET_FILE)
    else:
        skipped[rf.PARQUET_FILE] = "pyarrow is not installed: pip install pyarrow"
    rng = random.Random(f"retail:{seed}")
    drawer, maker = Drawer(rng, db_path), RecordMaker(rng, worked_fraction)
    reject_counts = {**_counts(REJECT_RATES, rows), **FIXED_REJECTS}
    base = draw_base(drawer, maker, rows - sum(reject_counts.values()), files)
    noise_applied = inject.apply_noise(base, _counts(NOISE_RATES, rows), rng)

    categories_in: dict[str, list[str]] = {}  # file -> its base rows' categories, in order

    def fresh(file: str, category: str | None) -> rf.Record:
        """A new row for `file` (arithmetic, in a ticket file if need be, once a pool runs dry)."""
        if category is None and file not in categories_in:
            categories_in[file] = [r.category for r in base if r.file == file]
        cat = category or rng.choice(categories_in[file])
        task = drawer.draw(cat, lang_for(file, rng))
        if task is None:
            file = rng.choice(rf.TICKET_FILES) if file == rf.PARQUET_FILE else file
            task = drawer.draw("arithmetic", lang_for(file, rng))
        if task is None:
            raise RuntimeError(f"--rows {rows}: the task templates ran out of distinct questions; use fewer rows")
        return maker.make(task, file)

    extras = inject.add_rejects(base, fresh, maker.next_id, reject_counts, rng, files)
    # personal data last, with its own rng, so every other draw is what it was without it; rows
    # that a duplicate copies are left alone (the copy would no longer be exact)
    copied = {id(r.origin) for r in extras if r.origin is not None}
    pii_counts = _counts(PII_RATES, rows)
    pii = apply_pii([r for r in base if id(r) not in copied], pii_counts, random.Random(f"retail-pii:{seed}"))
    noise_applied.update({k: sum(k in r.noise for r in base) for k in pii_counts})
    by_file = order_files(base + extras, rng)
    tools = add_tool_calls(
        by_file,
        drawer,
        maker.counter,
        round(TOOL_CALL_RATE * rows),
        random.Random(f"retail-tools:{seed}"),
        worked_fraction,
    )
    positions = write_files(out, by_file)
    manifest = build_manifest(seed, rows, by_file, positions, noise_applied, db_path, skipped, pii, tools)
    manifest["worked_fraction"] = worked_fraction
    manifest["multi_step"] = write_multi_step(
        out, db_path, round(MULTI_STEP_RATE * rows), random.Random(f"retail-multi-step:{seed}"), worked_fraction
    )
    rf.write_atomic(out / "manifest.json", (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return manifest


def write_multi_step(out: Path, db_path: Path, n: int, rng: random.Random, worked_fraction: float) -> dict:
    """agent_console.jsonl: the multi-step tickets, outcome-only but for a few worked transcripts."""
    records = tasks_episodes.rows(db_path, n, rng, worked_fraction)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    rf.write_atomic(out / tasks_episodes.FILE, text.encode("utf-8"))
    kinds: dict[str, int] = {}
    for r in records:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    return {
        "file": tasks_episodes.FILE,
        "rows": len(records),
        "by_kind": dict(sorted(kinds.items())),
        "worked": sum(r["transcript"] is not None for r in records),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "raw", help="folder for the raw files")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default 0)")
    parser.add_argument(
        "--rows",
        type=int,
        default=5000,
        help="raw records to write before the tool-call rows, which add 3%% (default 5000)",
    )
    parser.add_argument("--db", type=Path, default=HERE / "shop.db", help="where to build shop.db")
    parser.add_argument(
        "--worked-fraction",
        type=float,
        default=WORKED_FRACTION,
        help=f"share of rows logged with the agent's worked reply (default {WORKED_FRACTION}); "
        "the rest carry only their outcome",
    )
    parser.add_argument(
        "--day",
        type=int,
        help="write day N's ticket log into --out, beside the sample "
        "generated there with the same --seed (days.py), instead of the sample",
    )
    parser.add_argument("--day-rows", type=int, default=200, help="rows in the day's log (default 200)")
    parser.add_argument(
        "--rename-field",
        metavar="FIELD=NEW",
        help="with --day: log a ticket field under another name, a broken field mapping",
    )
    parser.add_argument(
        "--shift-answers",
        type=float,
        metavar="FACTOR",
        help="with --day: multiply the math answers by FACTOR, as if logged in another unit",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.worked_fraction <= 1:
        parser.error(f"--worked-fraction {args.worked_fraction}: a share between 0 and 1")
    if args.day is not None:
        return write_day(parser, args)
    if args.rename_field or args.shift_answers is not None:
        parser.error("--rename-field and --shift-answers change a day's log: add --day N")
    if args.rows < 100:
        parser.error(f"--rows {args.rows}: need at least 100 so every kind of messiness fits")
    start = time.perf_counter()
    manifest = generate(args.out, args.seed, args.rows, args.db, args.worked_fraction)
    print(
        f"wrote {manifest['records_total']} records ({manifest['clean_rows']} clean) in "
        f"{len(manifest['files'])} files to {args.out} in {time.perf_counter() - start:.1f}s"
    )
    return 0


def write_day(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import days

    if args.day_rows < 20:
        parser.error(f"--day-rows {args.day_rows}: need at least 20 so every category has a row")
    try:
        rename = days.parse_rename(args.rename_field) if args.rename_field else None
        entry = days.generate_day(
            args.out, args.day, args.seed, args.day_rows, args.db, args.worked_fraction, rename, args.shift_answers
        )
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        parser.error(str(exc))
    print(f"wrote day {args.day}: {entry['rows']} rows to {args.out / entry['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
