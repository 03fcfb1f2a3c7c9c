"""The `working` verifier: does the arithmetic a response shows hold, step by step?

A process check, for `reward.process_verifier`: it reads the equation chains of a worked reply
(`5*20-2=100-2=98`, `80*25%=20`, `3 × 12 = 36`, `5 \\times 3 = 15`, `1,200*2=2,400`, GSM8K-style
calculator notes `<<48/2=24>>`, several chains on one line: `So 5*4=20. Then 20+5=25.`) and the final
answer (`Answer: 98`, `**Answer:** 98`, `答案：98`, `#### 98`, `A: 98` on its own line, `\\boxed{98}`,
`The final answer is 98`; the last one given), and scores the share of links that hold. A link is an `=` between two arithmetic
expressions in a chain with at least one operator (`72=72` alone is no working); the answer against the
last value worked out is one more link. All hold: `correct` (1.0); some: `wrong` with partial credit;
no link: `unparsed` (0).

It knows no gold: a right answer reached by wrong arithmetic scores low here and a wrong setup
computed correctly scores high, so it belongs beside the outcome reward, never in place of it (as a
row's verifier the attach canaries stop it). Reading rules:
- Text is NFKC-normalized; `×`, `·`, `\\times`, `\\cdot` mean *, `÷`, `\\div` mean /, dashes and the
  minus sign mean -, `x` between two numbers means *; currency signs are dropped; a comma inside a
  digit group (`1,200`) is dropped, any other comma separates; list markers (`-`, `*`, `•`, `1.`)
  at a line's start are not signs.
- A chain whose first expression is a bare number right after a word (`3 times 4 = 12`, `25% of
  80 = 20`) has its first link skipped: the words carried part of the sum.
- Calculator notes and the text around them are both read, so a note's link may count twice.
- The answer is checked against the last value worked out, unless the last line with an `=` could
  not be read (`which gives x = 18` after algebra): then it is not checked.
- Expressions are parsed by Python's `ast` into numbers and + - * / only (no names, calls or
  powers), computed exactly with fractions; at most `max_digits` digits a number and
  `MAX_EXPRESSION` characters an expression.
- A value written with d decimals holds when it is the exact value rounded to d places (`10/3=3.33`),
  or within 1e-12 of it relatively (a float's print: `2/3*10=6.666666666666666`); one written without
  decimals must be exact.

params (a reference that is a JSON object may carry the same keys):
  max_digits: 30            longest number read
"""
from __future__ import annotations

import ast
import json
import re
import unicodedata
from fractions import Fraction

from . import verdict as V

MAX_EXPRESSION = 200
FLOAT_PRINT = Fraction(1, 10 ** 12)  # relative slack for a value printed from a float
_LATEX = [(r"\times", "*"), (r"\cdot", "*"), (r"\div", "/"), (r"\left", ""), (r"\right", ""), (r"\(", " "),
          (r"\)", " "), (r"\[", " "), (r"\]", " ")]
_SIGNS = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-", "—": "-", "$": "", "¥": "", "€": "",
                        "£": "", "，": ";", "；": ";", "、": ";"})
