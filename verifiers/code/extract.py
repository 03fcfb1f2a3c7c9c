"""Pull the Python solution out of a model response.

Fenced blocks first: the last ```python / ```py block (or the last block defining the entry point,
when there is one), else the last unlabeled ``` block; with no fences, the whole response if it
compiles. Returns None when nothing looks like code.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.DOTALL)


def extract_code(response: str, entry_point: str | None = None) -> str | None:
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(response)]
    py = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    plain = [b for lang, b in blocks if lang == ""]
    for group in (py, plain):
        if entry_point:
            defining = [b for b in group if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", b)]
            if defining:
                return defining[-1]
        if group:
            return group[-1]
    if blocks:
        return None  # fenced, but in another language
    text = response.strip()
    if not text:
        return None
    try:
        compile(text, "<response>", "exec")
    except (SyntaxError, ValueError):
        return None
    return text
