"""Number semantics of the math verifier: read one normalized answer as an exact number, or not.

What counts as a number (everything else is an expression, a collection or text):
  integers and decimals (`36`, `-0.5`, `.4`, `36.00`), scientific `1.2e5` and `1.2\\times10^{5}`,
  fractions `3/4` and `\\frac{3}{4}`, mixed numbers `1\\frac{1}{2}` and `1 1/2`, a decimal comma
  where it cannot be a thousands separator (`2,74`, `0,111`; `1,234` is one thousand two hundred
  thirty-four, `2,3` is two values), multipliers `万` (10^4), `亿` (10^8), `千`, `百万`,
  `thousand`, `million`, `billion`, a percent sign or word, and a trailing unit or currency word.
Values are exact `Fraction`s: integers compare exactly however large (`4410023918` is not
`4410023917`), decimals exactly after normalization (`36.00` is `36`); a tolerance applies only
when the rule's params ask for one (`rel_tol`, `abs_tol`). A gold with no finite decimal (`1/12`)
matches its expansion written to a double's 15 significant digits (`0.0833333333333333`), the
only decimal that can stand for it exactly as printed; `0.0833` stays different. There is no
float anywhere.
Infinities and NaN (`\\infty`, `oo`, `inf`, `nan`, `∞`) read as NON_FINITE and literals too large
to hold exactly (`1e999999`) as OVERFLOW: neither ever equals a finite number, and the text
voter alone can match them to a gold spelled the same way.
Clock times (`15:45`, `3:45 pm`, `下午3点45分`) are not numbers: read_time compares them as times
of day, a 12-hour time without am/pm standing for either reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

MAX_EXPONENT = 4000  # 10**4000 is exact and cheap; beyond it a literal is OVERFLOW
PRINTED_DIGITS = 15  # a decimal this long for a gold with no finite decimal is that gold printed
NON_FINITE = "non-finite"
OVERFLOW = "overflow"

_INT = r"\d+"
_DEC = r"(?:\d+\.?\d*|\.\d+)"
_PLAIN = re.compile(rf"^([-+]?)({_DEC})(?:[eE]([-+]?\d+))?$")
_DECIMAL_COMMA = re.compile(r"^([-+]?)(\d+),(\d+)$")
_RATIO = re.compile(rf"^([-+]?)({_DEC})\s*/\s*([-+]?{_DEC})$")
_FRAC = re.compile(rf"^([-+]?)\\frac\{{\s*([-+]?{_DEC})\s*\}}\{{\s*([-+]?{_DEC})\s*\}}$")
_MIXED = re.compile(
    rf"^([-+]?)({_INT})\s*\\frac\{{\s*({_INT})\s*\}}\{{\s*({_INT})\s*\}}$|^([-+]?)({_INT})\s+({_INT})/({_INT})$"
)
_SCI = re.compile(rf"^([-+]?{_DEC})\s*(?:\\times|\\cdot|\*|x|×)\s*10\s*\^\s*\{{?\s*([-+]?\d+)\s*\}}?$")
_NONFINITE = re.compile(r"^[-+]?\s*(?:\\infty|∞|oo|inf|infinity|nan|\\text\{?nan\}?)$", re.IGNORECASE)
_PERCENT = re.compile(r"^(.*?)\s*(?:%|percent|pct|per\s*cent)$", re.IGNORECASE)
_PERCENT_CN = re.compile(r"^百分之\s*(.+)$")
_MULT = {
    "万": 10**4,
    "亿": 10**8,
    "千": 10**3,
    "百万": 10**6,
    "千万": 10**7,
    "万亿": 10**12,
    "thousand": 10**3,
    "million": 10**6,
    "billion": 10**9,
    "trillion": 10**12,
}
_MULT_RE = re.compile(r"^(.*?\d)\s*(万亿|百万|千万|万|亿|千|thousand|million|billion|trillion)$", re.IGNORECASE)
# A trailing unit: a word, an abbreviation or CJK measure words (`36 apples`, `3 cm`, `36个`).
# A word needs a space before it (`36 apples`); abbreviations may touch the number (`3cm`, `5m²`),
# so `2x` and `2ab` stay expressions.
_ABBR = r"(?:cm|mm|km|kg|mg|ml|mL|m|g|s|h|L|min|hr|hrs|sec|ft|in|lb|lbs|oz|kWh|W|V|Hz)"
_UNIT = re.compile(
    rf"^(.*?[\d}}])(?:\s+[A-Za-z]{{2,}}(?:\s+[A-Za-z]+)*|\s*{_ABBR}(?:\^?[23]|²|³)?(?:/{_ABBR})?|"
    r"\s*[\u4e00-\u9fff]+)$"
)


@dataclass(frozen=True)
class Number:
    """value is a Fraction, or NON_FINITE / OVERFLOW; percent: written with a percent sign."""

    value: Fraction | str
    percent: bool = False

    @property
    def finite(self) -> bool:
        return isinstance(self.value, Fraction)


def read_number(s: str) -> Number | None:
    """The number that normalized answer `s` is, or None when it is not a single number."""
    s = s.strip()
    if not s or len(s) > 200:
        return None
    if _NONFINITE.match(s):
        return Number(NON_FINITE)
    percent = False
    if m := _PERCENT.match(s) or _PERCENT_CN.match(s):
        s, percent = m.group(1).strip(), True
    if s.startswith("(") and s.endswith(")") and "," not in s:  # `\left( \frac{1}{3} \right)`
        s = s[1:-1].strip()
    value = _value(s)
    if value is None and (m := _MULT_RE.match(s)):
        base = _value(m.group(1).strip())
        if isinstance(base, Fraction):
            value = base * _MULT[m.group(2).lower()]
    if value is None and not percent and (m := _UNIT.match(s)):
        value = _value(m.group(1).strip())
        if value is None and (mm := _MULT_RE.match(m.group(1).strip())):
            base = _value(mm.group(1).strip())
            value = base * _MULT[mm.group(2).lower()] if isinstance(base, Fraction) else None
    return None if value is None else Number(value, percent)


def _value(s: str) -> Fraction | str | None:
    if re.search(r",\s", s):
        return None  # `8, 10` is two values, never the decimal 8.10
    s = s.replace(" ", "") if not _MIXED.match(s) else s
    try:
        if m := _PLAIN.match(s):
            return _scaled(m.group(1), m.group(2), m.group(3))
        if m := _DECIMAL_COMMA.match(s):
            whole, frac = m.group(2), m.group(3)
            if len(frac) == 2 or whole == "0" or len(frac) > 3:
                return _signed(m.group(1), Fraction(f"{whole}.{frac}"))
            return None  # `1,234` was joined by normalize; `2,3` is two values
        if m := _MIXED.match(s):
            g = m.groups()
            sign, whole, num, den = (g[0], g[1], g[2], g[3]) if g[1] is not None else (g[4], g[5], g[6], g[7])
            num, den = int(num), int(den)
            if den == 0 or num >= den:
                return None  # `2\frac{3}{2}` is not a mixed number
            return _signed(sign, int(whole) + Fraction(num, den))
        if m := _RATIO.match(s):
            return _signed(m.group(1), Fraction(m.group(2)) / Fraction(m.group(3)))
        if m := _FRAC.match(s):
            return _signed(m.group(1), Fraction(m.group(2)) / Fraction(m.group(3)))
        if m := _SCI.match(s):
            mant = _PLAIN.match(m.group(1))
            return _scaled(mant.group(1), mant.group(2), m.group(2)) if mant else None
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _scaled(sign: str, digits: str, exponent: str | None) -> Fraction | str:
    exp = int(exponent or 0)
    if abs(exp) > MAX_EXPONENT:
        return OVERFLOW
    return _signed(sign, Fraction(digits) * Fraction(10) ** exp)


def _signed(sign: str, value: Fraction) -> Fraction:
    return -value if sign == "-" else value


_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?|上午|下午)?$", re.IGNORECASE)
_TIME_CN = re.compile(r"^(上午|下午|晚上)?\s*(\d{1,2})\s*[点時时]\s*(?:(\d{1,2})\s*分|半)?$")


def read_time(s: str) -> set[int] | None:
    """A clock time as the set of seconds after midnight it can mean (`3:45` is 03:45 or 15:45;
    `3:45 pm` and `15:45` only 15:45), or None when `s` is not a clock time."""
    s = s.strip()
    if m := _TIME.match(s):
        hour, minute, second, half = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), (m.group(4) or "")
    elif m := _TIME_CN.match(s):
        half, hour = m.group(1) or "", int(m.group(2))
        minute, second = (30 if s.endswith("半") else int(m.group(3) or 0)), 0
    else:
        return None
    if minute > 59 or second > 59 or hour > 24:
        return None
    base = minute * 60 + second
    half = half.lower().replace(".", "")
    if half in ("pm", "下午", "晚上"):
        return {((hour % 12) + 12) * 3600 + base} if hour <= 12 else None
    if half in ("am", "上午"):
        return {(hour % 12) * 3600 + base} if hour <= 12 else None
    if 1 <= hour <= 12:
        return {hour * 3600 + base, ((hour % 12) + 12) * 3600 + base} if hour != 12 else {12 * 3600 + base}
    return {(hour % 24) * 3600 + base}


def numbers_equal(
    gold: Number, pred: Number, rel_tol: float = 0.0, abs_tol: float = 0.0, percent_as_fraction: bool = True
) -> bool:
    """Exact unless a tolerance is given; never equal when either side is not finite.
    A percent on one side: `50%` matches `50`, and `0.5` when percent_as_fraction."""
    if not (gold.finite and pred.finite):
        return False
    g, p = gold.value, pred.value
    if close(g, p, rel_tol, abs_tol) or _printed_expansion(g, p):
        return True
    if gold.percent == pred.percent or not percent_as_fraction:
        return False
    return close(g / 100 if gold.percent else g, p / 100 if pred.percent else p, rel_tol, abs_tol)


def _places(x: Fraction) -> int | None:
    """Decimal places that write `x` exactly, None when its expansion never ends (`1/12`)."""
    den, places = x.denominator, 0
    for prime in (2, 5):
        while den % prime == 0:
            den //= prime
    if den != 1:
        return None
    while (x * 10**places).denominator != 1:
        places += 1
    return places


def _printed_expansion(gold: Fraction, pred: Fraction) -> bool:
    """`0.0833333333333333` for `1/12`: a gold with no finite decimal, written to at least
    PRINTED_DIGITS significant digits (a double's worth) and cut there, rounded or truncated;
    `0.083333` (a rounding) stays different unless a tolerance is given."""
    places = _places(pred)
    if places is None or _places(gold) is not None:
        return False
    digits = len(str(abs(pred.numerator * 10**places // pred.denominator)))
    scaled = gold * 10**places
    return digits >= PRINTED_DIGITS and pred * 10**places in (int(scaled), round(scaled))


def close(a: Fraction, b: Fraction, rel_tol: float | Decimal = 0, abs_tol: float | Decimal = 0) -> bool:
    """Equal, or within a tolerance the rule asked for; exact arithmetic throughout. The one number
    comparison of the verifiers: the math verifier's and the tool-call verifier's arguments."""
    if a == b:
        return True
    diff = abs(a - b)
    return bool(
        (abs_tol and diff <= Fraction(abs_tol)) or (rel_tol and diff <= Fraction(rel_tol) * max(abs(a), abs(b)))
    )
