"""Normalize a math answer string so equal answers look equal.

Steps, in order: full-width ASCII to half-width (U+FF01-FF5E, U+3000, and the full-width yen),
LaTeX wrappers dropped (`$`, `\\(`, `\\[`, `\\left`, `\\right`, spacing, `\\displaystyle`),
`\\text{..}`-style wrappers unwrapped, `\\dfrac`/`\\tfrac` to `\\frac` and `\\frac12` to `\\frac{1}{2}`,
degrees dropped, currency (`$`, `¥`, `元`, `€`, `£`, `USD`, `RMB`) dropped, thousands separators removed
from numbers like `1,234,567`, trailing punctuation and whitespace trimmed.
Percent signs are kept (the numeric voter reads `50%` as 0.5 and also tries 50).
"""
from __future__ import annotations

import re

_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_FULLWIDTH.update({0x3000: 0x20, 0xFFE5: ord("¥"), 0xFFE0: ord("¢"), 0xFFE1: ord("£")})
_PUNCT_CJK = str.maketrans({"，": ",", "。": ".", "：": ":", "；": ";", "（": "(", "）": ")",
                            "－": "-", "−": "-", "×": "\\times ", "÷": "/", "·": "\\cdot "})

_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathit|operatorname|mbox|emph)\s*\{([^{}]*)\}")
_DROP = re.compile(r"\\(?:left|right|displaystyle|textstyle|!|,|;|:|quad|qquad)|\\ |\^\s*\{?\\circ\}?|°|\\%")
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_HALF = re.compile(r"\\frac\s*\{([^{}]*)\}\s*(\d)")
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d+)")
_CURRENCY = re.compile(r"(?:\\\$|US\$|USD|RMB|CNY|[¥€£元块])")
_THOUSANDS = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,])")


def to_halfwidth(text: str) -> str:
    return text.translate(_FULLWIDTH)


def normalize(text: str) -> str:
    """Canonical form of one answer string (see module docstring)."""
    s = to_halfwidth(text).translate(_PUNCT_CJK).strip()
    s = s.replace("\\%", "%")
    for _ in range(3):  # nested wrappers like \text{\textbf{5}}
        s, n = _WRAPPERS.subn(r"\1", s)
        if not n:
            break
    s = _DROP.sub("", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_HALF.sub(r"\\frac{\1}{\2}", s)
    s = _SQRT_SHORT.sub(r"\\sqrt{\1}", s)
    s = s.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    s = _CURRENCY.sub("", s)
    s = s.replace("$", "")
    if not re.search(r"[(\[{]", s):  # "(1,234)" is a pair, "1,234" a number
        s = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), s)
    s = re.sub(r"\s+", " ", s).strip()
    s = s.rstrip(".。;,").strip()
    if s.startswith("{") and s.endswith("}") and _balanced(s[1:-1]) and "," not in s:
        s = s[1:-1].strip()
    return s


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch == "{"
        depth -= ch == "}"
        if depth < 0:
            return False
    return depth == 0


def compact(s: str) -> str:
    """Spacing- and brace-insensitive key used by the text voter."""
    return re.sub(r"[\s{}]", "", s).lower()
