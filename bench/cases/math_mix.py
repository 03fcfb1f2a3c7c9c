"""The realistic answer mix that bench/math_verdicts.py times: (gold, response, truth) rows.

Golds: about half plain numbers (integers, negatives, decimals, money amounts, large integers) and
half LaTeX or wrapped (fractions, percents, degrees, radicals and pi, polynomials, intervals and
unions, solution sets, points, numbers stored as `$42$` or `\\boxed{42}`, one-line solutions that
end in a box). Responses are written the way models and public datasets write them: Minerva's
"Final Answer: The final answer is $X$. I hope it is correct.", `\\boxed{}` inline or displayed,
Qwen's "**Final Answer**", GSM8K's "The answer is X." and "#### X", `答案是`, `**Answer:**`, a
`<think>` block that floats a tentative value before the answer, a reply in the support desk's own
language without a marker (`经核实，应退款 X 元。`, `一共是 X 元，已为您登记。`, `合计 2万元。`), a reply
wrapped in its chat template's special tokens (ChatML, Llama-3), a value restated in another unit
(`The conversion gives 2.5 kg, i.e. 2500 g.`); with currency, units, thousands
separators, `\\dfrac` and `\\frac34`, unicode minus, equivalent forms (`\\sqrt{8}` for `2\\sqrt{2}`,
`(x-3)(x+3)` for `x^2-9`, `3, 1` for `1, 3`).

About 45% of the rows are wrong, the way models are wrong: off by one, a flipped sign, an inverted
or mis-reduced fraction, another number from the working, a factor of two, a swapped point, a
wrong bracket, a missing root, a response cut off before any answer.

Truth is known by construction: a right row's answer is one of the gold's equal forms, a wrong
row's answer a value that differs from it. Rows whose truth depends on a grading convention are
left out rather than labelled to suit either side: rounded decimals for a fraction or an
irrational gold (`0.33` for 1/3, `2.83` for 2\\sqrt{2}), unevaluated expressions for a number gold
(`3 \\times 12` for 36), a percent against a gold written without one as a fraction (`0.25` for
`25\\%`, `25\\%` for `25`), and responses that give two different final answers (hedging).
Every row is its own problem with random values, so golds seldom repeat and a parse cache helps
neither side much (in training a group's responses share one gold; this mix does not model that).

with_real_endings adds real replies: the Chinese desk replies of tests/verifiers/cases/
real_model_endings.jsonl (a small model's own endings, labelled by a person; truth: labelled
correct), spread evenly through the mix (kind `real-model`, template `real-zh`).
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

REAL_ENDINGS = Path(__file__).resolve().parents[2] / "tests" / "verifiers" / "cases" / "real_model_endings.jsonl"
WRONG_RATE = 0.45
TRUNCATED_RATE = 0.03  # of all rows: cut off mid-working, no final answer (wrong)
NAMES = ["Janet", "Tom", "Maria", "Ken", "Aisha", "Li Wei", "Sofia", "Omar"]
ITEMS = ["apples", "books", "tickets", "marbles", "cookies", "boxes", "pencils", "cards"]
# how often each response form is drawn (the GSM8K forms only for plain-number answers)
TEMPLATE_WEIGHTS = {
    "minerva": 2,
    "boxed": 2,
    "boxed-display": 1,
    "qwen": 2,
    "the-answer-is": 2,
    "answer-bold": 1,
    "chinese": 1,
    "think": 2,
    "gsm8k-hash": 1,
    "stated-bold": 1,
    "desk-zh": 2,
    "chat-tokens": 2,
    "restated": 1,
}
DESK_ZH = [
    "经核实，应退款 {x} 元。",
    "一共是 {x} 元，已为您登记。",
    "因此，需要支付 ¥{x}。",
    "合计{x}元。",
    "您好，总价为 {x} 元，请确认。",
]
UNITS = ["", "", "", "apples", "miles", "cm", "minutes", "km"]


@dataclass(frozen=True)
class Row:
    gold: str
    response: str
    truth: bool
    kind: str  # the gold's kind (see KINDS)
    template: str  # the response's form


@dataclass(frozen=True)
class Problem:
    gold: str
    right: list[str]  # LaTeX forms equal to the gold
    wrong: list[str]  # LaTeX forms that differ from it
    steps: list[str]  # numbers the working mentions
    numeric: bool  # the answer is a plain number (GSM8K templates apply)
    unit: str = ""  # a unit the response may write after the number


def _dec(v: Fraction) -> str:
    """A terminating fraction as its shortest decimal."""
    s = f"{float(v):.6f}".rstrip("0").rstrip(".")
    assert Fraction(s) == v, v
    return s


def _terminates(v: Fraction) -> bool:
    d = v.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _sep(n: int) -> str:
    return f"{n:,}" if abs(n) >= 1000 else str(n)


def _numbers_only(gold: Fraction, values) -> list[str]:
    return [str(v) for v in dict.fromkeys(values) if v != gold]


# --- plain-number golds -------------------------------------------------------------------------
def k_integer(rng: random.Random) -> Problem:
    v = rng.randrange(2, 200) if rng.random() < 0.6 else rng.randrange(200, 5000)
    unit = rng.choice(UNITS)
    step = v + rng.choice([-1, 1]) * rng.randrange(2, 40)
    right = [str(v), str(v), _sep(v)] + ([f"{v:,}".replace(",", "{,}")] if v >= 1000 else [])
    wrong = _numbers_only(Fraction(v), [v + 1, v - 1, 2 * v, v // 2, step, v + 10])
    return Problem(str(v), right, wrong, [str(step)], True, unit)


def k_negative(rng: random.Random) -> Problem:
    v = -rng.randrange(1, 80)
    step = v - rng.randrange(2, 9)
    return Problem(str(v), [str(v)] * 5 + [f"−{-v}"], [str(-v), str(v + 1), str(v - 1), str(step)], [str(step)], True)


def k_decimal(rng: random.Random) -> Problem:
    den = rng.choice([2, 4, 5, 10, 100])
    v = Fraction(rng.randrange(1, 50 * den), den)
    if v.denominator == 1:
        v += Fraction(1, 2)
    unit = rng.choice(["", "", "km", "kg", "hours"])
    right = [_dec(v), _dec(v)] + ([_dec(v) + "0"] if len(_dec(v).split(".")[1]) == 1 else [])
    right += [f"\\frac{{{v.numerator}}}{{{v.denominator}}}"] if v.denominator < 10 else []
    step = v * rng.choice([2, 3, 4])
    wrong = [
        _dec(w)
        for w in dict.fromkeys([v + 1, v - Fraction(1, 10), v * 10, step, v + Fraction(1, 2)])
        if w != v and w > 0
    ]
    return Problem(_dec(v), right, wrong, [_dec(step)], True, unit)


def k_money(rng: random.Random) -> Problem:
    v = Fraction(rng.randrange(100, 250000), 100 if rng.random() < 0.6 else 1)
    cents = f"{float(v):,.2f}"
    plain = _dec(v) if v.denominator > 1 else str(v.numerator)
    right = [f"\\${cents}", f"\\${plain}", cents.replace(",", ""), plain, f"\\${cents}"]
    step = v + rng.randrange(1, 60)
    wrong_values = [v + 1, v - 1, step, v * 2, v + Fraction(1, 10)]
    wrong = [rng.choice([f"\\${float(w):,.2f}", f"{float(w):.2f}"]) for w in dict.fromkeys(wrong_values) if w != v]
    return Problem(plain, right, wrong, [f"{float(step):.2f}"], True, "dollars")


def k_large(rng: random.Random) -> Problem:
    v = rng.randrange(1, 999) * rng.choice([1000, 10000, 1000000]) + rng.choice([0, 0, rng.randrange(1, 999)])
    step = v // rng.choice([2, 4, 10])
    right = [f"{v:,}", f"{v:,}", str(v), f"{v:,}".replace(",", "{,}")]
    wrong = [f"{w:,}" for w in dict.fromkeys([v + 1000, v - 1, v * 10, step]) if w != v]
    return Problem(str(v), right, wrong, [f"{step:,}"], True)


# --- LaTeX and wrapped golds ----------------------------------------------------------------------
def _frac(v: Fraction, style: str = "frac") -> str:
    sign, v = ("-", -v) if v < 0 else ("", v)
    if v.denominator == 1:
        return f"{sign}{v.numerator}"
    return f"{sign}\\{style}{{{v.numerator}}}{{{v.denominator}}}"


def k_fraction(rng: random.Random) -> Problem:
    q = rng.randrange(2, 25)
    p = rng.randrange(1, 3 * q)
    while math.gcd(p, q) != 1:
        p = rng.randrange(1, 3 * q)
    v = Fraction(p, q) * (-1 if rng.random() < 0.2 else 1)
    a, b = abs(v.numerator), v.denominator
    s = "-" if v < 0 else ""
    right = [_frac(v), _frac(v, "dfrac"), f"{s}{a}/{b}", _frac(v)]
    right += [f"{s}\\frac{a}{b}"] if a < 10 and b < 10 else []
    right += [f"\\frac{{-{a}}}{{{b}}}"] if v < 0 else []
    right += [f"{s}\\frac{{{2 * a}}}{{{2 * b}}}"] if rng.random() < 0.2 else []
    right += [_dec(v)] if _terminates(v) else []
    wrong_values = [Fraction(b, a) * (1 if v > 0 else -1), v + Fraction(1, b), Fraction(a, b + 1), -v, 2 * v]
    wrong = [_frac(w) for w in dict.fromkeys(wrong_values) if w != v]
    gold = rng.choice([_frac(v), _frac(v), _frac(v, "dfrac")])
    return Problem(gold, right, wrong, [str(a), str(b)], False)


def k_percent(rng: random.Random) -> Problem:
    v = Fraction(rng.randrange(1, 100)) if rng.random() < 0.8 else Fraction(rng.randrange(1, 200), 2)
    d = _dec(v)
    right = [f"{d}\\%", f"{d}\\%", f"{d}%", f"{d} percent", f"{d}\\%"]
    wrong = [f"{_dec(w)}\\%" for w in dict.fromkeys([100 - v, v + 1, v - 1, 2 * v]) if w != v and w > 0]
    return Problem(f"{d}\\%", right, wrong, [str(rng.randrange(10, 400))], False)


def k_degrees(rng: random.Random) -> Problem:
    v = rng.choice([15, 30, 36, 40, 45, 54, 60, 72, 75, 90, 105, 108, 120, 135, 150])
    right = [f"{v}^\\circ", f"{v}^{{\\circ}}", f"{v}°", f"{v}^\\circ"]
    others = [180 - v, v + 10, 90 - v if v < 90 else v - 30, v // 2]
    wrong = [f"{w}^\\circ" for w in dict.fromkeys(others) if w != v]
    return Problem(f"{v}^\\circ", right, wrong, [str(180 - v)], False)


def k_wrapped_number(rng: random.Random) -> Problem:
    v = rng.randrange(-30, 2000)
    form = rng.choice(["${}$", "\\boxed{{{}}}", "${}$", "The answer is $\\boxed{{{}}}$."])
    right = [str(v), str(v), _sep(v), f"{v}.0" if rng.random() < 0.2 else str(v)]
    wrong = [str(w) for w in dict.fromkeys([v + 1, v - 1, -v, 2 * v]) if w != v]
    return Problem(form.format(v), right, wrong, [str(v + rng.randrange(2, 30))], True)


def _sqfree(rng: random.Random) -> int:
    return rng.choice([n for n in range(2, 60) if all(n % (k * k) for k in range(2, 8))])


def k_radical(rng: random.Random) -> Problem:
    a, b, q = rng.randrange(2, 30), _sqfree(rng), rng.randrange(2, 30)
    shape = rng.random()
    if shape < 0.45:  # a\sqrt{b}
        gold = f"{a}\\sqrt{{{b}}}"
        right = [gold, f"{a} \\sqrt{{{b}}}", f"\\sqrt{{{a * a * b}}}", f"{a}\\sqrt{b}" if b < 10 else gold, gold]
        wrong = [
            f"{a}\\sqrt{{{b + 1}}}",
            f"{a + 1}\\sqrt{{{b}}}",
            f"\\sqrt{{{a * b}}}",
            f"{a * b}",
            f"-{a}\\sqrt{{{b}}}",
        ]
    elif shape < 0.75:  # \frac{\sqrt{b}}{q}
        gold = f"\\frac{{\\sqrt{{{b}}}}}{{{q}}}"
        right = [
            gold,
            f"\\dfrac{{\\sqrt{{{b}}}}}{{{q}}}",
            f"\\frac{{1}}{{{q}}}\\sqrt{{{b}}}",
            f"\\sqrt{{{b}}}/{q}",
            gold,
        ]
        wrong = [
            f"\\frac{{\\sqrt{{{b}}}}}{{{q + 1}}}",
            f"\\frac{{{q}}}{{\\sqrt{{{b}}}}}",
            f"\\frac{{{b}}}{{{q}}}",
            f"\\frac{{\\sqrt{{{b + 1}}}}}{{{q}}}",
        ]
    else:  # rational multiples of pi
        k = rng.randrange(1, 12)
        while math.gcd(k, q) != 1:
            q = rng.randrange(2, 30)
        kp = "" if k == 1 else str(k)
        gold = f"\\frac{{{kp}\\pi}}{{{q}}}"
        right = [gold, f"\\dfrac{{{kp}\\pi}}{{{q}}}", f"{kp}\\pi/{q}", f"\\frac{{{k}}}{{{q}}}\\pi", gold]
        wrong = [
            f"\\frac{{{kp}\\pi}}{{{q + 1}}}",
            f"\\frac{{{2 * k}\\pi}}{{{q}}}",
            f"\\frac{{{q}}}{{{kp}\\pi}}",
            f"{k * q}\\pi",
        ]
    return Problem(gold, right, wrong, [str(a), str(b), str(a * a * b)], False)


def k_polynomial(rng: random.Random) -> Problem:
    shape = rng.random()
    if shape < 0.35:  # a difference of squares
        r = rng.randrange(2, 40)
        gold = f"x^2-{r * r}"
        right = [gold, f"x^2 - {r * r}", f"(x-{r})(x+{r})", f"-{r * r}+x^2", gold]
        wrong = [f"x^2+{r * r}", f"x^2-{r}", f"(x-{r})^2", f"x^2-{r * r + 1}", f"2x^2-{r * r}"]
    elif shape < 0.65:  # a factorable quadratic
        r, t = rng.sample(range(1, 15), 2)
        gold = f"x^2+{r + t}x+{r * t}"
        right = [gold, f"(x+{r})(x+{t})", f"(x+{t})(x+{r})", f"x^2 + {r + t}x + {r * t}", gold]
        wrong = [f"(x-{r})(x+{t})", f"(x+{r})(x-{t})", f"x^2+{r + t}x+{r + t}", f"x^2+{r * t}x+{r + t}"]
    else:  # a linear expression
        a, b = rng.randrange(2, 30), rng.randrange(1, 60)
        gold = f"{a}x+{b}"
        right = [gold, f"{a}x + {b}", f"{b}+{a}x", f"{a}x+{b}"]
        wrong = [f"{a}x-{b}", f"{a + 1}x+{b}", f"{a}x+{b + 1}", f"{b}x+{a}" if a != b else f"{a}x"]
    return Problem(gold, right, wrong, [str(rng.randrange(2, 50))], False)


def k_interval(rng: random.Random) -> Problem:
    lo, hi = sorted(rng.sample(range(-20, 21), 2))
    shape = rng.random()
    if shape < 0.2:  # a union around a gap, as MATH writes domains
        gold = f"(-\\infty,{lo})\\cup({hi},\\infty)"
        right = [gold, f"(-\\infty, {lo}) \\cup ({hi}, \\infty)", gold]
        wrong = [f"(-\\infty,{lo}]\\cup[{hi},\\infty)", f"({lo},{hi})", f"(-\\infty,{lo - 1})\\cup({hi},\\infty)"]
    elif shape < 0.4:  # a ray
        br = rng.choice("[(")
        gold = f"{br}{lo}, \\infty)"
        right = [gold, f"{br}{lo},\\infty)", f"\\left{br}{lo}, \\infty\\right)", gold]
        wrong = [f"{'(' if br == '[' else '['}{lo}, \\infty)", f"{br}{lo + 1}, \\infty)", f"(-\\infty, {lo}]"]
    else:
        left, right_br = rng.choice("[("), rng.choice("])")
        gold = f"{left}{lo}, {hi}{right_br}"
        right = [gold, f"{left}{lo},{hi}{right_br}", f"\\left{left}{lo}, {hi}\\right{right_br}", gold]
        flip_l, flip_r = "(" if left == "[" else "[", ")" if right_br == "]" else "]"
        wrong = [
            f"{flip_l}{lo}, {hi}{right_br}",
            f"{left}{lo}, {hi}{flip_r}",
            f"{left}{lo}, {hi + 1}{right_br}",
            f"{left}{lo - 1}, {hi}{right_br}",
        ]
    return Problem(gold, right, wrong, [str(lo), str(hi)], False)


def k_solutions(rng: random.Random) -> Problem:
    r1, r2 = rng.sample([x for x in range(-12, 13) if x], 2)
    if rng.random() < 0.25:
        r2 = Fraction(rng.choice([1, -1, 3, -3]), 2)
    s1, s2 = _frac(Fraction(r1)), _frac(Fraction(r2))
    gold = rng.choice([f"{s1}, {s2}", f"{s1}, {s2}", f"\\{{{s1}, {s2}\\}}"])
    right = [
        f"{s1}, {s2}",
        f"{s2}, {s1}",
        f"x = {s1}, {s2}",
        f"x={s1} \\text{{ or }} x={s2}",
        f"\\{{{s2}, {s1}\\}}",
        f"{s2}, {s1}",
    ]
    other = r2 + 1 if r2 + 1 != r1 else r2 + 2
    wrong = [
        f"{s1}, {_frac(-Fraction(r2))}",
        s1,
        s2,
        f"{s1}, {_frac(Fraction(other))}",
        f"{_frac(-Fraction(r1))}, {s2}",
    ]
    return Problem(gold, right, wrong, [str(r1 + r2), str(r1 * r2)], False)


def k_point(rng: random.Random) -> Problem:
    a, b = rng.sample(range(-15, 16), 2)
    gold = f"({a}, {b})"
    right = [gold, f"({a},{b})", f"\\left({a}, {b}\\right)", gold]
    wrong = [
        f"({b}, {a})",
        f"({a}, {-b})" if b else f"({a}, 1)",
        f"({a + 1}, {b})",
        f"({-a}, {b})" if a else f"(1, {b})",
    ]
    return Problem(gold, right, wrong, [str(a + b), str(a - b)], False)


def k_solution_text(rng: random.Random) -> Problem:
    """A MATH-style gold: the whole solution, its answer in a box at the end."""
    inner = rng.choice([k_fraction, k_radical, k_integer, k_point])(rng)
    core = inner.gold.replace("\\dfrac", "\\frac")
    gold = (
        f"The first part gives ${inner.steps[0]}$, and combining the parts as above, the answer is $\\boxed{{{core}}}$."
    )
    return Problem(gold, inner.right, inner.wrong, inner.steps, inner.numeric)


# weights: the first five (plain numbers) sum to 50, the rest to 50
KINDS = {
    "integer": (k_integer, 22),
    "negative": (k_negative, 5),
    "decimal": (k_decimal, 9),
    "money": (k_money, 9),
    "large": (k_large, 5),
    "fraction": (k_fraction, 12),
    "percent": (k_percent, 4),
    "degrees": (k_degrees, 2),
    "wrapped-number": (k_wrapped_number, 5),
    "solution-text": (k_solution_text, 4),
    "radical": (k_radical, 7),
    "polynomial": (k_polynomial, 4),
    "interval": (k_interval, 5),
    "solutions": (k_solutions, 4),
    "point": (k_point, 3),
}
PLAIN_KINDS = ("integer", "negative", "decimal", "money", "large")


# --- responses ----------------------------------------------------------------------------------
def _working(rng: random.Random, steps: list[str], numeric: bool, sentences: int) -> str:
    """Plausible working that mentions the problem's intermediate numbers (never an answer marker)."""
    out = []
    for i in range(sentences):
        x, y = rng.randrange(2, 60), rng.randrange(2, 30)
        step = steps[i % len(steps)]
        if numeric:
            name, item = rng.choice(NAMES), rng.choice(ITEMS)
            out.append(
                rng.choice(
                    [
                        f"{name} has {x} {item} and gets {y} more, so {x} + {y} = {x + y} {item}.",
                        f"Each pack holds {y}, so {x} packs hold {x} * {y} = {x * y}.",
                        f"That leaves {step} after the first step.",
                        f"Next, we subtract: {x + y} - {y} = {x}.",
                        f"So far the running total is {step}.",
                    ]
                )
            )
        else:
            out.append(
                rng.choice(
                    [
                        f"We have ${x}a + {y} = {step}$, so we isolate the variable.",
                        f"Multiplying both sides by ${y}$ gives ${y}x = {x * y}$.",
                        f"By the quadratic formula, $x = \\frac{{-b \\pm \\sqrt{{b^2-4ac}}}}{{2a}}$, "
                        f"with discriminant ${x * x - 4 * y}$.",
                        f"Note that $\\frac{{{x}}}{{{y}}}$ cannot be reduced further here, and ${step}$ appears again.",
                        f"Substituting $t = {step}$ into the expression, we get \\[ f(t) = t^2 - {x}t + {y}. \\]",
                    ]
                )
            )
    return " ".join(out) if rng.random() < 0.5 else "\n".join(out)


