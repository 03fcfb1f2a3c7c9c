"""The `working` verifier: does the arithmetic a response shows hold, step by step?

A process check, for `reward.process_verifier`: it reads the equations of the worked reply
(`5*20-2=100-2=98`, GSM8K-style calculator notes `<<48/2=24>>`, `80*25%=20`, `3 × 12 = 36`) and the
final answer line (`Answer: 98`, `答案：98`), and scores the share of links that hold: each `=` between
two arithmetic expressions is one link, and the answer against the last value worked out is one more.
All links hold: `correct` (1.0); some: `wrong` with partial credit; no equation: `unparsed` (0).

It knows no gold answer: a right answer reached by wrong arithmetic scores low here and a wrong setup
computed correctly scores high, so it adds to the outcome reward, never replaces it. Expressions are
parsed by Python's `ast` into numbers and + - * / only (no names, calls or powers), numbers of at most
`max_digits` digits; a value written with d decimals holds when it is the exact value rounded to d
places (`10/3=3.33`).

params (reference is ignored unless it is a JSON object with these keys):
  max_digits: 15            longest number accepted
"""
from __future__ import annotations

import ast
import json
import re

from . import verdict as V

_SIGNS = str.maketrans({"×": "*", "x": "*", "X": "*", "÷": "/", "−": "-", "％": "%", "，": "", ",": "", "（": "(", "）": ")"})
_ARITH = re.compile(r"[0-9.+\-*/()% ]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CALC = re.compile(r"<<([^<>]*)>>")
_ANSWER = re.compile(r"(?:(?:answer|答案)\s*[:：]|####)\s*(-?[0-9][0-9,]*(?:\.[0-9]+)?)", re.IGNORECASE)


def _value(text: str, max_digits: int) -> float | None:
    """The value of an arithmetic expression of numbers, + - * / and %, or None."""
    text = text.strip()
    if not text or not _ARITH.fullmatch(text) or not _NUMBER.search(text):
        return None
    if any(len(n.replace(".", "")) > max_digits for n in _NUMBER.findall(text)):
        return None
    text = re.sub(r"(\d+(?:\.\d+)?)\s*%", r"(\1/100)", text)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return None
    return _eval(tree.body)


def _eval(node) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _eval(node.left), _eval(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return None if b == 0 else a / b
    return None


def _holds(exact: float, written: str, value: float) -> bool:
    """`written` (its value `value`) states `exact`: equal, or `exact` rounded to written's decimals."""
    decimals = len(written.strip().split(".")[1]) if _NUMBER.fullmatch(written.strip()) and "." in written else 0
    tolerance = 0.5 * 10 ** -decimals if decimals else 1e-9 * max(1.0, abs(exact))
    return abs(exact - value) <= tolerance + 1e-12


def _edges(part: str, side: str) -> str:
    """The arithmetic end of a chain's outer part: the tail of the first (`Total 5*20`), the head of the last."""
    runs = list(_ARITH.finditer(part))
    if not runs:
        return ""
    run = runs[-1] if side == "tail" else runs[0]
    if side == "tail" and part[run.end():].strip() or side == "head" and part[: run.start()].strip():
        return ""  # text after the first part's arithmetic (or before the last's) is not an equation end
    return run.group(0)


def links(response: str, max_digits: int = 15) -> tuple[list[bool], float | None]:
    """Each link's verdict in reading order, and the last value worked out (None when there is none)."""
    text = response.translate(_SIGNS)
    lines = [m.group(1) for m in _CALC.finditer(text)] or text.splitlines()
    verdicts: list[bool] = []
    last = None
    for line in lines:
        if _ANSWER.search(line):
            continue
        parts = line.split("=")
        if len(parts) < 2:
            continue
        parts = [_edges(parts[0], "tail"), *parts[1:-1], _edges(parts[-1], "head")]
        values = [_value(p, max_digits) for p in parts]
        for (a, va), (b, vb) in zip(zip(parts, values), zip(parts[1:], values[1:])):
            if va is None or vb is None:
                continue
            verdicts.append(_holds(va, b, vb))
            last = vb
    return verdicts, last


def verify_working(response: str, reference: str, params: dict) -> V.Verdict:
    spec = dict(params or {})
    try:
        ref = json.loads(reference) if reference and reference.strip().startswith("{") else {}
    except json.JSONDecodeError:
        ref = {}
    spec.update(ref if isinstance(ref, dict) else {})
    max_digits = int(spec.get("max_digits", 15))
    verdicts, last = links(response, max_digits)
    if not verdicts:
        return V.unparsed("no equation between arithmetic expressions in the response")
    answer = _ANSWER.search(response.translate(str.maketrans({"，": "", ",": ""})))
    if answer and last is not None:
        verdicts.append(_holds(last, answer.group(1), float(answer.group(1))))
    held = sum(verdicts)
    detail = f"{held} of {len(verdicts)} links hold"
    if held == len(verdicts):
        return V.correct(str(len(verdicts)), detail)
    return V.wrong(str(len(verdicts)), detail, score=held / len(verdicts))


def check_reference(reference: str, params: dict) -> str | None:
    return None
