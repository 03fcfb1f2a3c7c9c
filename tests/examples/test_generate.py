"""The retail generator: deterministic bytes, a manifest that tells the truth about every injected
row, the promised file formats and encodings, references in the verifiers' contract formats, and
tool-call rows that leave every other line as it was."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from fractions import Fraction

import pytest

from rlvrflow.flows.spec import load_spec
from rlvrflow.verifiers import verify
from rlvrflow.verifiers.function_call import check_reference
from rlvrflow.verifiers.reply import check_reference as reply_check

ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
TOKENS = ("<s>", "</s>", "<|im_start|>", "<|im_end|>", "[SEP]", "[CLS]", "<|endoftext|>", "<pad>")
FIELDS = {  # row field -> column, per file kind (as spec.yaml maps them)
    "jsonl": {"question": "body", "reference": "answer", "solution": "reply", "category": "type"},
    "csv": {"question": "问题描述", "reference": "标准答案", "solution": "客服回复", "category": "业务类型"},
    "parquet": {"question": "request_text", "reference": "gold_sql", "solution": "analyst_sql"},
}


def _jsonl_lines(path) -> list[bytes]:
    data = path.read_bytes()
    return data.removeprefix(b"\xef\xbb\xbf").split(b"\n")[:-1]


def _csv_records(path) -> dict[int, list[str]]:
    """first physical line -> fields (header excluded)."""
    reader = csv.reader(io.StringIO(path.read_bytes().decode("gbk"), newline=""))
    next(reader)
    out, start = {}, reader.line_num + 1
    for fields in reader:
        out[start] = fields
        start = reader.line_num + 1
    return out


def _raw(generated, name: str) -> dict:
    """position (line or row) -> raw record: bytes for JSONL, field list for CSV, dict for Parquet."""
    path = generated.out / name
    if name.endswith(".jsonl"):
        return dict(enumerate(_jsonl_lines(path), start=1))
    if name.endswith(".csv"):
        return _csv_records(path)
    import pyarrow.parquet as pq

    return dict(enumerate(pq.read_table(path).to_pylist()))


def _row(generated, entry: dict) -> dict | None:
    """The row an entry points at, as {question, reference, solution, category}; None if unreadable."""
    name = entry["file"]
    kind = name.rsplit(".", 1)[1]
    raw = _raw(generated, name)[entry.get("line", entry.get("row"))]
    if kind == "jsonl":
        raw = json.loads(raw.decode("utf-8"))
    elif kind == "csv":
        raw = dict(zip(["单号", "下单日期", "门店", "业务类型", "问题描述", "标准答案", "客服回复"], raw))
    return {f: raw.get(col) for f, col in FIELDS[kind].items()}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, generator_cli):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generator_cli(tmp_path / name, seed, 200)
    files = sorted(p.name for p in (tmp_path / "a").iterdir() if p.suffix != ".db")
    assert len(files) == 7  # three ticket JSONL, the agent console's JSONL, the CSV, the Parquet file, the manifest
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert any((tmp_path / "a" / n).read_bytes() != (tmp_path / "c" / n).read_bytes() for n in files)
    dumps = ["\n".join(sqlite3.connect(tmp_path / d / "shop.db").iterdump()) for d in ("a", "b")]
    assert dumps[0] == dumps[1]


def test_runs_on_the_bare_stdlib_and_skips_parquet_without_pyarrow(tmp_path, generator_cli):
    generator_cli(tmp_path, 0, 200, "-S", "-I")  # no site-packages: no pyarrow
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert "reports_2026q1.parquet" in manifest["skipped_files"]
    assert not (tmp_path / "reports_2026q1.parquet").exists()
    assert manifest["records_total"] == 200 + manifest["tool_call"]["records"]
    assert "sql" not in manifest["clean_by_category"]


def test_manifest_counts_add_up_and_match_the_files(generated, retail):
    m = generated.manifest
    assert (
        m["records_total"]
        == m["rows_requested"] + m["tool_call"]["records"]
        == sum(f["records"] for f in m["files"].values())
    )
    for name, info in m["files"].items():
        assert len(_raw(generated, name)) == info["records"], name
        assert sum(info["by_category"].values()) == info["clean_rows"]
    assert m["clean_rows"] + len(m["rejects"]) == m["records_total"]
    assert sum(m["clean_by_category"].values()) == m["clean_rows"]
    for kind, count in m["injected"].items():
        found = sum(r["kind"] == kind for r in m["rejects"]) + sum(kind in r["kinds"] for r in m["noisy_rows"])
        assert found == count > 0, kind
    assert m["math_share"] >= 0.6
    tools = m["clean_by_category"]["tool_call"]
    assert 0.02 <= tools / m["clean_rows"] <= 0.05
    # worked replies are the minority in every category: the rest are outcome-only rows
    worked = m["worked_by_category"]
    assert m["worked_fraction"] == retail.generate.WORKED_FRACTION == 0.06
    assert 0.03 <= sum(worked.values()) / m["clean_rows"] <= 0.09
    assert all(worked.get(c, 0) < n for c, n in m["clean_by_category"].items())
    assert (
        sum(m["tool_call"]["reference_forms"].values()) == tools and min(m["tool_call"]["reference_forms"].values()) > 0
    )
    assert m["database"]["tables"]["stores"] == 6 and m["database"]["tables"]["products"] == 30
    assert set(m["clean_by_category"]) == {
        "arithmetic",
        "discount",
        "order_total",
        "unit_conversion",
        "policy_choice",
        "sql",
        "code",
        "reply_format",
        "tool_call",
    }


def test_each_reject_is_the_damage_the_manifest_names(generated):
    seen = set()
    for entry in generated.manifest["rejects"]:
        kind, seen = entry["kind"], seen | {entry["kind"]}
        if kind == "binary_junk":
            raw = _raw(generated, entry["file"])[entry["line"]]
            with pytest.raises(UnicodeDecodeError):
                raw.decode("utf-8")
            continue
        if kind == "malformed_json":
            raw = _raw(generated, entry["file"])[entry["line"]].decode("utf-8")
            with pytest.raises(json.JSONDecodeError):
                json.loads(raw)
            continue
        if kind == "malformed_csv":
            assert len(_raw(generated, entry["file"])[entry["line"]]) > 7
            continue
        row = _row(generated, entry)
        if kind == "oversized_row":
            assert len(json.dumps(row, ensure_ascii=False).encode("utf-8")) > 65536
        elif kind.startswith("missing_"):
            value = row[kind.split("_")[1]]
            assert value is None or not value.strip(), entry
            assert entry["form"] in {"absent", "null", "empty", "blank"}
        else:
            original = _row(generated, {**entry, **_locate(entry["duplicate_of"])})
            same = row == original
            assert same if kind == "exact_duplicate" else (not same and row["reference"] == original["reference"])
    assert seen == {
        "binary_junk",
        "malformed_json",
        "malformed_csv",
        "oversized_row",
        "missing_question",
        "missing_reference",
        "exact_duplicate",
        "near_duplicate",
    }


def _locate(source: str) -> dict:
    name, pos = source.split(":", 1)
    return {"file": name, "row": int(pos[4:])} if pos.startswith("row ") else {"file": name, "line": int(pos)}


def test_each_noisy_row_carries_its_noise(generated):
    import ftfy

    for entry in generated.manifest["noisy_rows"]:
        row = _row(generated, entry)
        text = " ".join(v for v in row.values() if v)
        for kind in entry["kinds"]:
            if kind == "mojibake":
                fixed = ftfy.fix_text(row["question"])
                assert fixed != row["question"] and re.search("[\u4e00-\u9fff]", fixed), row["question"]
            elif kind == "fullwidth":
                assert re.search("[\uff01-\uff5e]", row["reference"]), row
            elif kind == "special_tokens":
                assert any(t in text for t in TOKENS), row
            elif kind == "zero_width":
                assert ZERO_WIDTH.search(row["question"]), row
            elif kind == "latex":
                assert "$" in row["reference"] or "\\" in row["reference"], row
            elif kind == "pii":
                assert entry["pii"] and all(f["text"] in row[f["field"]] for f in entry["pii"]), entry
            elif kind == "pii_near_miss":
                assert entry["kept"] and all(k["text"] in row[k["field"]] for k in entry["kept"]), entry


def test_injected_pii_is_what_a_scrubber_must_find_and_near_misses_are_not(retail):
    """Over many draws (not just the 400-row sample): each PII sentence holds exactly one match of
    its kind, with IDs and cards passing their checksums, and no near miss is PII."""
    import random

    import rlvrflow.cleaning.pii as pii

    gen, rng = retail.generate, random.Random(5)
    for _ in range(300):
        for kind in gen.PII_KINDS:
            lang = rng.choice(["en", "zh"])
            value = gen.pii_value(kind, rng)
            _, counts = pii.scrub_row({"question": gen.PII_SENTENCES[lang][kind].format(value)})
            assert counts == {kind: 1}, (kind, value)
        sentence, keep = gen.near_miss(rng, rng.choice(["en", "zh"]))
        assert keep in sentence and pii.scrub_row({"question": sentence}) == ({"question": sentence}, {}), sentence
    assert pii.id_number_valid(gen.pii_value("id_number", rng))
    assert pii.luhn_valid(gen.pii_value("bank_card", rng).replace(" ", ""))


def test_gbk_csv_is_gbk_not_utf8_and_bom_only_in_february(generated):
    data = (generated.out / "orders_export_gbk.csv").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    text = data.decode("gbk")
    assert text.startswith("单号,下单日期,门店,业务类型,问题描述,标准答案,客服回复\r\n")
    assert len(re.findall("[\u4e00-\u9fff]", text)) > 1000  # a Chinese ERP export
    boms = {p.name: p.read_bytes().startswith(b"\xef\xbb\xbf") for p in generated.out.glob("tickets_*.jsonl")}
    assert boms == {"tickets_2026-01.jsonl": False, "tickets_2026-02.jsonl": True, "tickets_2026-03.jsonl": False}


def _clean_rows(generated):
    """Every clean, noise-free row, read back from the files."""
    noisy = {e["source"] for e in generated.manifest["noisy_rows"]}
    bad = {e["source"] for e in generated.manifest["rejects"]}
    for name in generated.manifest["files"]:
        for pos in _raw(generated, name):
            entry = {"file": name, ("row" if name.endswith(".parquet") else "line"): pos}
            source = f"{name}:row {pos}" if name.endswith(".parquet") else f"{name}:{pos}"
            if source not in noisy | bad:
                row = _row(generated, entry)
                yield {**row, "category": row.get("category") or "sql", "file": name}


def test_clean_references_follow_the_verifiers_contract(generated, retail):
    db = sqlite3.connect(generated.out / "shop.db")
    spec = load_spec(retail.generate.HERE / "spec.yaml")
    tools = spec.verifiers.rule_for("tool_call").params
    reply = spec.verifiers.rule_for("reply_format").params
    seen, forms = set(), set()
    for row in _clean_rows(generated):
        cat, ref, sol = row["category"], row["reference"], row["solution"] or ""
        seen.add(cat)
        if cat in ("arithmetic", "discount", "order_total", "unit_conversion"):
            value = Fraction(ref)
            assert value >= 0 and len(ref) <= 6, ref
            if sol:
                assert re.search(r"(Answer|答案): (\S+)$", sol).group(2) == ref, sol
        elif cat == "policy_choice":
            assert ref in "ABCD" and all(f"({x})" in row["question"] for x in "ABCD")
        elif cat == "sql":
            assert db.execute(ref).fetchall(), ref
            assert not sol or sol.startswith("```sql\n")
        elif cat == "code":
            spec = json.loads(ref)
            assert spec["tests"].startswith("def check(candidate):") and spec["entry_point"]
            if sol:
                namespace: dict = {}
                exec(sol.removeprefix("```python\n").removesuffix("```"), namespace)  # noqa: S102
                exec(spec["tests"], namespace)  # noqa: S102
                namespace["check"](namespace[spec["entry_point"]])
        elif cat == "tool_call":
            assert check_reference(ref, tools) is None, ref
            in_json = row["file"] == retail.generate.JSON_ACTIONS_FILE
            assert ref.startswith("{") is in_json, (row["file"], ref)  # March's export logs JSON
            forms.add(in_json)
            if sol:
                assert sol.startswith("<tool_call>\n{") and verify("function_call", sol, ref, tools).correct, sol
        else:
            assert cat == "reply_format"
            assert reply_check(ref, reply) is None, ref  # the reference's own reply passes the spec's rule
            assert not sol or verify("reply", sol, ref, reply).correct, sol
    assert len(seen) == 9 and forms == {True, False}


def _lines_but_tool_calls(path) -> list[bytes]:
    def tool_call(line: bytes) -> bool:
        try:
            return json.loads(line.decode("utf-8")).get("type") == "tool_call"
        except ValueError:  # malformed JSON and binary junk are no tool-call rows
            return False

    return [line for line in _jsonl_lines(path) if not tool_call(line)]


def test_tool_call_rows_leave_every_other_line_as_it_was(retail, tmp_path, monkeypatch):
    """Tool-call rows have a random stream of their own and come on top of --rows: without them
    the same seed writes the same CSV and Parquet bytes, and the same JSONL lines in order."""
    with_tools = retail.generate.generate(tmp_path / "with", 3, 300, db_path=tmp_path / "with.db")
    monkeypatch.setattr(retail.generate, "TOOL_CALL_RATE", 0)
    without = retail.generate.generate(tmp_path / "without", 3, 300, db_path=tmp_path / "without.db")
    assert without["tool_call"]["records"] == 0 and "tool_call" not in without["clean_by_category"]
    assert with_tools["tool_call"]["records"] > 0
    assert with_tools["records_total"] == without["records_total"] + with_tools["tool_call"]["records"]
    for name in without["files"]:
        a, b = tmp_path / "with" / name, tmp_path / "without" / name
        if name.endswith(".jsonl"):
            assert _lines_but_tool_calls(a) == _jsonl_lines(b), name
        else:
            assert a.read_bytes() == b.read_bytes(), name


def test_near_index_answers_as_a_scan_of_the_whole_group(retail):
    """The generator's indexed near-duplicate check (linear) says what the scan it replaced said."""
    import random

    generate = retail.generate
    rng = random.Random(5)
    words = ["how", "many", "days", "return", "kettle", "store", "blue", "gift", "card", "refund"]
    ids: dict[str, int] = {}
    index, seen = generate.NearIndex(ids), []
    for _ in range(400):  # past INDEX_AT, so both the scan and the inverted index answer
        text = "".join(rng.sample(words, rng.randint(3, 8)))
        shingles = generate._shingles(text)
        want = any(len(shingles & o) >= generate.NEAR * len(shingles | o) for o in seen)
        assert index.any_near(shingles) == want
        if not want:
            index.add(shingles)
            seen.append(shingles)
    assert index.postings is not None and 40 < len(seen) < 400


def test_order_files_is_the_list_scan_it_replaced(retail):
    """generate.order_files (O(n log n)) places rows, and draws random numbers, as inject.order_files."""
    import copy
    import random

    generate, inject, rf = retail.generate, retail.inject, retail.rawfiles

    rng = random.Random(11)
    files = [*rf.TICKET_FILES, rf.CSV_FILE]
    records = [rf.Record(rng.choice(files), {"n": i}) for i in range(300)]
    for i in range(120):
        original = rng.choice(records[:300])
        dup = rf.Record(rng.choice([original.file, rng.choice(files)]), {"dup": i}, origin=original)
        records.append(dup)
    want_rng, got_rng = random.Random(2), random.Random(2)
    want = inject.order_files(copy.copy(records), want_rng)
    got = generate.order_files(copy.copy(records), got_rng)
    assert list(want) == list(got)
    for name in want:
        assert [id(r) for r in want[name]] == [id(r) for r in got[name]]
    assert want_rng.random() == got_rng.random()
