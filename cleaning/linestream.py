"""Numbered text lines of a file read in a stream: `decode.decode_file`'s result without the whole file in memory.

    encoding, lines = stream_lines(path, "auto")   # lines: an iterator of decode.Line

`decode_file` decides the encoding on the whole file (is all of it UTF-8? is it GB18030 and
plausibly Chinese? how many lines are binary or undecodable?). Here a first pass over the file's
lines counts what those decisions need, a second pass yields the lines; both hold one line at a
time. The decisions and the lines are the same as `decode_file`'s (tests/cleaning/test_stream.py
compares them): for the codecs in LINE_SAFE a newline byte never sits inside a multi-byte
character, so decoding line by line equals decoding the whole file and splitting it. A file with
a UTF-16 byte-order mark, or a source whose `encoding` names another codec, is decoded whole
with `decode_file` (such files are rare and small in practice; the rows still go out in chunks).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .decode import MAX_BAD_LINE_SHARE, MIN_GB2312_SHARE, Line, Undecodable, _line, decode_file

__all__ = ["stream_lines", "LINE_SAFE"]

# ASCII-compatible codecs in which the byte 0x0A only ever means a newline
LINE_SAFE = frozenset({"utf-8", "gb18030", "gbk", "gb2312", "ascii", "latin-1", "iso8859-1", "cp1252"})


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes without the newline), as decode._split numbers them (no BOM strip)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            yield number, raw[:-1] if raw.endswith(b"\n") else raw


def _decodes(raw: bytes, encoding: str) -> str | None:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        return None


@dataclass
class _Tally:
    """What decode_file's decisions need about one way of reading the file."""

    all_decode: bool = True  # every line decodes (== the whole file decodes, for LINE_SAFE codecs)
    nonblank: int = 0
    bad: int = 0  # lines _line would reject (binary junk or undecodable)
    non_ascii: int = 0  # over the lines that were read: characters above ASCII ...
    common: int = 0  # ... and those in GB2312 (decode._plausible_chinese)

    def too_bad(self) -> bool:
        return bool(self.nonblank) and self.bad / self.nonblank > MAX_BAD_LINE_SHARE

    def plausible(self) -> bool:
        return not self.non_ascii or self.common / self.non_ascii >= MIN_GB2312_SHARE


def _chinese(tally: _Tally, text: str) -> None:
    for ch in text:
        if ord(ch) > 127:
            tally.non_ascii += 1
            try:
                ch.encode("gb2312")
                tally.common += 1
            except UnicodeEncodeError:
                pass


def _tally(path: Path, encoding: str, skip: int, transcode: bool, chinese: bool) -> _Tally:
    """Count lines as decode._by_line would read them: with `transcode`, the file decoded with
    `encoding` and re-encoded as UTF-8 (decode._whole); otherwise each raw line read with it."""
    t = _Tally()
    for number, raw in _raw_lines(path):
        raw = raw[skip:] if number == 1 else raw
        text = _decodes(raw, encoding)
        if text is None:
            t.all_decode = False
        line = _line(
            number, text.encode("utf-8") if transcode and text is not None else raw, "utf-8" if transcode else encoding
        )
        if raw.strip():
            t.nonblank += 1
            t.bad += line.text is None
        if chinese and line.text is not None:
            _chinese(t, line.text)
    return t


def _lines(path: Path, encoding: str, skip: int, transcode: bool) -> Iterator[Line]:
    for number, raw in _raw_lines(path):
        raw = raw[skip:] if number == 1 else raw
        if transcode:
            raw = raw.decode(encoding).encode("utf-8")
        yield _line(number, raw, "utf-8" if transcode else encoding)


def _whole_file(path: Path, encoding: str) -> tuple[str, Iterator[Line]]:
    decoded = decode_file(path.read_bytes(), encoding)
    return decoded.encoding, iter(decoded.lines)


def _bad_share(t: _Tally, encoding: str) -> str:
    return f"{t.bad} of {t.nonblank} lines are binary or not valid {encoding}"


def _explicit(path: Path, encoding: str) -> tuple[str, Iterator[Line]]:
    """decode_file with a named codec: the whole file in it (lines re-read as UTF-8), else line by line."""
    name = codecs.lookup(encoding).name
    skip = len(codecs.BOM_UTF8) if name == "utf-8" and _starts_with(path, codecs.BOM_UTF8) else 0
    whole = _tally(path, name, skip, name != "utf-8", False)
    if whole.all_decode:
        if whole.too_bad():
            raise Undecodable(_bad_share(whole, "utf-8"))
        return encoding, _lines(path, name, skip, name != "utf-8")
    t = _tally(path, name, skip, False, False)
    if t.too_bad():
        raise Undecodable(_bad_share(t, name))
    return name, _lines(path, name, skip, False)


def _starts_with(path: Path, prefix: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(prefix)) == prefix


def _auto(path: Path) -> tuple[str, Iterator[Line]]:
    bom = len(codecs.BOM_UTF8)
    if _starts_with(path, codecs.BOM_UTF8):
        t = _tally(path, "utf-8", bom, False, False)
        if t.too_bad():
            raise Undecodable(_bad_share(t, "utf-8"))
        return "utf-8-sig", _lines(path, "utf-8", bom, False)
    utf8 = _tally(path, "utf-8", 0, False, False)
    if utf8.all_decode:
        if utf8.too_bad():
            raise Undecodable(_bad_share(utf8, "utf-8"))
        return "utf-8", _lines(path, "utf-8", 0, False)
    gb = _tally(path, "gb18030", 0, True, True)
    if gb.all_decode:
        if gb.too_bad():
            raise Undecodable(_bad_share(gb, "utf-8"))  # decode._whole re-reads the text as UTF-8
        if gb.plausible():
            return "gb18030", _lines(path, "gb18030", 0, True)
    if not utf8.too_bad():
        return "utf-8", _lines(path, "utf-8", 0, False)
    by_gb = _tally(path, "gb18030", 0, False, True)
    if by_gb.too_bad():
        raise Undecodable(f"neither UTF-8 ({_bad_share(utf8, 'utf-8')}) nor GB18030")
    if not by_gb.plausible():
        raise Undecodable("not UTF-8, and as GB18030 it is not Chinese text")
    return "gb18030", _lines(path, "gb18030", 0, False)


def stream_lines(path: str | Path, encoding: str = "auto") -> tuple[str, Iterator[Line]]:
    """(encoding used, the file's lines); raises `Undecodable` exactly when decode_file would."""
    path = Path(path)
    if encoding != "auto":
        if codecs.lookup(encoding).name not in LINE_SAFE:
            return _whole_file(path, encoding)
        return _explicit(path, encoding)
    if _starts_with(path, codecs.BOM_UTF16_LE) or _starts_with(path, codecs.BOM_UTF16_BE):
        return _whole_file(path, encoding)
    return _auto(path)
