"""The streaming path gives what the in-memory path gives: the same kept rows in the same order, the
same rejects with the same reasons and details, the same counts; and linestream reads files as
decode_file does."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from rlvrflow.cleaning import CleaningConfig, SourceSpec, ValidationConfig
from rlvrflow.cleaning.decode import Undecodable, decode_file
from rlvrflow.cleaning.linestream import stream_lines
from rlvrflow.cleaning.prepare import prepare_in_memory
from rlvrflow.cleaning.stream import prepare_stream

VALIDATION = ValidationConfig(categories=["arithmetic", "policy"], max_rejected_fraction=0.5)


def _compare(a: Path, b: Path) -> None:
    assert_frame_equal(pl.read_parquet(a / "clean.parquet"), pl.read_parquet(b / "clean.parquet"))
    key = ["stage", "source", "reason", "detail"]
    ra, rb = pl.read_parquet(a / "rejects.parquet"), pl.read_parquet(b / "rejects.parquet")
    assert ra.columns == rb.columns
    assert_frame_equal(ra.sort(key), rb.sort(key))
    for stage in ("ingest", "clean", "dedup", "validate"):
        assert_frame_equal(
            pl.read_parquet(a / "stages" / f"{stage}.parquet"), pl.read_parquet(b / "stages" / f"{stage}.parquet")
        )
    sa, sb = (json.loads((p / "stats.json").read_text()) for p in (a, b))
    for s in (sa, sb):
        s.pop("seconds")
        for st in s["stages"].values():
            st.pop("seconds")
    assert sa == sb


@pytest.mark.parametrize("chunk_rows", [4, 7, 1000])
def test_streaming_equals_in_memory_on_toy_files(tmp_path, toy_sources, chunk_rows):
    sources = toy_sources
    cleaning = CleaningConfig(chunk_rows=chunk_rows, dedup={"shards": 3})
    mem = prepare_in_memory(sources, cleaning, VALIDATION, "toy", tmp_path, tmp_path / "mem")
    streamed = prepare_stream(sources, cleaning, VALIDATION, "toy", tmp_path, tmp_path / "stream")
    _compare(tmp_path / "mem", tmp_path / "stream")
    reasons = set(mem.rejects["reason"].to_list())
    assert {
        "duplicate_exact",
        "duplicate_near",
        "duplicate_id",
        "malformed_json",
        "malformed_csv_row",
        "missing_field:question",
        "binary_junk",
        "undecodable_line",
        "bad_category",
        "question_too_short",
        "empty_question",
    } <= reasons
    assert streamed.stats["rows_in"] == streamed.stats["rows_kept"] + streamed.stats["rows_rejected"]
    assert not (tmp_path / "stream" / "_parts").exists()


@pytest.mark.slow
def test_streaming_equals_in_memory_on_the_sample_domain(tmp_path, retail_domain):
    spec, folder, _ = retail_domain
    sources = [SourceSpec.model_validate(s) for s in spec["sources"]]
    cleaning = CleaningConfig.model_validate({**spec.get("cleaning", {}), "chunk_rows": 700})
    validation = ValidationConfig.model_validate(spec.get("validation", {}))
    prepare_in_memory(sources, cleaning, validation, spec["domain"], folder, tmp_path / "mem")
    prepare_stream(sources, cleaning, validation, spec["domain"], folder, tmp_path / "stream")
    _compare(tmp_path / "mem", tmp_path / "stream")


BLOBS = {
    "utf8": "a\n你好\r\n\nlast".encode(),
    "bom": b"\xef\xbb\xbfx\ny\n",
    "gbk": "第一行\n第二行，价格12元\n".encode("gbk"),
    "junk_lines": b"ok\n\x00\x01\x02\x03\x04\x05\nfine\n",
    "mostly_junk": b"\x00\x01\x02\x03\x04\x05\n\x00\x01\x02\x03\x04\x05\nok\n",
    "bad_utf8_line": b"good line\nbad \xff\xfe line\nanother\nand more\n",
    "latin1": "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1") * 3,
    "empty": b"",
    "no_newline_end": b"one\ntwo",
}


@pytest.mark.parametrize("name", sorted(BLOBS))
@pytest.mark.parametrize("encoding", ["auto", "utf-8", "gb18030", "latin-1"])
def test_stream_lines_reads_like_decode_file(tmp_path, name, encoding):
    path = tmp_path / name
    path.write_bytes(BLOBS[name])
    try:
        want = decode_file(BLOBS[name], encoding)
    except Undecodable as exc:
        with pytest.raises(Undecodable) as got:
            _, lines = stream_lines(path, encoding)
            list(lines)
        assert str(got.value) == str(exc)
        return
    used, lines = stream_lines(path, encoding)
    assert (used, list(lines)) == (want.encoding, want.lines)


def test_near_duplicate_chains_resolve_as_in_memory(tmp_path, write):
    """b resembles a and c resembles b: the in-memory index never holds a rejected row, so whether c
    goes depends on a alone; the greedy pass over the on-disk pairs must decide the same."""
    import random

    rng = random.Random(3)
    words = "please tell me how many days a customer has to return the blue kettle bought in our store".split()
    lines = []
    for base in range(8):
        text = words[:]
        text[2] = f"store{base}x"
        for step in range(7):
            text[rng.randrange(3, len(text))] += "s"  # each variant one letter from the last
            lines.append(
                json.dumps(
                    {"id": f"r{base}-{step}", "question": " ".join(text) + "?", "reference": "30", "category": "policy"}
                )
            )
    rng.shuffle(lines)
    write("raw/chains.jsonl", "\n".join(lines) + "\n")
    sources = [SourceSpec(name="t", path="raw/chains.jsonl", format="jsonl")]
    cleaning = CleaningConfig(chunk_rows=7, dedup={"shards": 5})
    validation = ValidationConfig(max_rejected_fraction=1.0)
    mem = prepare_in_memory(sources, cleaning, validation, "toy", tmp_path, tmp_path / "mem")
    prepare_stream(sources, cleaning, validation, "toy", tmp_path, tmp_path / "stream")
    _compare(tmp_path / "mem", tmp_path / "stream")
    assert mem.stats["rejected_by_reason"].get("duplicate_near", 0) >= 10


def test_progress_bars_draw_on_a_terminal_only(monkeypatch):
    import io
    import sys

    from rlvrflow.cleaning.chunks import bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, drawn in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        with bar(True, total=3, desc="ingest x.jsonl", unit="row") as shown:
            shown.update(3)
        assert ("ingest x.jsonl" in stream.getvalue() and "3/3" in stream.getvalue()) is drawn
        with bar(False, total=3, desc="quiet") as shown:
            shown.update(3)
        assert "quiet" not in stream.getvalue()


def test_empty_sources_fail_validation_as_the_in_memory_path_does(tmp_path):
    """No records at all: too_few_rows from validation on both paths, not a crash in writing the parts."""
    from rlvrflow.cleaning import CleaningConfig, SourceSpec, ValidationConfig
    from rlvrflow.cleaning.prepare import prepare_in_memory
    from rlvrflow.cleaning.stream import prepare_stream
    from rlvrflow.cleaning.validate import ValidationFailed

    for i, fn in enumerate((prepare_stream, prepare_in_memory)):
        d = tmp_path / str(i)
        (d / "raw").mkdir(parents=True)
        (d / "raw" / "a.jsonl").write_text("")
        with pytest.raises(ValidationFailed, match="too_few_rows"):
            fn(
                [SourceSpec(name="s", path="raw/*.jsonl", format="jsonl")],
                CleaningConfig(),
                ValidationConfig(categories=["x"]),
                "toy",
                d,
                d / "out",
            )
