"""Full-width to half-width conversion for the ASCII range (U+FF01-FF5E, U+3000), with a scope.

Chinese business exports type answers, numbers, code and math in full-width forms (`１２３`,
`ＳＥＬＥＣＴ`, `＄ｘ＋１＄`). Those must become ASCII for verifiers to read them, but the
full-width comma, colon and question mark (，：？) are the correct punctuation of Chinese prose, and
NFKC would also rewrite other characters. So whole fields (references, solutions) are converted,
while in the question's prose only digit runs, math spans and code spans are (see WidthConfig).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["FULL_WIDTH", "HALF_WIDTH", "HAS_FULL_WIDTH", "SPAN_DELIMITER", "NUMBER_RUN_FULL_WIDTH",
           "to_half_width", "convert_spans"]

FULL_WIDTH = [chr(c) for c in range(0xFF01, 0xFF5F)] + ["\u3000"]
HALF_WIDTH = [chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)] + [" "]
HAS_FULL_WIDTH = "[\\uFF01-\\uFF5E\\u3000]"
# A value can only change under `convert_spans` if it has a span delimiter (` $ \\) and some
# full-width form, or a full-width character a digit run may hold. Chinese prose with only
# ，：？ fails both checks, which keeps it on the fast path.
SPAN_DELIMITER = "[`$\\\\]"
NUMBER_RUN_FULL_WIDTH = "[\\uFF10-\\uFF19\\uFF0E\\uFF05\\uFF0A\\uFF0B\\uFF0D\\uFF0F\\uFF1C-\\uFF1E\\uFF3E]"
_TABLE = str.maketrans(dict(zip(FULL_WIDTH, HALF_WIDTH)))

_SPANS = re.compile(
    r"(?P<code>```.*?```|`[^`\n]+`)"
    r"|(?P<math_spans>\$\$.+?\$\$|\$[^$\n]+\$|\\\(.+?\\\)|\\\[.+?\\\])"
    r"|(?P<numbers>[０-９0-9](?:[０-９0-9．.％%]|[ 　]*[＋－＊／＝＜＞＾][ 　]*[０-９0-9])*)",
    re.DOTALL,
)


def to_half_width(text: str) -> str:
    """Every full-width ASCII form and the ideographic space become their ASCII counterpart."""
    return text.translate(_TABLE)


def convert_spans(text: str, scopes: Iterable[str]) -> str:
    """Convert only code spans, math spans and digit runs, as far as `scopes` names them.

    Code and math spans are always recognised first, so a digit run inside code that is out of
    scope is left alone.
    """
    wanted = frozenset(scopes)
    if not wanted & {"code", "math_spans", "numbers"}:
        return text

    def repl(match: re.Match[str]) -> str:
        span = match.group(0)
        return to_half_width(span) if match.lastgroup in wanted else span

    return _SPANS.sub(repl, text)
