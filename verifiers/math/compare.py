"""The voters that decide whether two normalized answers are equal.

Each voter says equal (True), different (False) or abstains (None). The vote, cheapest first:
  1. text:      equal compact forms (spaces and braces ignored) -> equal, decisive.
  2. numeric:   both sides read as single numbers (integers, decimals, a/b, \\frac{a}{b},
                scientific, `1.2\\times10^{3}`, percent, a trailing unit word) -> decisive, with
                exact fractions where both are exact and a relative tolerance (default 1e-9) else,
                so 12345678 != 12345679 and 100 != 100.01. `50%` also matches 50 and 0.5.
  3. collection: either side is a set `{..}`, a tuple or interval `(..]`, or several solutions
                (`x=2 or x=3`, `2或3`, `2、3`, `2, 3`) -> decisive: same kind, same size, and the
                elements pair up under this same vote (in order for tuples and intervals, in any
                order otherwise). A single value never equals several.
  4. symbolic:  sympy in a timed helper process (symbolic.py) -> equal / different / abstain.
If every voter abstains the answer is wrong ("no voter could compare them").
"""
from __future__ import annotations

import re
from fractions import Fraction

from .normalize import compact
from .symbolic import symbolic_equal

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)"
_PLAIN = re.compile(rf"^({_NUM})(?:[eE]([-+]?\d+))?$")
_RATIO = re.compile(rf"^([-+]?\d+)\s*/\s*([-+]?\d+)$")
_FRAC = re.compile(r"^([-+]?)\\frac\{\s*([-+]?\d+)\s*\}\{\s*([-+]?\d+)\s*\}$")
_SCI = re.compile(rf"^({_NUM})\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{{?\s*([-+]?\d+)\s*\}}?$")
_UNIT = re.compile(r"^(.*?\d)\s*(?:[A-Za-z]{2,}(?:\s+[A-Za-z]+)*|cm|mm|km|kg|mg|ml|m|g|s|h|L|[\u4e00-\u9fff]+)$")
_ASSIGN = re.compile(r"^\s*(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)\s*(?:=|\\in)\s*(?!=)")
_SPLIT_WORDS = re.compile(r"\s+(?:or|and)\s+|或|、|\\text\{\s*or\s*\}|;")
MAX_ELEMENTS = 64


def parse_number(s: str) -> tuple[Fraction | float, bool] | None:
    """(value, is_percent) for a single number, else None."""
    s = s.strip().replace(" ", "")
    percent = s.endswith("%")
    s = s.rstrip("%")
    unit = _UNIT.match(s)
    if unit and not percent:
        s = unit.group(1)
    value = _number_value(s)
    return None if value is None else (value, percent)


def _number_value(s: str) -> Fraction | float | None:
    try:
        if m := _PLAIN.match(s):
            base = Fraction(m.group(1))
            exp = int(m.group(2) or 0)
            return base * Fraction(10) ** exp if abs(exp) < 400 else float(s)
        if m := _RATIO.match(s):
            return Fraction(int(m.group(1)), int(m.group(2)))
        if m := _FRAC.match(s):
            value = Fraction(int(m.group(2)), int(m.group(3)))
            return -value if m.group(1) == "-" else value
        if (m := _SCI.match(s)) and abs(int(m.group(2))) < 400:
            return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def numbers_equal(a: Fraction | float, b: Fraction | float, rel_tol: float) -> bool:
    if isinstance(a, Fraction) and isinstance(b, Fraction) and rel_tol == 0:
        return a == b
    return a == b or abs(a - b) <= rel_tol * max(abs(a), abs(b))


def numeric_vote(gold: str, pred: str, rel_tol: float) -> bool | None:
    g, p = parse_number(gold), parse_number(pred)
    if g is None or p is None:
        return None
    (gv, gpct), (pv, ppct) = g, p
    if gpct == ppct:
        return numbers_equal(gv, pv, rel_tol)
    # one side has %: 50% matches 50 and 0.5
    return numbers_equal(gv, pv, rel_tol) or numbers_equal(gv / 100 if gpct else gv,
                                                            pv / 100 if ppct else pv, rel_tol)


def _top_level_split(s: str, seps: re.Pattern) -> list[str]:
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            m = seps.match(s, i)
            if m and m.end() > i:
                parts.append(s[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def strip_assignment(s: str) -> str:
    return _ASSIGN.sub("", s, count=1).strip()


def collection(s: str) -> tuple[str, list[str]] | None:
    """(kind, elements) where kind is 'set' (unordered) or the bracket pair like '()' or '[)'
    (ordered); None for a single value."""
    s = strip_assignment(s)
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", _top_level_split(s[2:-2], re.compile(r","))
    if s.startswith("{") and s.endswith("}") and "," in s:
        return "set", _top_level_split(s[1:-1], re.compile(r","))
    if s[:1] in "([" and s[-1:] in ")]" and _matching(s):
        inner = _top_level_split(s[1:-1], re.compile(r","))
        if len(inner) > 1:
            return s[0] + s[-1], inner
    parts = _top_level_split(s, re.compile(r",|" + _SPLIT_WORDS.pattern))
    parts = [strip_assignment(p) for p in parts if p]
    return ("set", parts) if len(parts) > 1 else None


def _matching(s: str) -> bool:
    depth = 0
    for i, ch in enumerate(s):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


def equal(gold: str, pred: str, rel_tol: float, symbolic_timeout_s: float | None) -> tuple[bool, str]:
    """(equal?, which voter decided); see the module docstring for the vote."""
    gold, pred = strip_assignment(gold), strip_assignment(pred)
    if compact(gold) == compact(pred):
        return True, "text"
    num = numeric_vote(gold, pred, rel_tol)
    if num is not None:
        return num, "numeric"
    gc, pc = collection(gold), collection(pred)
    if gc or pc:
        return _collections_equal(gc, pc, rel_tol, symbolic_timeout_s), "collection"
    if symbolic_timeout_s is None:
        return False, "no voter could compare them"
    sym = symbolic_equal(gold, pred, rel_tol, symbolic_timeout_s)
    if sym == "timeout":
        return False, "symbolic timed out"
    if sym is None:
        return False, "no voter could compare them"
    return sym, "symbolic"


def _collections_equal(gc, pc, rel_tol, timeout_s) -> bool:
    if gc is None or pc is None or gc[0] != pc[0] or len(gc[1]) != len(pc[1]):
        return False
    if len(gc[1]) > MAX_ELEMENTS:
        return False
    if gc[0] != "set":
        return all(equal(g, p, rel_tol, timeout_s)[0] for g, p in zip(gc[1], pc[1]))
    remaining = list(pc[1])
    for g in gc[1]:
        hit = next((i for i, p in enumerate(remaining) if equal(g, p, rel_tol, timeout_s)[0]), None)
        if hit is None:
            return False
        remaining.pop(hit)
    return True
