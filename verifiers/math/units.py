"""Quantities in a final sentence, and when several of them restate one value.

`The conversion gives 2.5 kg, i.e. 2500 g.` states one mass twice; `应退款88元，合计90元` states
two different amounts (a hedge). A quantity is a number with an optional currency sign, `万`/`亿`
style multiplier (read by numbers.py) and unit. Two quantities restate each other when
  - both carry a unit of the table below: same dimension and the same value in its base unit;
  - otherwise (no unit, or a unit outside the table, like `apples`): the same number
    (`50%` and `0.5` count as the same, as the numeric voter counts them).
The table is deliberately small, the conversions a desk or a word problem writes out:

    dimension  units (factor to the base unit)
    mass       t 1e6, kg / 千克 / 公斤 1000, 斤 500, g / 克 1, mg / 毫克 1/1000
    length     km / 公里 / 千米 1000, m / 米 1, cm / 厘米 1/100, mm / 毫米 1/1000
    time       day / 天 86400, h / hour / 小时 3600, min / minute / 分钟 60, s / second / 秒 1
    volume     L / 升 1000, mL / 毫升 1
    yuan       元 / 块 / yuan / RMB / CNY / ¥ 1, 角 1/10   (`万元` is 10^4 元 through `万`)
    dollar     dollar / USD / `\\$` 1, cent 1/100

`分` is left out: it is both a minute and a cent. Adjacent amounts of one dimension in falling
units (`1元5角`, `1 h 30 min`, `42 dollars and 50 cents`) are one compound amount (1.5 元, also read
in its last unit: 15 角). A number without a table unit keeps the word after it (`5 apples`): two
such words that differ (`5 apples, 5 pears`) are two values. A sentence restating one value more than
MAX_READINGS ways (`1 km = 1000 m = 100000 cm = 1000000 mm`) is treated as several values: each
reading is one more gold it could match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction

from .numbers import numbers_equal, read_number

MAX_READINGS = 3
MAX_QUANTITIES = 12  # a sentence with more numbers is a list, never one restated value

UNITS: dict[str, tuple[str, Fraction]] = {}


def _add(dimension: str, factor: Fraction | int, *names: str) -> None:
    for name in names:
        UNITS[name] = (dimension, Fraction(factor))


_add("mass", 10**6, "t", "tonne", "tonnes", "吨")
_add("mass", 1000, "kg", "kilogram", "kilograms", "千克", "公斤")
_add("mass", 500, "斤")
_add("mass", 1, "g", "gram", "grams", "克")
_add("mass", Fraction(1, 1000), "mg", "milligram", "milligrams", "毫克")
_add("length", 1000, "km", "kilometer", "kilometers", "kilometre", "kilometres", "公里", "千米")
_add("length", 1, "m", "meter", "meters", "metre", "metres", "米")
_add("length", Fraction(1, 100), "cm", "centimeter", "centimeters", "厘米")
_add("length", Fraction(1, 1000), "mm", "millimeter", "millimeters", "毫米")
_add("time", 86400, "day", "days", "天")
_add("time", 3600, "h", "hr", "hrs", "hour", "hours", "小时")
_add("time", 60, "min", "mins", "minute", "minutes", "分钟")
_add("time", 1, "s", "sec", "secs", "second", "seconds", "秒")
_add("volume", 1000, "L", "l", "liter", "liters", "litre", "litres", "升")
_add("volume", 1, "mL", "ml", "milliliter", "milliliters", "毫升")
_add("yuan", 1, "元", "块", "yuan", "RMB", "CNY", "¥")
_add("yuan", Fraction(1, 10), "角")
_add("dollar", 1, "dollar", "dollars", "USD", "\\$", "US$")
_add("dollar", Fraction(1, 100), "cent", "cents")

_LATIN = sorted((u for u in UNITS if u.isascii() and u[0].isalpha()), key=len, reverse=True)
_OTHER = sorted(
    (u for u in UNITS if not (u.isascii() and u[0].isalpha()) and u not in ("¥", "\\$", "US$")), key=len, reverse=True
)
_UNIT = "(?:" + "|".join(re.escape(u) for u in _LATIN) + r")(?![A-Za-z])|" + "|".join(re.escape(u) for u in _OTHER)
_QUANTITY = re.compile(
    r"(?:(?P<cur>¥|\\\$|US\$|\$(?=\s*\d))\s*)?"  # `(?P<cur>..)?\s*` would rescan every blank (quadratic)
    r"(?P<num>(?<![A-Za-z\d.])(?<!\d,)[-−]?(?>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?)"
    r"(?![\d/]|[.,]\d)(?!\s*(?:[eE][-+]?\d|\^|\*\*|\\times|\\cdot)))"
    r"(?P<pct>\s*%)?"
    r"(?P<mult>\s*(?:万亿|百万|千万|万|亿|千|(?:thousand|million|billion)(?![A-Za-z])))?"
    rf"(?:\s*(?P<unit>{_UNIT}))?"
)


@dataclass(frozen=True)
class Quantity:
    text: str  # as written: `2.5 kg`, `¥1,299.00`, `2万元`
    value: Fraction  # the number, multiplier applied, unit not
    percent: bool
    unit: str  # a UNITS key, or "" (none, or one outside the table)
    reading: str = ""  # a compound amount (`1元5角`) as one number in its first unit (`1.5`)
    alt: str = ""  # ... and in its last unit (`15`)
    noun: str = ""  # the word after a number without a table unit (`apples` in `5 apples`)

    def as_answer(self) -> str:
        """The text an answer compares: as written, or a compound amount's one number."""
        return self.reading or self.text

    def shown(self) -> str:
        """As written, with the word after it when it has no table unit (`5 apples`)."""
        return f"{self.text} {self.noun}" if self.noun else self.text


