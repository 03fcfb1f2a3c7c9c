"""Find the final answer(s) in a response, by priority.

Levels, highest first; the answer is the LAST candidate of the highest level that has one:
  1. explicit markers: "final answer is/:", "the answer is", `答案是`, `答案:`, `最终答案`, `答:`
  2. `\\boxed{...}` / `\\fbox{...}` (balanced braces)
  3. `Answer:` (also `**Answer:**`)
  4. fallback, on the last line only: the whole line when it is short and has no words or
     colon, else its number when it holds exactly one (several numbers there are a guess list).
Candidates of levels 1-3 are all returned too, so the verifier can spot hedging (two different
final answers). Text after a marker runs to the end of the line or sentence; a `\\boxed{}` or
`$...$` right after a marker is taken whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .normalize import to_halfwidth

MAX_RESPONSE_CHARS = 100_000
_MARKERS = re.compile(
    r"(?:final\s+answer\s*(?:is|[:：])|the\s+answer\s+is|答案\s*是|最终答案\s*(?:是|为)?\s*[:：]?|"
    r"答案\s*(?:为|[:：])|(?<![\w答])答\s*[:：])", re.IGNORECASE)
_ANSWER = re.compile(r"(?<![A-Za-z])answer\s*\**\s*[:：]", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_NUMBER = re.compile(r"-?\\frac\{[^{}]*\}\{[^{}]*\}|-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?%?")
_SENTENCE_END = re.compile(r"\n|。|(?<=[^\d\s])\.(?=\s|$)|\.(?=\s+[A-Z])|\.$|[!?！？]")


@dataclass(frozen=True)
class Extraction:
    answer: str | None          # the chosen final answer (raw text), None if nothing found
    level: str                  # marker | boxed | answer | fallback | none
    candidates: tuple[str, ...]  # every level 1-3 candidate, in order of appearance


def braced(text: str, start: int) -> tuple[str, int] | None:
    """Content of the balanced {...} group starting at text[start] == '{', and the end index."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def _boxed_at(text: str, pos: int) -> str | None:
    m = _BOXED.match(text, pos)
    if not m:
        return None
    end = m.end()
    if end < len(text) and text[end] == "{":
        got = braced(text, end)
        return got[0] if got else None
    tok = re.match(r"\S+", text[end:])
    return tok.group(0) if tok else None


def _after_marker(text: str, pos: int) -> str:
    got = _marker_text(text, pos)
    boxed = _boxed_all(got)
    return boxed[-1] if boxed else got


def _marker_text(text: str, pos: int) -> str:
    rest = text[pos:pos + 2000].lstrip(" \t*:：")
    if rest.startswith("\\boxed") or rest.startswith("\\fbox"):
        boxed = _boxed_at(rest, 0)
        if boxed is not None:
            return boxed
    if rest.startswith("$"):
        close = rest.find("$", 2 if rest.startswith("$$") else 1)
        if close > 0:
            return rest[:close + 1].strip("$")
    end = _SENTENCE_END.search(rest)
    rest = rest[:end.start()] if end else rest
    nxt = [m.start() for m in (_MARKERS.search(rest), _ANSWER.search(rest), _BOXED.search(rest)) if m]
    return rest[:min(nxt)] if nxt else rest


def _boxed_all(text: str) -> list[str]:
    out = []
    for m in _BOXED.finditer(text):
        got = _boxed_at(text, m.start())
        if got is not None:
            out.append(got)
    return out


def extract(response: str) -> Extraction:
    """See the module docstring for the priority order."""
    text = to_halfwidth(response[:MAX_RESPONSE_CHARS])
    marker = [_after_marker(text, m.end()) for m in _MARKERS.finditer(text)]
    boxed = _boxed_all(text)
    answer = [_after_marker(text, m.end()) for m in _ANSWER.finditer(text)]
    candidates = tuple(c.strip() for c in marker + boxed + answer)
    for level, found in (("marker", marker), ("boxed", boxed), ("answer", answer)):
        found = [c.strip() for c in found if c.strip()]
        if found:
            return Extraction(found[-1], level, tuple(c for c in candidates if c))
    if candidates:  # a marker with nothing after it: format without content
        return Extraction(None, "none", ())
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    words = [w for w in re.findall(r"[A-Za-z]{3,}", last) if w.lower() != "and"]
    if last and len(last) <= 60 and not words and ":" not in last:  # "Total: 36" is a label
        return Extraction(last, "fallback", ())
    numbers = set(_NUMBER.findall(last))
    if len(numbers) == 1:  # several numbers on the last line is a guess list, not an answer
        return Extraction(numbers.pop(), "fallback", ())
    return Extraction(None, "none", ())


def extract_gold(reference: str) -> str:
    """A reference may itself carry a marker (`答案: 36`, `\\boxed{36}`); else it is the answer."""
    got = extract(reference)
    if got.level in ("marker", "boxed", "answer") and got.answer:
        return got.answer
    return reference.strip()
