"""Normalize a math answer string so equal answers look equal.

Steps, in order: full-width ASCII to half-width (U+FF01-FF5E, U+3000, the full-width yen) and CJK
punctuation to ASCII; markdown emphasis and code ticks dropped; LaTeX delimiters (`$`, `$$`,
`\\(..\\)`, `\\[..\\]`) and spacing/sizing commands (`\\left`, `\\right`, `\\,`, `\\!`, `~`,
`\\displaystyle`) dropped; `\\text{..}`-style wrappers unwrapped; `\\dfrac`/`\\tfrac`/`\\cfrac` to
`\\frac`, `\\frac12` and `\\frac1{2}` to `\\frac{1}{2}`, `\\sqrt3` to `\\sqrt{3}`; degrees dropped;
currency before or after the amount (`$`, `¥`, `元`, `块`, `€`, `£`, `USD`, `RMB`, `CNY`, `yuan`,
`dollars`) dropped; thousands separators removed (`1,234,567`, `14{,}916`, `1 000 000`); trailing
punctuation and whitespace trimmed. Percent signs are kept (numbers.py reads them).
"""

from __future__ import annotations

import re

_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_FULLWIDTH.update({0x3000: 0x20, 0xFFE5: ord("¥"), 0xFFE0: ord("¢"), 0xFFE1: ord("£")})
_PUNCT_CJK = str.maketrans(
    {
        "，": ",",
        "。": ".",
        "：": ":",
        "；": ";",
        "（": "(",
        "）": ")",
        "－": "-",
        "−": "-",
        "×": "\\times ",
        "÷": "/",
        "·": "\\cdot ",
        "\u2009": " ",
        "\u202f": " ",
        "\u00a0": " ",
    }
)

_MARKDOWN = re.compile(r"\*\*|__|`")
_WRAPPERS = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mathsf|operatorname|mbox|"
    r"emph|boldsymbol|bm|hbox|textnormal|textsf|texttt)\s*\{([^{}]*)\}"
)
_DROP = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|displaystyle|textstyle)(?![A-Za-z])|\\[!,;:]"
    r"|\^\s*\{?\\circ\}?|°|\\degree"
)
_SPACE = re.compile(r"\\(?:quad|qquad)(?![A-Za-z])|(?<!\\)\\ |~")
_RELATIONS = [
    (re.compile(r">=|\\ge(?:q|qslant)?(?![A-Za-z])|≥"), r"\\geq "),
    (re.compile(r"<=|\\le(?:q|qslant)?(?![A-Za-z])|≤"), r"\\leq "),
    (re.compile(r"!=|\\ne(?:q)?(?![A-Za-z])|≠"), r"\\neq "),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
]
_FRAC_NAMES = re.compile(r"\\[dtc]frac")
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_HALF_L = re.compile(r"\\frac\s*(\d)\s*\{")
_FRAC_HALF_R = re.compile(r"\\frac\s*\{([^{}]*)\}\s*(\d)")
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d+)")
_CURRENCY = re.compile(
    r"(?:\\\$|US\$|USD|RMB|CNY|EUR|GBP|[¥€£元块]|美元|人民币|\b(?:yuan|dollars?|euros?)\b)", re.IGNORECASE
)
_THOUSANDS = re.compile(r"(?<![\d.,])([1-9]\d{0,2}(?:,\d{3})+)(?![\d,])")
_THOUSANDS_SPACE = re.compile(r"^([-+]?[1-9]\d{0,2}(?: \d{3})+)(\.\d+)?$")


def to_halfwidth(text: str) -> str:
    return text.translate(_FULLWIDTH)


def normalize(text: str) -> str:
    """Canonical form of one answer string (see module docstring)."""
    s = to_halfwidth(text).translate(_PUNCT_CJK).strip()
    s = _MARKDOWN.sub("", s)
    s = s.replace("\\%", "%").replace("{,}", ",")
    s = re.sub(r",\\!\s*", ",", s)  # `12,\!000`: a thousands separator, not a list
    for _ in range(3):  # nested wrappers like \text{\textbf{5}}
        s, n = _WRAPPERS.subn(r"\1", s)
        if not n:
            break
    s = _DROP.sub("", s)
    s = _SPACE.sub(" ", s)
    for pat, rep in _RELATIONS:
        s = pat.sub(rep, s)
    s = _FRAC_NAMES.sub(r"\\frac", s)
    s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_HALF_L.sub(r"\\frac{\1}{", s)
    s = _FRAC_HALF_R.sub(r"\\frac{\1}{\2}", s)
    s = _SQRT_SHORT.sub(r"\\sqrt{\1}", s)
    s = s.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    s = _CURRENCY.sub("", s)
    s = s.replace("$", "")
    s = re.sub(r"\s+", " ", s).strip()
    s = s.rstrip(".。;,!").strip()
    if not re.search(r"[(\[{]", s):  # "(1,234)" is a pair, "1,234" a number
        s = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), s)
    if m := _THOUSANDS_SPACE.match(s):
        s = m.group(1).replace(" ", "") + (m.group(2) or "")
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
