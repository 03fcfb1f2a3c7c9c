"""rlvrflow.io: atomic writes leave the old file or the new one, and JSON lines read back as written."""

import json

import pytest

from rlvrflow import io


def test_a_write_replaces_the_whole_file_and_leaves_no_temporary_file(tmp_path):
    p = tmp_path / "deep" / "report.json"
    io.write_text(p, "old")
    io.write_json(p, {"new": 1, "名": "值"})
    assert json.loads(p.read_text(encoding="utf-8")) == {"new": 1, "名": "值"}
    assert "值" in p.read_text(encoding="utf-8")  # non-ASCII kept as is
    assert [x.name for x in p.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_previous_content_and_removes_its_temporary_file(tmp_path, monkeypatch):
    p = tmp_path / "a.txt"
    io.write_text(p, "good")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(io.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        io.write_text(p, "half")
    assert p.read_text() == "good"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]


def test_a_writer_that_raises_leaves_nothing_behind(tmp_path):
    def half(tmp):
        tmp.write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        io.atomic_write(tmp_path / "t.parquet", half)
    assert list(tmp_path.iterdir()) == []


def test_json_lines_round_trip_text_that_splitlines_would_cut(tmp_path):
    p = tmp_path / "m.jsonl"
    texts = ["a\u2028b", "c\x85d", "e\rf"]
    for text in texts:
        io.append_jsonl(p, {"text": text})
    assert [r["text"] for r in io.read_jsonl(p)] == texts
    assert io.read_jsonl(p, limit=2) == [{"text": t} for t in texts[:2]]


def test_a_bad_line_names_the_file_and_line_and_a_missing_file_is_an_error_unless_allowed(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1}\n\n{"step": 2\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"metrics.jsonl:3 is not valid JSON .*partial last line"):
        io.read_jsonl(p)
    with pytest.raises(FileNotFoundError):
        io.read_jsonl(tmp_path / "none.jsonl")
    assert io.read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []


def test_written_files_get_the_umask_mode_like_any_other_file(tmp_path):
    """Readers running as another user (a dashboard, a Prefect worker) can read what a run wrote."""
    import os

    old = os.umask(0o022)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        io.write_text(tmp_path / "a.txt", "x")
        io.write_json(tmp_path / "b.json", {})
    finally:
        os.umask(old)
    want = plain.stat().st_mode & 0o777
    assert want == 0o644
    assert {(tmp_path / n).stat().st_mode & 0o777 for n in ("a.txt", "b.json")} == {want}
