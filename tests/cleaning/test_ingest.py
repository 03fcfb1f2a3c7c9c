"""Ingest: every bad-input case ends in the quarantine with its reason slug, and counts reconcile."""

from __future__ import annotations

import codecs
import json

import polars as pl
import pytest

from rlvrflow.cleaning import IngestError, SourceSpec, ingest

FIELDS = {"id": "ticket", "question": "q", "reference": "a", "category": "type"}


def run(tmp_path, name, fmt="jsonl", **kw):
    spec = SourceSpec(name="s", path=name, format=fmt, fields=kw.pop("fields", FIELDS), **kw)
    result = ingest([spec], "retail", tmp_path)
    st = result.stats
    assert st["rows_in"] == st["rows_kept"] + st["rows_rejected"] == result.kept.height + result.rejects.height
    return result


def jl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


GOOD = {"ticket": "T1", "q": "What is 2+2?", "a": "4", "type": "arithmetic"}


def reasons(result) -> dict[str, str]:
    return dict(zip(result.rejects["source"].to_list(), result.rejects["reason"].to_list()))


def test_good_rows_map_fields_and_keep_provenance(tmp_path, write):
    write("t.jsonl", jl(GOOD, {**GOOD, "ticket": 7, "a": 4}))
    r = run(tmp_path, "t.jsonl")
    assert r.kept.columns == ["id", "domain", "category", "question", "reference", "solution", "source"]
    assert r.kept.row(0) == ("T1", "retail", "arithmetic", "What is 2+2?", "4", "", "t.jsonl:1")
    assert r.kept.row(1)[0] == "7" and r.kept.row(1)[4] == "4"  # non-strings kept as JSON text


def test_malformed_json_line(tmp_path, write):
    write("t.jsonl", jl(GOOD, '{"q": "broken', "[1, 2]", GOOD))
    r = run(tmp_path, "t.jsonl")
    assert reasons(r) == {"t.jsonl:2": "malformed_json", "t.jsonl:3": "malformed_json"}
    assert r.kept["source"].to_list() == ["t.jsonl:1", "t.jsonl:4"]
    assert "not JSON" in r.rejects["detail"][0] and '{"q": "broken' in r.rejects["raw"][0]


@pytest.mark.parametrize("field, value", [("q", None), ("a", None), ("a", "   ")])
def test_missing_required_field(tmp_path, write, field, value):
    bad = {k: v for k, v in GOOD.items() if k != field} if value is None else {**GOOD, field: value}
    write("t.jsonl", jl(bad))
    r = run(tmp_path, "t.jsonl")
    slug = {"q": "question", "a": "reference"}[field]
    assert reasons(r) == {"t.jsonl:1": f"missing_field:{slug}"}
    assert repr(field) in r.rejects["detail"][0]  # names the source column


def test_missing_category_uses_default_or_is_rejected(tmp_path, write):
    write("t.jsonl", jl({k: v for k, v in GOOD.items() if k != "type"}))
    assert reasons(run(tmp_path, "t.jsonl")) == {"t.jsonl:1": "missing_field:category"}
    r = run(tmp_path, "t.jsonl", defaults={"category": "arithmetic"})
    assert r.kept["category"].to_list() == ["arithmetic"]


def test_oversized_row(tmp_path, write):
    write("t.jsonl", jl(GOOD, {**GOOD, "q": "x" * 5000}))
    r = run(tmp_path, "t.jsonl", max_row_bytes=1000)
    assert reasons(r) == {"t.jsonl:2": "oversized_row"} and "max_row_bytes=1000" in r.rejects["detail"][0]


def test_binary_junk_line_and_value(tmp_path, write):
    write(
        "t.jsonl",
        jl(GOOD).encode()
        + b"\x00\x01\x02\x89PNG\xff\xfe\x00junk\n"
        + jl({**GOOD, "q": "a\u0000b\u0001c\u0002d\u0003"}).encode()
        + jl(GOOD).encode(),
    )
    r = run(tmp_path, "t.jsonl")
    assert reasons(r) == {"t.jsonl:2": "binary_junk", "t.jsonl:3": "binary_junk"}
    assert r.kept.height == 2


@pytest.mark.parametrize(
    "line",
    [
        b'{"ticket": "B1", "q": "What is 2+2?", "a": "4\\u0007", "type": "arithmetic"}',  # escaped BEL, short field
        b'{"ticket": "B1", "q": "What is 2+2?\x07", "a": "4", "type": "arithmetic"}',  # raw BEL inside a string
        b'{"ticket": "B1", "q": "\\u001b[31mWhat\\u001b[0m is 2+2?", "a": "4\\u0000", "type": "arithmetic"}',
    ],
)
def test_a_stray_control_character_keeps_the_row(tmp_path, write, line):
    write("t.jsonl", line + b"\n")
    r = run(tmp_path, "t.jsonl")
    assert r.rejects.height == 0 and r.kept.height == 1
    from rlvrflow.cleaning import CleaningConfig, clean_stage

    cleaned = clean_stage(r.kept, CleaningConfig(), "retail").kept
    assert cleaned.select("question", "reference").row(0) == ("What is 2+2?", "4")


def test_a_short_csv_line_with_one_bel_is_text(tmp_path, write):
    write("t.csv", "q,a,type\nHow many?,4\x07,x\n")
    r = run(tmp_path, "t.csv", fmt="csv", fields={"question": "q", "reference": "a", "category": "type"})
    assert r.rejects.height == 0 and r.kept["reference"].to_list() == ["4\x07"]


