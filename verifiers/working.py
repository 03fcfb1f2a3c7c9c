"""The `working` verifier: does the arithmetic a response shows hold, step by step?

A process check, for `reward.process_verifier`: it reads the equation chains of a worked reply
(`5*20-2=100-2=98`, `80*25%=20`, `3 × 12 = 36`, `5 \\times 3 = 15`, `1,200*2=2,400`, GSM8K-style
calculator notes `<<48/2=24>>`, several chains on one line: `So 5*4=20. Then 20+5=25.`) and the final
answer (`Answer: 98`, `**Answer:** 98`, `答案：98`, `答：98`, `#### 98`, `A: 98` on its own line,
`\\boxed{98}`, `The final answer is 98`; the last one given), and scores the share of links that hold.
A link is an `=` between two arithmetic expressions in a chain with at least one operator (`72=72`
alone is no working); the answer against the last value worked out before it is one more link. All
hold: `correct` (1.0); some: `wrong` with partial credit; no link: `unparsed` (0).

It knows no gold: a right answer reached by wrong arithmetic scores low here and a wrong setup
computed correctly scores high, so it belongs beside the outcome reward, never in place of it (as a
row's verifier the attach canaries stop it). Reading rules:
- Text is NFKC-normalized after superscript digits become powers (`3²`, not read) and vulgar
  fractions become `(1/2)`; `×`, `·`, `\\times`, `\\cdot` mean *, `÷`, `\\div` mean /, `\\frac{a}{b}`
  means (a/b); the minus sign and an en dash mean -, an em dash means - only between two numbers
  (elsewhere it is punctuation); `x` between two numbers means *; `$ ¥ € £ ₹` and `\\$` are dropped;
  a comma, `{,}` or `\\,` inside a digit group (`1,200`) is dropped, any other comma separates, and so
  does a period before a space; Markdown bold and list markers (`-`, `*`, `•`, `1.`) at a line's start
  are not read.
- A chain's first link is skipped when its first expression is a bare number right after a word
  (`3 times 4 = 12`, `25% of 80 = 20`), or when the chain is cut from something it cannot read (`3x +
  2 = 11`, `\\sqrt{16} + 2 = 6`, `3! + 2 = 8`: it starts with an operator or right against a letter,
  digit or bracket); a link whose result is followed by a remainder (`7 ÷ 2 = 3 remainder 1`, `3余1`)
  is skipped.
- Calculator notes and the text around them are both read; a link the text repeats from a note
  (`48/2 = <<48/2=24>>24`) counts once, one that differs from it (`<<48/2=24>>25`) counts as its own.
- The answer is the expression after the last answer marker (its value: `3/4`, `\\frac{3}{4}`, `.5`;
  with an `=` on the answer line, its last side), checked against the last value worked out before
  it, unless the last `=` before the answer could not be read (`so x = 18` after algebra). After
  `= 60%` the answer may read `60`, and `20%` may answer `= 0.2`.
- Expressions are parsed by Python's `ast` into numbers and + - * / only (no names, calls or
  powers), computed exactly with fractions; at most `max_digits` digits a number (the answer's too)
  and `MAX_EXPRESSION` characters an expression; longer ones are not read.
- A value written with d decimals (d + 2 for a percent) holds when it is the exact value rounded to d
  places, or within a relative 1e-12 of it (a float's print: `2/3*10=6.666666666666666`); one written
  without decimals must be exact.

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
FLOAT_PRINT = Fraction(1, 10**12)  # relative slack for a value printed from a float
_BEFORE_NFKC = {
    **{ord(c): f"^{i}" for i, c in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")},
    **{ord(c): " (" + unicodedata.normalize("NFKC", c).replace("\u2044", "/") + ")" for c in "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"},
}
_LATEX = [
    (r"\times", "*"),
    (r"\cdot", "*"),
    (r"\div", "/"),
    (r"\left", ""),
    (r"\right", ""),
    (r"\$", ""),
    (r"\(", " "),
    (r"\)", " "),
    (r"\[", " "),
    (r"\]", " "),
]
_FRAC = re.compile(r"\\[dt]?frac\{(\d+(?:\.\d+)?)\}\{(\d+(?:\.\d+)?)\}")
_SIGNS = str.maketrans(
    {
        "×": "*",
        "·": "*",
        "÷": "/",
        "−": "-",
        "–": "-",
        "$": "",
        "¥": "",
        "€": "",
        "£": "",
        "₹": "",
        "，": ";",
        "；": ";",
        "、": ";",
    }
)
_EM_DASH = re.compile(r"(?<=\d)(\s*)—(\s*)(?=\d)")
_X_BETWEEN_DIGITS = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")
_GROUP_SEPARATOR = re.compile(r"(?<=\d)(?:,|\{,\}|\\,)(?=\d{3}(?!\d))")
_PERIOD = re.compile(r"(?<=\S)\.(?=\s)")
_BOLD = re.compile(r"(?<!\d)\*\*|\*\*(?!\d)")
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*•]|\d{1,2}[.)](?!\d))[ \t]+", re.MULTILINE)
_RUN = re.compile(r"[0-9.+\-*/()% =]+")  # linear: chains are the runs that hold an `=`
_OPERATOR = re.compile(r"(?<=[\d)%\s])[+\-*/](?=[\s\d(.])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_PLAIN = re.compile(r"-?\d*\.?\d+")
_CALC = re.compile(r"<<([^<>]*)>>")
_ANSWER = re.compile(
    r"\\boxed\{([^{}]*)\}|(?:final answer is|answer\**\s*[:：]\**|答案\s*[:：是为]?|答\s*[:：]|"
    r"^####|^A\s*[:：])([^\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
_REMAINDER = re.compile(r"\s*(?:remainder|rem\b|r\b|余|\.\.\.|……)", re.IGNORECASE)
_CUT = set("^_}|!)]")


def normalize(response: str) -> str:
    """The response in the plain arithmetic this verifier reads (see the module docstring)."""
    text = unicodedata.normalize("NFKC", response.translate(_BEFORE_NFKC))
    text = _FRAC.sub(r"(\1/\2)", text)
    for latex, plain in _LATEX:
        text = text.replace(latex, plain)
    text = _EM_DASH.sub(r"\1-\2", text).replace("—", ";")
    text = _X_BETWEEN_DIGITS.sub("*", text.translate(_SIGNS))
    text = _GROUP_SEPARATOR.sub("", text).replace(",", ";")
    text = _PERIOD.sub(";", _BOLD.sub("", text))
    return _LIST_MARKER.sub("", text)


def _value(text: str, max_digits: int) -> Fraction | None:
    """The exact value of an arithmetic expression of numbers, + - * / and %, or None."""
    text = text.strip().rstrip(".").strip()
    while text.startswith("(") and text.count("(") > text.count(")"):  # `(5*3=15)`: the chain's brackets
        text = text[1:].lstrip()
    while text.endswith("(") or (text.endswith(")") and text.count(")") > text.count("(")):
        text = text[:-1].rstrip()  # `2 + 2 = 4 (correct)`, `3（元）`
    if not text or len(text) > MAX_EXPRESSION or not _NUMBER.search(text):
        return None
    if any(len(n.replace(".", "")) > max_digits for n in _NUMBER.findall(text)):
        return None
    text = re.sub(r"(\d*\.?\d+)\s*%", r"(\1/100)", text)
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
    plain = written.strip().rstrip(".").strip().rstrip(")").strip()
    percent = plain.endswith("%")
    plain = plain.rstrip("%").strip()
    if _PLAIN.fullmatch(plain) and "." in plain:
        decimals = len(plain.split(".")[1]) + (2 if percent else 0)
        # a long decimal is often a float's print (2/3*10 -> 6.666666666666666): its last digit may be off
        return abs(exact - value) <= max(Fraction(1, 2 * 10**decimals), abs(exact) * FLOAT_PRINT)
    return exact == value


def _cut_start(part: str, start: int, first: str) -> bool:
    """The chain at `start` continues something unread: a word (`3 times 4`), a variable or function
    (`3x + 2`, `\\sqrt{16} + 2`, `3! + 2`), or its first side starts with an operator."""
    if re.match(r"\s*(?:[+*/]|-\s)", first) or first.count(")") > first.count("("):
        return True
    before = part[:start]
    if before and not part[start].isspace() and (before[-1].isalnum() or before[-1] in _CUT):
        return True
    stripped = before.rstrip()
    return bool(stripped) and (stripped[-1].isalpha() or stripped[-1] == "\\") and not _OPERATOR.search(first)


def _chains(part: str):
    """(start, end, sides) of each run of arithmetic that holds an `=`."""
    for run in _RUN.finditer(part):
        text = run.group(0)
        if "=" not in text:
            continue
        yield run.start(), run.end(), text.split("=")


def links(response: str, max_digits: int = 30) -> tuple[list[bool], tuple[Fraction, str] | None]:
    """Each link's verdict in reading order, and the last value worked out with its text (None when
    there is none, or when the last `=` could not be read: `so x = 18` after algebra)."""
    return _read(normalize(response), max_digits)


def _read(text: str, max_digits: int, stop: int | None = None) -> tuple[list[bool], tuple[Fraction, str] | None]:
    """`links` over normalized text; with `stop`, only chains before that position give the last value."""
    verdicts: list[bool] = []
    last = None
    offset = 0
    for line in text.splitlines(keepends=True):
        start_of_line, offset = offset, offset + len(line)
        notes = list(_CALC.finditer(line))
        rest = _CALC.sub(lambda m: " " * len(m.group(0)), line)  # same positions as the line
        read_spans: list[tuple[int, int]] = []
        noted: list[tuple[Fraction, Fraction]] = []  # the notes' links: the text's copy of one is not a second link
        for part, base, in_note in [*((m.group(1), m.start(1), True) for m in notes), (rest, 0, False)]:
            for start, end, sides in _chains(part):
                values = [_value(side, max_digits) for side in sides]
                counted = stop is None or start_of_line + base + start < stop
                if values[-1] is not None and any(v is not None for v in values[:-1]):
                    read_spans.append((base + start, base + end))
                    if counted:
                        last = (values[-1], sides[-1].strip())
                if not any(_OPERATOR.search(side) for side in sides):
                    continue  # 72=72, or 0.5=50%: a restatement (it still says what was worked out), not a step
                skip_first = _cut_start(part, start, sides[0])
                remainder = _REMAINDER.match(part, end) is not None
                for i, b in enumerate(sides[1:]):
                    va, vb = values[i], values[i + 1]
                    if va is None or vb is None or (i == 0 and skip_first) or (remainder and i == len(sides) - 2):
                        continue
                    if in_note:
                        noted.append((va, vb))
                    elif (va, vb) in noted:  # 48/2 = <<48/2=24>>24: the note already counted this link
                        noted.remove((va, vb))
                        continue
                    verdicts.append(_holds(va, b, vb))
        cut = line if stop is None or stop >= offset else line[: max(0, stop - start_of_line)]
        last_eq = cut.rfind("=")
        if last_eq >= 0 and not any(a <= last_eq < b for a, b in read_spans):
            last = None
    return verdicts, last


def final_answer(response: str, max_digits: int = 30) -> tuple[str, Fraction, int] | None:
    """The last answer the response gives as (text, value, position), or None when it has none or it
    cannot be read as one value."""
    text = normalize(response)
    found = None
    for m in _ANSWER.finditer(text):
        found = m
    if found is None:
        return None
    segment = (found.group(1) if found.group(1) is not None else found.group(2)).strip()
    if "=" in segment:
        segment = segment.rsplit("=", 1)[1]
    run = re.match(r"\s*(-?[0-9.+\-*/()% ]*\d[0-9.+\-*/()% ]*)", segment)
    if not run:
        return None
    answer = run.group(1).strip()
    value = _value(answer, max_digits)
    return None if value is None else (answer, value, found.start())


def _answer_holds(last: tuple[Fraction, str], answer: tuple[str, Fraction, int]) -> bool:
    """The answer states the last value worked out; after `= 60%` it may read `60`, and `20%` may answer
    `= 0.2`."""
    (value, text), (written, answered, _) = last, answer
    return _holds(value, written, answered) or (
        text.endswith("%") and not written.endswith("%") and _holds(value * 100, written, answered)
    )


def verify_working(response: str, reference: str, params: dict) -> V.Verdict:
    spec = dict(params or {})
    try:
        ref = json.loads(reference) if reference and reference.strip().startswith("{") else {}
    except (ValueError, RecursionError):  # not a JSON object of settings: the reference is ignored
        ref = {}
    spec.update(ref if isinstance(ref, dict) else {})
    try:
        max_digits = int(spec.get("max_digits", 30))
    except (TypeError, ValueError, OverflowError):
        return V.error(f"working: max_digits must be a whole number, got {spec.get('max_digits')!r}")
    answer = final_answer(response, max_digits)
    verdicts, last = _read(normalize(response), max_digits, stop=answer[2] if answer else None)
    if not verdicts:
        return V.unparsed("no equation between arithmetic expressions in the response")
    if answer is not None and last is not None:
        verdicts.append(_answer_holds(last, answer))
    held = sum(verdicts)
    detail = f"{held} of {len(verdicts)} links hold"
    if held == len(verdicts):
        return V.correct(str(len(verdicts)), detail)
    return V.wrong(str(len(verdicts)), detail, score=held / len(verdicts))


def check_reference(reference: str, params: dict) -> str | None:
    return None