def _working_cn(rng: random.Random, steps: list[str]) -> str:
    out = []
    for _ in range(rng.randrange(2, 5)):
        x, y = rng.randrange(2, 60), rng.randrange(2, 30)
        out.append(
            rng.choice(
                [
                    f"先算 {x}+{y}={x + y}。",
                    f"每盒有 {y} 个，{x} 盒共有 {x}×{y}={x * y} 个。",
                    f"第一步后还剩 {steps[0]}。",
                    f"设未知数为 $x$，则 ${y}x={x * y}$。",
                ]
            )
        )
    return "".join(out) + "\n解：由题意可得结果。"


def _text(answer: str) -> str:
    """How an answer sits in running text: money as markdown `$18.90`, LaTeX in `$...$`."""
    if answer.startswith("\\$"):
        return "$" + answer[2:]
    if re.search(r"[\\^{}(\[]|\d[a-z]\b|\b[a-z]\s*=", answer):
        return f"${answer}$"
    return answer


def _respond(rng: random.Random, p: Problem, answer: str) -> tuple[str, str]:
    """(template name, response) for one answer string."""
    work = _working(rng, p.steps, p.numeric, rng.randrange(2, 6))
    t = _text(answer)
    if p.unit and not answer.startswith("\\$") and rng.random() < 0.6:
        answer, t = f"{answer}\\text{{ {p.unit}}}", f"{t} {p.unit}"
    forms = {
        "minerva": f"{work}\nFinal Answer: The final answer is ${answer}$. I hope it is correct.",
        "boxed": f"{work} Therefore, the answer is $\\boxed{{{answer}}}$.",
        "boxed-display": f"{work}\n\nSo we get\n\\[\n\\boxed{{{answer}}}\n\\]",
        "qwen": f"{work}\n\n**Final Answer**\n\\[ \\boxed{{{answer}}} \\]",
        "the-answer-is": f"{work}\nThe answer is {t}.",
        "answer-bold": f"{work}\n\n**Answer:** {t}",
        "chinese": f"{_working_cn(rng, p.steps)}\n所以答案是 {t}。"
        if rng.random() < 0.5
        else f"{_working_cn(rng, p.steps)}\n答案：{t}",
        "think": (
            f"<think>\n{_working(rng, p.steps, p.numeric, rng.randrange(4, 9))}\nHmm, so maybe it is "
            f"{_text(p.steps[0])}? Wait, let me check that again.\n{work}\n</think>\n\n"
            + (f"The answer is $\\boxed{{{answer}}}$." if rng.random() < 0.6 else f"**Answer:** {t}")
        ),
    }
    forms["chat-tokens"] = (
        f"<|im_start|>assistant\n{work}\n答案是 {t}<|im_end|>"
        if rng.random() < 0.5
        else f"<|start_header_id|>assistant<|end_header_id|>\n\n{work}\nThe answer is {t}.<|eot_id|>"
    )
    if p.numeric:
        forms["gsm8k-hash"] = f"{work}\n#### {t}"
        forms["stated-bold"] = f"{work}\nSo the total is **{t}**."
        if "\\" not in answer.replace("\\$", ""):
            amount = _wan(answer.replace("\\$", "").replace("{,}", ","), rng)
            forms["desk-zh"] = f"{_working_cn(rng, p.steps)}\n" + rng.choice(DESK_ZH).format(x=amount)
        if re.fullmatch(r"\d+", answer):
            kg = _dec(Fraction(int(answer), 1000))
            forms["restated"] = f"{work}\nThe conversion gives {kg} kg, i.e. {answer} g."
    names = sorted(forms)
    name = rng.choices(names, [TEMPLATE_WEIGHTS[n] for n in names])[0]
    return name, forms[name]