_X_BETWEEN_DIGITS = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")
_GROUP_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)](?!\d))\s+", re.MULTILINE)
_CHAIN = re.compile(r"[0-9.+\-*/()% ]+(?:=[0-9.+\-*/()% ]+)+")
_OPERATOR = re.compile(r"(?<=[\d)%\s])[+\-*/](?=[\s\d(.])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_PLAIN = re.compile(r"\s*-?\d+(?:\.\d+)?\s*\.?\s*")
_CALC = re.compile(r"<<([^<>]*)>>")
_ANSWER = re.compile(r"(?:\\boxed\{([^{}]*)\}|(?:final answer is|answer\**\s*[:：]|答案\s*[:：是为]?|####|^A\s*[:：])([^\n]*))",
                     re.IGNORECASE | re.MULTILINE)
_SIGNED_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def normalize(response: str) -> str:
    """The response in the plain arithmetic this verifier reads (see the module docstring)."""
    text = unicodedata.normalize("NFKC", response)
    for latex, plain in _LATEX:
        text = text.replace(latex, plain)
    text = _X_BETWEEN_DIGITS.sub("*", text.translate(_SIGNS))
    text = _GROUP_COMMA.sub("", text).replace(",", ";")
    return _LIST_MARKER.sub("", text)


def _value(text: str, max_digits: int) -> Fraction | None:
    """The exact value of an arithmetic expression of numbers, + - * / and %, or None."""
    text = text.strip().rstrip(".").strip()
    while text.startswith("(") and text.count("(") > text.count(")"):  # `(5*3=15)`: the chain's brackets
        text = text[1:].lstrip()
    while text.endswith(")") and text.count(")") > text.count("("):
        text = text[:-1].rstrip()
    if not text or len(text) > MAX_EXPRESSION or not _NUMBER.search(text):
        return None
    if any(len(n.replace(".", "")) > max_digits for n in _NUMBER.findall(text)):
        return None
    text = re.sub(r"(\d+(?:\.\d+)?)\s*%", r"(\1/100)", text)
    try:
        return _eval(ast.parse(text, mode="eval").body, text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, ZeroDivisionError):
        return None


def _eval(node, source: str) -> Fraction | None:
    """Exact value of the parsed expression; numbers are read from `source` itself (a float would round)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(source[node.col_offset : node.end_col_offset])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, source)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _eval(node.left, source), _eval(node.right, source)
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


def _holds(exact: Fraction, written: str, value: Fraction) -> bool:
    """`written` (its value `value`) states `exact`: equal, or `exact` rounded to written's decimals."""
    plain = written.strip().rstrip(".").strip()
    if _PLAIN.fullmatch(plain) and "." in plain:
        decimals = len(plain.split(".")[1])
        # a long decimal is often a float's print (2/3*10 -> 6.666666666666666): its last digit may be off
        return abs(exact - value) <= max(Fraction(1, 2 * 10 ** decimals), abs(exact) * FLOAT_PRINT)
    return exact == value


def _after_word(text: str, start: int) -> bool:
    """The chain at `start` follows a word or a LaTeX command directly (`3 times 4`, `of 80`)."""
    before = text[:start].rstrip()
    return bool(before) and (before[-1].isalpha() or before[-1] == "\\")


def links(response: str, max_digits: int = 30) -> tuple[list[bool], tuple[Fraction, str] | None]:
    """Each link's verdict in reading order, and the last value worked out with its text (None when
    there is none, or when the last line with an `=` could not be read: `x = 18` after algebra)."""
    verdicts: list[bool] = []
    last = None
    for line in normalize(response).splitlines():
        notes = [m.group(1) for m in _CALC.finditer(line)]
        read = False
        for part in [*notes, _CALC.sub(" ", line)]:
            for chain in _CHAIN.finditer(part):
                sides = chain.group(0).split("=")
                values = [_value(side, max_digits) for side in sides]
                if values[-1] is not None and any(v is not None for v in values[:-1]):
                    last, read = (values[-1], sides[-1].strip()), True
                if not any(_OPERATOR.search(side) for side in sides):
                    continue  # 72=72, or 0.5=50%: a restatement (it still says what was worked out), not a step
                skip_first = _after_word(part, chain.start()) and not _OPERATOR.search(sides[0])
                for i, b in enumerate(sides[1:]):
                    va, vb = values[i], values[i + 1]
                    if va is None or vb is None or (i == 0 and skip_first):
                        continue
                    verdicts.append(_holds(va, b, vb))
        if "=" in line and not read:
            last = None
    return verdicts, last


def _answer_holds(last: tuple[Fraction, str], answer: tuple[str, Fraction]) -> bool:
    """The answer states the last value worked out; after `= 60%` the answer may be written `60`."""
    value, text = last
    if _holds(value, answer[0], answer[1]):
        return True
    return text.endswith("%") and _holds(value * 100, answer[0], answer[1])


def final_answer(response: str) -> tuple[str, Fraction] | None:
    """The last answer the response gives (its last number) as (text, value), or None."""
    text = normalize(response)
    found = None
    for m in _ANSWER.finditer(text):
        numbers = _SIGNED_NUMBER.findall(m.group(1) if m.group(1) is not None else m.group(2))
        if numbers:
            found = numbers[-1]
    return None if found is None else (found, Fraction(found))


def verify_working(response: str, reference: str, params: dict) -> V.Verdict:
    spec = dict(params or {})
    try:
        ref = json.loads(reference) if reference and reference.strip().startswith("{") else {}
    except json.JSONDecodeError:
        ref = {}
    spec.update(ref if isinstance(ref, dict) else {})
    try:
        max_digits = int(spec.get("max_digits", 30))
    except (TypeError, ValueError):
        return V.error(f"working: max_digits must be a whole number, got {spec.get('max_digits')!r}")
    verdicts, last = links(response, max_digits)
    if not verdicts:
        return V.unparsed("no equation between arithmetic expressions in the response")
    answer = final_answer(response)
    if answer is not None and last is not None:
        verdicts.append(_answer_holds(last, answer))
    held = sum(verdicts)
    detail = f"{held} of {len(verdicts)} links hold"
    if held == len(verdicts):
        return V.correct(str(len(verdicts)), detail)
    return V.wrong(str(len(verdicts)), detail, score=held / len(verdicts))


def check_reference(reference: str, params: dict) -> str | None:
    return None
