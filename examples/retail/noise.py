"""The messiness injected into the retail raw logs: one small function per kind of damage.

Two families. Fixable noise keeps the row valid and the cleaner should repair it: `mojibake`
(UTF-8 text decoded as cp1252), `fullwidth` (Ｆｕｌｌ-width digits/letters), `special_tokens`
(`<s>`, `<|im_start|>assistant`, `[SEP]`, `<|endoftext|>`), `zero_width` (U+200B and friends) and
`latex` answers (`$12$`, `\\boxed{12}`, `\\dfrac{3}{4}`). Rejecting noise makes the row one the
cleaner must drop with a reason: near-duplicate rewrites, malformed JSON, oversized rows and binary
junk. Every function is pure given its `random.Random`. Stdlib only.
"""

from __future__ import annotations

import random
from fractions import Fraction

SPECIAL_TOKENS = ["<s>", "</s>", "<|im_start|>assistant\n", "<|im_end|>", "[SEP]", "[CLS]", "<|endoftext|>", "<pad>"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]


def _sloppy_cp1252(byte: int) -> str:
    try:
        return bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: cp1252 leaves them undefined
        return chr(byte)


def mojibake(text: str) -> str:
    """The classic double-decoding: UTF-8 bytes read back as Windows-1252 ('退款' -> 'é€€æ¬¾')."""
    return "".join(_sloppy_cp1252(b) for b in text.encode("utf-8"))


def fullwidth(text: str, digits_only: bool = False) -> str:
    """ASCII digits (and, unless digits_only, letters and . / -) to their full-width forms."""
    out = []
    for ch in text:
        if ch.isascii() and (ch.isdigit() or (not digits_only and (ch.isalpha() or ch in "./-"))):
            out.append(chr(ord(ch) + 0xFEE0))
        else:
            out.append(ch)
    return "".join(out)


def special_tokens(text: str, rng: random.Random) -> str:
    """Chat-template debris a log export left around the text."""
    style = rng.randrange(4)
    if style == 0:
        return rng.choice(["<s>", "<s> ", "[CLS] "]) + text
    if style == 1:
        return text + rng.choice(["<|endoftext|>", "</s>", "<|im_end|>", "<pad><pad>"])
    if style == 2:
        return "<|im_start|>assistant\n" + text + "<|im_end|>"
    cut = _word_boundary(text, rng)
    return text[:cut] + " [SEP] " + text[cut:]


def _word_boundary(text: str, rng: random.Random) -> int:
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    return rng.choice(spaces) if spaces else len(text) // 2


def zero_width(text: str, rng: random.Random, n: int | None = None) -> str:
    """Insert 1-3 invisible characters at random places."""
    chars = list(text)
    for _ in range(n or rng.randint(1, 3)):
        chars.insert(rng.randint(1, max(1, len(chars) - 1)), rng.choice(ZERO_WIDTH))
    return "".join(chars)


def latex(answer: str, rng: random.Random) -> str:
    """A gold number as a LaTeX-ish answer: '$12$', '\\boxed{12}', '\\dfrac{3}{4}', '\\(12\\)'."""
    value = Fraction(answer).limit_denominator(1000)
    if value.denominator != 1 and rng.random() < 0.7:
        macro = rng.choice(["\\dfrac", "\\frac", "\\tfrac"])
        body = f"{macro}{{{value.numerator}}}{{{value.denominator}}}"
        return rng.choice([body, f"${body}$"])
    return rng.choice([f"${answer}$", f"\\boxed{{{answer}}}", f"\\({answer}\\)", f"$\\boxed{{{answer}}}$"])


_PUNCT_SWAP = {
    "?": "？",
    "？": "?",
    ",": "，",
    "，": ",",
    ":": "：",
    "：": ":",
    "(": "（",
    ")": "）",
    "（": "(",
    "）": ")",
}


# A retyped question must stay well above the dedup threshold (0.85 Jaccard of character 5-grams):
# MinHash LSH finds pairs near the threshold only with some probability. A greeting costs ~4
# shingles and an inner punctuation mark ~5, so they are used only on questions long enough to
# keep the similarity above ~0.93; shorter ones only change spacing, case or the final mark,
# which a normalized exact-duplicate key already ignores.
GREETING_MIN_CHARS = 80
INNER_PUNCT_MIN_CHARS = 150


def near_duplicate(question: str, rng: random.Random) -> str:
    """The same request typed again: spacing, punctuation width, case or a greeting differ."""
    text = question
    for _ in range(4):
        style = rng.randrange(4)
        if style == 0:
            cut = _word_boundary(text, rng)
            text = text[:cut] + "  " + text[cut:].lstrip(" ")
        elif style == 1:  # one mark typed in the other width
            at = [
                i
                for i, ch in enumerate(text)
                if ch in _PUNCT_SWAP and (len(text) >= INNER_PUNCT_MIN_CHARS or i == len(text) - 1)
            ]
            if at:
                i = rng.choice(at)
                text = text[:i] + _PUNCT_SWAP[text[i]] + text[i + 1 :]
        elif style == 2 and text[:1].isascii():
            text = text[:1].swapcase() + text[1:]
        elif style == 3 and len(question) >= GREETING_MIN_CHARS:
            text = ("Hi, " + text) if question.isascii() else ("你好，" + text)
        if text != question:
            return text
    return question + " "


def malformed_json(line: str, rng: random.Random) -> str:
    """A JSON object line broken the ways exports break them (truncated, single quotes, ...)."""
    style = rng.randrange(4)
    if style == 0:
        return line[: max(10, len(line) // 2)]
    if style == 1:
        return line.replace('"', "'")
    if style == 2:
        return line[:-1] + ",}"
    return line.rstrip("}") + ', "note": "exported by"'


def oversized_body(rng: random.Random, min_bytes: int) -> str:
    """A question with a whole order log pasted into it: far longer than any real question."""
    lines = ["Please check my order history below, the refund is wrong:"]
    size = len(lines[0])
    while size < min_bytes:
        line = (
            f"2026-0{rng.randint(1, 6)}-{rng.randint(10, 28)} SO{rng.randint(10000, 99999)} "
            f"item={rng.randint(1, 30)} qty={rng.randint(1, 5)} status=completed"
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def binary_junk(rng: random.Random) -> bytes:
    """A fragment of a gzip stream that ended up inside a text log (not valid UTF-8)."""
    # no byte that any line splitter treats as a line break, so the junk stays one line
    breaks = set(b"\n\r\x0b\x0c\x1c\x1d\x1e\x85")
    body = bytes(0 if b in breaks else b for b in (rng.randrange(256) for _ in range(60)))
    return b"\x1f\x8b\x08\x00" + body