def _wan(amount: str, rng: random.Random) -> str:
    """`20000` as `2万` half the time (how a Chinese desk writes round amounts)."""
    if re.fullmatch(r"\d+", amount) and int(amount) % 10000 == 0 and rng.random() < 0.5:
        return f"{_dec(Fraction(int(amount), 10000))}万"
    return amount


def _truncated(rng: random.Random, p: Problem) -> str:
    work = _working(rng, p.steps, p.numeric, rng.randrange(2, 6))
    return work + rng.choice([" So the total is", " Now we need to compute $\\frac{", "\nTherefore,"])


def rows(n: int, seed: int) -> list[Row]:
    """n rows, reproducible from seed; each row draws from Random((seed, i))."""
    names = list(KINDS)
    weights = [KINDS[k][1] for k in names]
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        kind = rng.choices(names, weights)[0]
        p = KINDS[kind][0](rng)
        if rng.random() < TRUNCATED_RATE:
            out.append(Row(p.gold, _truncated(rng, p), False, kind, "truncated"))
            continue
        truth = rng.random() >= (WRONG_RATE - TRUNCATED_RATE) / (1 - TRUNCATED_RATE)
        template, response = _respond(rng, p, rng.choice(p.right if truth else p.wrong))
        out.append(Row(p.gold, response, truth, kind, template))
    return out


def real_endings(language: str) -> list[Row]:
    """The hand-labelled real replies in `language` (`zh`, `en`) as rows."""
    cases = [json.loads(line) for line in REAL_ENDINGS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        Row(c["gold"], c["response"], c["label"] == "correct", "real-model", f"real-{language}")
        for c in cases
        if c["language"] == language
    ]


def with_real_endings(rows: list[Row], language: str = "zh") -> list[Row]:
    """`rows` with the real replies in `language` spread evenly through them (so every timed chunk
    holds its share)."""
    real = real_endings(language)
    if not real:
        raise ValueError(f"no real replies in language {language!r} in {REAL_ENDINGS.name}; use zh or en")
    step = len(rows) / len(real)
    out, at = [], 0
    for i, row in enumerate(real):
        cut = round((i + 1) * step)
        out += rows[at:cut] + [row]
        at = cut
    return out + rows[at:]