def test_undecodable_file_is_one_reject(tmp_path, write):
    write("t.jsonl", "café au lait\nnaïve\n".encode("latin-1") * 3)
    r = run(tmp_path, "t.jsonl")
    assert reasons(r) == {"t.jsonl": "undecodable_file"} and r.kept.height == 0
    assert "encoding" in r.rejects["detail"][0]
    assert r.stats["files"][0]["encoding"] == "undecodable"


def test_explicit_encoding_reads_what_auto_refuses(tmp_path, write):
    write("t.jsonl", jl({**GOOD, "q": "Combien coûte un café ?"}).encode("latin-1"))
    r = run(tmp_path, "t.jsonl", encoding="latin-1")
    assert r.kept["question"].to_list() == ["Combien coûte un café ?"]


def test_undecodable_line_in_a_utf8_file(tmp_path, write):
    write("t.jsonl", jl(GOOD, {**GOOD, "q": "你好"}).encode() + '{"q": "你好"}\n'.encode("gbk") + jl(GOOD).encode())
    r = run(tmp_path, "t.jsonl")
    assert reasons(r) == {"t.jsonl:3": "undecodable_line"} and r.kept.height == 3


def test_gbk_file_is_detected_and_decoded(tmp_path, write):
    row = {"ticket": "G1", "q": "订单１２３退了几件商品？", "a": "２", "type": "arithmetic"}
    write("t.jsonl", jl(row, {**row, "ticket": "G2"}).encode("gbk"))
    r = run(tmp_path, "t.jsonl")
    assert r.rejects.height == 0 and r.kept["question"].to_list() == ["订单１２３退了几件商品？"] * 2
    assert r.stats["files"][0]["encoding"] == "gb18030"


def test_utf8_bom_and_utf16_files(tmp_path, write):
    write("bom.jsonl", codecs.BOM_UTF8 + jl(GOOD).encode())
    write("u16.jsonl", jl(GOOD).encode("utf-16"))
    for name, enc in [("bom.jsonl", "utf-8-sig"), ("u16.jsonl", "utf-16")]:
        r = run(tmp_path, name)
        assert r.kept["question"].to_list() == ["What is 2+2?"], name  # no BOM glued to the text
        assert r.stats["files"][0]["encoding"] == enc


def test_csv_with_bad_row_quoted_newlines_and_gbk(tmp_path, write):
    text = (
        "单号,问题,答案,类型\n"
        'C1,"多少钱，一共？",5,arithmetic\n'
        "C2,too,many,fields,here\n"
        'C3,"第一行\n第二行",7,arithmetic\n'
        "\n"
        "C4,,9,arithmetic\n"
    )
    write("t.csv", text.encode("gbk"))
    fields = {"id": "单号", "question": "问题", "reference": "答案", "category": "类型"}
    r = run(tmp_path, "t.csv", fmt="csv", fields=fields)
    assert reasons(r) == {"t.csv:3": "malformed_csv_row", "t.csv:7": "missing_field:question"}
    assert r.kept["source"].to_list() == ["t.csv:2", "t.csv:4"]
    assert r.kept["question"].to_list() == ["多少钱，一共？", "第一行\n第二行"]
    assert r.stats["blank_lines"] == 1


def test_csv_unterminated_quote_is_rejected_not_lost(tmp_path, write):
    write("t.csv", 'q,a,type\nok,1,x\n"never closed,2,x\n')
    r = run(tmp_path, "t.csv", fmt="csv", fields={"question": "q", "reference": "a", "category": "type"})
    assert r.kept.height == 1 and r.rejects["reason"].to_list() == ["malformed_csv_row"]


def test_parquet_source(tmp_path):
    pl.DataFrame(
        {"ticket": ["P1", "P2"], "q": ["How many orders?", None], "a": ["SELECT 1", "SELECT 2"]}
    ).write_parquet(tmp_path / "r.parquet")
    r = run(tmp_path, "r.parquet", fmt="parquet", defaults={"category": "sql"})
    assert r.kept["id"].to_list() == ["P1"] and r.kept["source"].to_list() == ["r.parquet:row 0"]
    assert reasons(r) == {"r.parquet:row 1": "missing_field:question"}


def test_hf_disk_source_with_splits(tmp_path):
    import datasets  # a core dependency: a missing one fails the test

    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"q": ["What is 1+1?", "What is 2+3?"], "a": [2, 5]}),
            "test": datasets.Dataset.from_dict({"q": ["What is 3+3?"], "a": [6]}),
        }
    )
    dd.save_to_disk(str(tmp_path / "hf"))
    fields = {"question": "q", "reference": "a"}
    r = run(tmp_path, "hf", fmt="hf_disk", fields=fields, defaults={"category": "arithmetic"})
    assert sorted(r.kept["source"].to_list()) == ["hf[test]:row 0", "hf[train]:row 0", "hf[train]:row 1"]
    assert sorted(r.kept["reference"].to_list()) == ["2", "5", "6"]
    only = run(tmp_path, "hf", fmt="hf_disk", fields=fields, defaults={"category": "arithmetic"}, split="test")
    assert only.kept.height == 1


def test_a_path_matching_nothing_is_a_spec_error(tmp_path):
    with pytest.raises(IngestError, match="matches nothing"):
        run(tmp_path, "nope/*.jsonl")


def test_blank_lines_are_counted_not_rows(tmp_path, write):
    write("t.jsonl", jl(GOOD) + "\n   \n" + jl(GOOD))
    r = run(tmp_path, "t.jsonl")
    assert r.kept.height == 2 and r.stats["blank_lines"] == 2