def quantities(text: str) -> list[Quantity]:
    """Every quantity in `text`, in order (numbers that do not read, like `1/0`, are skipped, and
    so are powers and exponents: `1e999` is not the quantity 1). Adjacent amounts of one dimension
    in falling units (`1元5角`, `1 h 30 min`, `42 dollars and 50 cents`) are one compound amount:
    a reader adds them (`合计 1 元 10 角` is 2 元, never 10)."""
    out: list[Quantity] = []
    start = end = -1
    for m in _QUANTITY.finditer(text):
        num = m.group("num").replace(",", "").replace("−", "-")
        number = read_number(num + (m.group("pct") or "") + (m.group("mult") or "").strip())
        if number is None or not number.finite:
            continue
        unit = m.group("unit") or {"¥": "¥", "\\$": "\\$", "US$": "US$", "$": "\\$"}.get(m.group("cur") or "", "")
        noun = "" if unit else _noun(text, m.end())
        q = Quantity(m.group(0).strip(), number.value, number.percent, unit, noun=noun)
        if out and _COMPOUND_JOIN.fullmatch(text[end : m.start()]) and (whole := _compound(out[-1], q)):
            q = replace(whole, text=text[start : m.end()].strip())
            out.pop()
        else:
            start = m.start()
        out.append(q)
        end = m.end()
        if len(out) > MAX_QUANTITIES:
            break
    return out


_NOUN = re.compile(r"\s*([A-Za-z]{2,})")
_NOT_NOUNS = {
    "and",
    "or",
    "is",
    "are",
    "in",
    "ie",
    "eg",
    "so",
    "to",
    "of",
    "which",
    "that",
    "as",
    "for",
    "by",
    "we",
    "the",
    "it",
    "total",
    "altogether",
    "each",
    "more",
    "than",
    "both",
}


def _noun(text: str, at: int) -> str:
    m = _NOUN.match(text, at)
    word = m.group(1).lower() if m else ""
    return "" if word in _NOT_NOUNS else word


_COMPOUND_JOIN = re.compile(r"\s*(?:and|又|零)?\s*")


def _compound(a: Quantity, b: Quantity) -> Quantity | None:
    """`a` and `b` as one amount when b's unit is a smaller unit of a's dimension, else None."""
    if a.unit not in UNITS or b.unit not in UNITS or a.percent or b.percent:
        return None
    (dim_a, fa), (dim_b, fb) = UNITS[a.unit], UNITS[b.unit]
    if dim_a != dim_b or fb >= fa:
        return None
    first = a.value + b.value * fb / fa
    return Quantity(f"{a.text} {b.text}", first, False, a.unit, _plain_number(first), _plain_number(first * fa / fb))


def _plain_number(value: Fraction) -> str:
    """A decimal when the value has one (`1.5`), else a fraction (`1/3`)."""
    den = value.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
    if not digits:
        return str(value.numerator)
    whole = str(abs(int(value * 10**digits))).rjust(digits + 1, "0")
    return ("-" if value < 0 else "") + whole[:-digits] + "." + whole[-digits:]


def same_value(a: Quantity, b: Quantity) -> bool:
    """Whether b restates a (see the module docstring)."""
    if a.unit in UNITS and b.unit in UNITS:
        (dim_a, fa), (dim_b, fb) = UNITS[a.unit], UNITS[b.unit]
        return dim_a == dim_b and not a.percent and not b.percent and a.value * fa == b.value * fb
    if (a.unit and b.unit and a.unit != b.unit) or (a.noun and b.noun and a.noun != b.noun):
        return False  # `3 yuan` and `3 dollars`, `3 apples` and `3 pears` are not one value
    return numbers_equal(read_number(_plain(a)), read_number(_plain(b)))


def _plain(q: Quantity) -> str:
    return f"{q.value.numerator}/{q.value.denominator}{'%' if q.percent else ''}"


def readings(found: list[Quantity]) -> list[Quantity] | None:
    """The distinct readings of ONE value when every quantity restates the first (at most
    MAX_READINGS of them), else None: the quantities are several values."""
    if not found or len(found) > MAX_QUANTITIES or not all(same_value(found[0], q) for q in found[1:]):
        return None
    distinct: list[Quantity] = []
    for q in found:
        if not any(q.value == d.value and q.percent == d.percent for d in distinct):
            distinct.append(q)
    return distinct if len(distinct) <= MAX_READINGS else None
