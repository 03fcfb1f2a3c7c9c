"""Full-width to half-width conversion for the ASCII range (U+FF01-FF5E, U+3000), with a scope.

Chinese business exports type answers, numbers, code and math in full-width forms (`１２３`,
`ＳＥＬＥＣＴ`, `＄ｘ＋１＄`). Those must become ASCII for verifiers to read them, but the
full-width comma, colon and question mark (，：？) are the correct punctuation of Chinese prose, and
NFKC would also rewrite other characters. So whole fields (references, solutions) are converted,
while in the question's prose only digit runs, math spans and code spans are (see WidthConfig).

A math span is either delimited (`$...$`, `\\(...\\)`, `\\[...\\]`) or a bare formula in the
prose: operands (numbers, variables of up to three letters, a bracketed group, `ｆ（ｘ）`) joined by
at least one operator (`＋－＊／＝＜＞＾×÷≤≥≠`), as in `已知ｘ＋１＝３，求ｘ`. A value holding such a
formula also gets its lone variable letters converted (the `ｘ` of `求ｘ`), so one variable is not
written two ways; without a formula a lone letter (`Ｘ型号`) and words (`ＡＢＣ公司`) stay as
written. The CJK punctuation around the spans (，：？（元）) is never touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "FULL_WIDTH",
    "HALF_WIDTH",
    "HAS_FULL_WIDTH",
    "SPAN_DELIMITER",
    "NUMBER_RUN_FULL_WIDTH",
    "OPERATOR",
    "to_half_width",
    "convert_spans",
]

FULL_WIDTH = [chr(c) for c in range(0xFF01, 0xFF5F)] + ["\u3000"]
HALF_WIDTH = [chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)] + [" "]
HAS_FULL_WIDTH = "[\\uFF01-\\uFF5E\\u3000]"
# A value can only change under `convert_spans` if it has a span delimiter (` $ \\) and some
# full-width form, a full-width character a digit run may hold, or some full-width form and an
# operator (a bare formula). Chinese prose with only ，：？ fails all three checks, which keeps it
# on the fast path.
SPAN_DELIMITER = "[`$\\\\]"
NUMBER_RUN_FULL_WIDTH = "[\\uFF10-\\uFF19\\uFF0E\\uFF05\\uFF0A\\uFF0B\\uFF0D\\uFF0F\\uFF1C-\\uFF1E\\uFF3E]"
OPERATOR = "[-+*/=<>^\\uFF0A\\uFF0B\\uFF0D\\uFF0F\\uFF1C-\\uFF1E\\uFF3E\\u00D7\\u00F7\\u2260\\u2264\\u2265]"
_TABLE = str.maketrans(dict(zip(FULL_WIDTH, HALF_WIDTH)))

_SP = "[ 　]*"
_OP = "[-+*/=<>^＋－＊／＝＜＞＾×÷≠≤≥]"
_ALNUM = "A-Za-zＡ-Ｚａ-ｚ0-9０-９"
# an operand: a number with at most two letters (`２ｘ`, `３ａｂ`) or one to three letters with
# digits (`ｘ`, `ｘ２`, `ｓｉｎ`), never part of a longer word: `<s>Ｔｏｔａｌ` is no formula.
# Linear time: the number is an atomic group and never starts in the middle of another number
# (after `digit.`), so `１．１．１．…` is read once from its first digit instead of being retried
# from each of its digits with every shorter prefix (quadratic: "１．"*20000 took ~50 s). It also
# means a formula never splits a number at its decimal point (`ｖ１．５－ａ` holds none).
_DIGITS = "0-9０-９"
_ATOM = (
    f"(?<![{_ALNUM}])(?:(?<![{_DIGITS}][.．])(?>[{_DIGITS}]+(?:[.．][{_DIGITS}]+)*)[%％]?"
    f"[A-Za-zＡ-Ｚａ-ｚ]{{0,2}}|[A-Za-zＡ-Ｚａ-ｚ]{{1,3}}[{_DIGITS}]*)(?![{_ALNUM}])"
)
_GROUP = f"[(（]{_SP}[-－]?{_ATOM}(?:{_SP}{_OP}{_SP}[-－]?{_ATOM})*{_SP}[)）]"
_OPERAND = f"(?:{_ATOM}(?:{_GROUP})?|{_GROUP})"
# a bare formula: operands joined by operators; it always starts at an operand, so a list
# marker (１) or a bracketed word （元） stays prose
_FORMULA = f"{_OPERAND}(?:{_SP}{_OP}{_SP}{_OPERAND})+"
_LONE_LETTER = f"(?<![{_ALNUM}])[Ａ-Ｚａ-ｚ](?:{_GROUP})?(?![{_ALNUM}])"
_HAS_FORMULA = re.compile(_FORMULA)
_NUMBER_RUN = "[０-９0-9](?:[０-９0-9．.％%]|[ 　]*[＋－＊／＝＜＞＾][ 　]*[０-９0-9])*"
_NUMBERS = re.compile(_NUMBER_RUN)

# `\(...\)` / `\[...\]`: the body never holds another opener (the `\[` of `\\[2pt]`, a line
# break, is none), so an unclosed opener is scanned up to the next one, not to the end of the
# value and again from every later opener
DELIMITED_MATH = (
    r"(?<!\\)\\\((?:(?!(?<!\\)\\\().)+?\\\)"
    r"|(?<!\\)\\\[(?:(?!(?<!\\)\\\[).)+?\\\]"
)

_SPANS = re.compile(
    r"(?P<code>```.*?```|`[^`\n]+`)"
    f"|(?P<math_spans>\\$\\$.+?\\$\\$|\\$[^$\\n]+\\$|{DELIMITED_MATH})"
    f"|(?P<formula>{_FORMULA})"
    f"|(?P<numbers>{_NUMBER_RUN})"
    f"|(?P<lone>{_LONE_LETTER})",
    re.DOTALL,
)


def to_half_width(text: str) -> str:
    """Every full-width ASCII form and the ideographic space become their ASCII counterpart."""
    return text.translate(_TABLE)


def convert_spans(text: str, scopes: Iterable[str]) -> str:
    """Convert only code spans, math spans and digit runs, as far as `scopes` names them.

    Code and delimited math spans are always recognised first, so a digit run inside code that is
    out of scope is left alone. A bare formula out of scope still gets its digit runs converted
    when `numbers` is in scope.
    """
    wanted = frozenset(scopes)
    if not wanted & {"code", "math_spans", "numbers"}:
        return text
    math = "math_spans" in wanted
    lone = math and _HAS_FORMULA.search(text) is not None

    def repl(match: re.Match[str]) -> str:
        span, kind = match.group(0), match.lastgroup
        if kind == "formula":
            if math:
                return to_half_width(span)
            if "numbers" not in wanted:
                return span
            return _NUMBERS.sub(lambda m: to_half_width(m.group(0)), span)
        if kind == "lone":
            return to_half_width(span) if lone else span
        return to_half_width(span) if kind in wanted else span

    return _SPANS.sub(repl, text)
