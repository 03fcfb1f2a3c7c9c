"""Bytes to text lines: encoding detection (UTF-8 with or without BOM, UTF-16 with BOM, GB18030/GBK),
per-line fallbacks, and binary-junk detection (several control bytes, not one stray BEL).

`decode_file(data, encoding)` returns every physical line with its 1-based number, either as
text or with the reason it could not be read. A file that cannot be read at all raises
`Undecodable` (the caller quarantines it with reason `undecodable_file`).

Why GB18030 and not chardet: the only non-UTF-8 encoding Chinese business exports use in practice
is GBK (Excel's "ANSI" on a Chinese Windows), and GB18030 is its superset. But GB18030 decodes
many non-Chinese byte strings without error, so a GB18030 result is only trusted when most of its
non-ASCII characters are common Chinese (the GB2312 subset); Latin-1 text misread as GBK is not.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["Line", "DecodedFile", "Undecodable", "decode_file", "looks_binary"]

MAX_BAD_LINE_SHARE = 0.5  # more undecodable lines than this: the file is in another encoding
MIN_GB2312_SHARE = 0.9  # share of non-ASCII chars a real Chinese GB18030 text has in GB2312
# Binary means many control characters, not one: a stray BEL (or an escaped \u0000) in a text
# field is noise the cleaner drops (CONTROL_RULES), while a pasted gzip/PNG fragment carries
# several controls in every few dozen bytes. A raw NUL byte in a line is binary on its own (no
# text export writes one). ESC is not junk: terminal colour codes are text that ftfy removes.
MIN_JUNK = 4  # at least this many junk characters ...
MAX_JUNK_SHARE = 0.1  # ... making more than this share of the value
_JUNK_BYTES = frozenset(range(0, 9)) | frozenset(range(14, 27)) | frozenset(range(28, 32)) | {11, 12, 127}
_JUNK_CHARS = frozenset(map(chr, _JUNK_BYTES)) | {"\ufffd"}


class Undecodable(ValueError):
    """The file as a whole is not text in any encoding we accept."""


@dataclass(frozen=True)
class Line:
    number: int  # 1-based physical line
    text: str | None  # None when the line could not be read
    raw: bytes
    reason: str = ""  # slug when text is None
    detail: str = ""


@dataclass(frozen=True)
class DecodedFile:
    encoding: str
    lines: list[Line]


def _too_much_junk(junk: int, length: int) -> bool:
    return junk >= MIN_JUNK and junk > MAX_JUNK_SHARE * length


def looks_binary(text: str) -> bool:
    """Binary data pasted into a text field: MIN_JUNK or more control characters (ESC excepted)
    or U+FFFD, making more than MAX_JUNK_SHARE of the value. One stray control is not binary."""
    return _too_much_junk(sum(ch in _JUNK_CHARS for ch in text), len(text))


def _plausible_chinese(text: str) -> bool:
    non_ascii = [ch for ch in text if ord(ch) > 127]
    if not non_ascii:
        return True
    common = 0
    for ch in non_ascii:
        try:
            ch.encode("gb2312")
            common += 1
        except UnicodeEncodeError:
            pass
    return common / len(non_ascii) >= MIN_GB2312_SHARE


def _split(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def _line(number: int, raw: bytes, encoding: str) -> Line:
    stripped = raw[:-1] if raw.endswith(b"\r") else raw
    # a raw NUL byte never comes out of a text export: the line holds bytes of a binary file
    if b"\x00" in stripped or _too_much_junk(sum(b in _JUNK_BYTES for b in stripped), len(stripped)):
        return Line(number, None, raw, "binary_junk", "line holds NUL or control bytes, not text")
    try:
        return Line(number, stripped.decode(encoding), raw)
    except UnicodeDecodeError as exc:
        return Line(
            number,
            None,
            raw,
            "undecodable_line",
            f"not valid {encoding} at byte {exc.start} (the file was read as {encoding}); "
            "re-export the line or set the source's encoding",
        )


def _by_line(data: bytes, encoding: str) -> DecodedFile:
    raws = _split(data)
    lines = [_line(i, raw, encoding) for i, raw in enumerate(raws, 1)]
    nonblank = [ln for ln in lines if ln.raw.strip()]
    bad = [ln for ln in nonblank if ln.text is None]
    if nonblank and len(bad) / len(nonblank) > MAX_BAD_LINE_SHARE:
        raise Undecodable(f"{len(bad)} of {len(nonblank)} lines are binary or not valid {encoding}")
    return DecodedFile(encoding, lines)


def _whole(data: bytes, encoding: str) -> DecodedFile | None:
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    # Decoding succeeded; lines that still look binary are rejected one by one.
    return _by_line(text.encode("utf-8"), "utf-8") if encoding != "utf-8" else _by_line(data, "utf-8")


def decode_file(data: bytes, encoding: str = "auto") -> DecodedFile:
    """Decode `data` into numbered lines (see the module docstring for the order of attempts)."""
    if encoding != "auto":
        name = codecs.lookup(encoding).name
        if name == "utf-8" and data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8) :]
        whole = _whole(data, name)
        return DecodedFile(encoding, whole.lines) if whole else _by_line(data, name)
    if data.startswith(codecs.BOM_UTF8):
        whole = _whole(data[len(codecs.BOM_UTF8) :], "utf-8")
        if whole:
            return DecodedFile("utf-8-sig", whole.lines)
        return DecodedFile("utf-8-sig", _by_line(data[len(codecs.BOM_UTF8) :], "utf-8").lines)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        whole = _whole(data, "utf-16")
        if whole is None:
            raise Undecodable("starts with a UTF-16 byte-order mark but is not valid UTF-16")
        return DecodedFile("utf-16", whole.lines)
    whole = _whole(data, "utf-8")
    if whole:
        return whole
    gb = _whole(data, "gb18030")
    if gb and _plausible_chinese("".join(ln.text or "" for ln in gb.lines)):
        return DecodedFile("gb18030", gb.lines)
    try:
        return _by_line(data, "utf-8")
    except Undecodable as utf8_error:
        try:
            by_gb = _by_line(data, "gb18030")
        except Undecodable:
            raise Undecodable(f"neither UTF-8 ({utf8_error}) nor GB18030") from None
        if not _plausible_chinese("".join(ln.text or "" for ln in by_gb.lines)):
            raise Undecodable("not UTF-8, and as GB18030 it is not Chinese text") from None
        return by_gb
