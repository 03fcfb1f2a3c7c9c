"""PII scrubbing: e-mail addresses, phone numbers, Chinese resident ID numbers, bank card numbers and
IP addresses in a row's question, reference and solution become typed placeholders.

    scrub_row({"question": "手机13812345678，退款多少？", "reference": "36", "solution": ""}, PII_KINDS)
    -> ({"question": "手机<PHONE>，退款多少？", "reference": "36", "solution": ""}, Counter({"phone": 1}))

The clean stage runs it when `cleaning.pii` is on and counts replacements by kind in its stats.
Matching runs on a half-width view of the text (same length), so `１３８…` and `ａ＠ｂ．ｃｏｍ` count.

What each kind is:
- email: local@domain.tld (ASCII addresses).
- phone: a mainland mobile `1[3-9]` + 9 digits (compact, or 3-4-4 with spaces or hyphens); a
  landline `0` + area code (10, 2x, or three digits) + a 7-8 digit number (or 3/4-4), the area
  code bare or in brackets, with an optional extension; either one after +86, 0086 or (+86); an
  international number, `+CC` or `00CC ` then 8-15 digits in all; and these national forms from
  elsewhere: North American `(555) 123-4567`, `555-123-4567`, `415.555.2671` (one separator
  throughout), each with an optional leading `1-` (`1-800-555-0199`); British `07700 900123` (five
  digits, a space or hyphen, six); Australian mobile `0412 345 678`. National numbers are matched
  only grouped as shown: written compact (`5551234567`, `07700900123`, `0412345678`) or grouped
  otherwise (`555 123 4567`), they are a bare digit run, as likely an order id or an amount, and are
  kept. Why these and no more: each group shape is distinctive (an area code in brackets, 3-3-4
  with one repeated separator, a leading 0 then 5+6 or 4-3-3), so dates (`2024-05-01`), versions
  (`1.2.3`, after a version label even `415.555.2671`), ISBNs and longer hyphen chains
  (`555-123-4567-89`) do not match. The cost: a subtraction written `555-123-4567` without spaces,
  math span or operator beside it reads as a phone (`555 - 123 - 4567` does not).
- id_number: an 18-character resident ID (GB 11643): area code, a real birth date, sequence and
  the ISO 7064 mod 11-2 check character.
- bank_card: 13-19 digits, compact or in groups of four, with a card network's prefix (UnionPay
  62, Visa 4, Mastercard 51-55 / 2221-2720, Amex 34/37, JCB 3528-3589, Discover 6011/644-649/65)
  and a valid Luhn check digit.
- ip_address: an IPv4 dotted quad, or an IPv6 address with at least three groups (`ipaddress`).

What is never touched (the near misses; tests/cleaning/test_pii.py holds the table):
- a number inside a longer token: `SO13812345678`, `SO-13812345678`, a 12-digit run, `v1.2.3.4`;
- amounts: `1,234,567.89`, `¥13812345678`, `13812345678元`, `12345678.90`;
- order numbers: a phone- or card-shaped number right after an order label in prose (订单号, 单号,
  运单号, order, No., SKU, tracking, invoice...) or as a key (`order_id=`, `orderId="`,
  `"order_no": "`, `order_number:`, `tracking_no=`, `'sku': `), and an IP after a version label
  (version, 版本);
- an ID with a wrong check character, a card number failing Luhn or without a network prefix,
  and 15-digit first-generation IDs (no check digit tells them from order numbers);
- math, by these rules:
  - a number inside a `$...$` / `\\(...\\)` / `\\[...\\]` span;
  - an operand of an operator sign (`13800138000 + 1`, `x = 13800138000`) whose other operand, a
    number, a one-letter variable or a bracket, is not itself PII: two PII-shaped numbers joined
    by a sign (`13812345678/13987654321`, a list of phones) are not math;
  - an operand of a word operator (plus, minus, times, multiplied by, divided by, divisible by,
    mod, modulo, 加, 加上, 减, 减去, 乘, 乘以, 除以) with a number, variable or bracket on its other side,
    which may be PII-shaped, since the word says arithmetic where a sign may separate a list:
    `13812345678 divided by 2`, `3加13812345678` (but `请加13812345678`, "add me", has none);
  - the argument of a function word before it (sum / product / difference / quotient / remainder
    / gcd / lcm / square / cube / factors / divisors / digits of or between, factor, factorize),
    the later items of its list included (`sum of 13812345678 and 13987654321`);
  - a number a predicate follows: prime (`Is N prime?`, `N is a prime number`, before a
    punctuation mark, `or`, `and` or the end), squared, cubed, factorial, divisible by, 的和, 的差,
    的积, 的商, 的余数, 的平方, 的因数, 的约数, 是质数, 是素数, 能被…整除, with a list before it (`A与B的和`);
  - a reference that is one bare number (a math answer).
  Other words do not make math: `tel=13812345678`, `call 13812345678 and 13987654321` are scrubbed.
  The category of a row does not decide it: an `arithmetic` refund question still holds the
  customer's phone.

A number kept anywhere in the row (as math or as a labelled order number) is kept in all three
fields, so a question, its reference (`cancel_order(order_id="13812345678")`) and the worked
solution stay consistent.

Why our own patterns and not a library: phonenumbers' matcher finds numbers per region but cannot
tell an arithmetic operand or an order id from a phone, which is most of what matters here;
Presidio needs spaCy models; python-stdnum has the mod 11-2 and Luhn checks, but each is a few
lines here, tested against published examples, and would be the package's only use of it. IP
addresses are validated by the standard library's `ipaddress`.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from .config import PII_KINDS
from .width import DELIMITED_MATH, FULL_WIDTH, HALF_WIDTH

__all__ = [
    "PII_KINDS",
    "PLACEHOLDERS",
    "PII_HINT",
    "scrub_row",
    "scrub_frame",
    "find_pii",
    "id_number_valid",
    "luhn_valid",
]

PLACEHOLDERS = {kind: f"<{kind.upper()}>" for kind in PII_KINDS}
# the half-width view keeps the full-width comma: in Chinese prose `１２３，０１０…` is a list, and
# as `123,010` it would read as a thousands separator
_VIEW_FROM, _VIEW_TO = zip(*((fw, hw) for fw, hw in zip(FULL_WIDTH, HALF_WIDTH) if fw != "，"))
_VIEW = str.maketrans(dict(zip(_VIEW_FROM, _VIEW_TO)))
FIELDS = ("question", "reference", "solution")
_DIGIT_KINDS = frozenset({"phone", "id_number", "bank_card"})

# A value can hold PII only if its half-width view matches this (a Rust regex, run by polars on
# every row): the other rows skip Python. tests/cleaning/test_pii.py checks that the vectorized
# path equals the per-row one, i.e. that the hint misses no match of the patterns below.
PII_HINT = (
    "@|[0-9]{3}[- )]*[0-9]{4}|[0-9]{3}\\.[0-9]{3}\\.[0-9]{4}|04[0-9]{2} [0-9]{3} [0-9]{3}"
    "|[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}|[0-9A-Fa-f]*:[0-9A-Fa-f]*:"
    "|(?:^|[^0-9A-Za-z)\\]}])\\+[0-9]|(?:^|[^0-9])00[1-9]"
)

# a digit token starts after none of: a letter or digit, an id or currency mark, a decimal point
# or thousands comma after a digit, a hyphen after a letter or digit (SO-123...), a currency sign
# and a space; it ends before none of: a letter or digit, '@', a decimal or thousands part, 元...
_LEFT = r"(?<![A-Za-z0-9_@#$¥￥€£\\])(?<![0-9][.,])(?<![A-Za-z0-9]-)(?<![$¥￥€£] )"
_RIGHT = r"(?![A-Za-z0-9_@])(?![.,][0-9])(?! ?[元块角分万亿%‰])"

_CN_CC = r"(?:(?:\+|00)86[- ]?|\(\+?86\)[- ]?)"
_MOBILE = r"1[3-9][0-9](?:[0-9]{8}|[- ][0-9]{4}[- ][0-9]{4})"
_EXT = r"(?:(?:-| ?(?:转|ext\.?) ?)[0-9]{1,5})?"
# national forms outside China, grouped only (a bare 10-11 digit run is as likely an id):
# North American (555) 123-4567, 555-123-4567, 415.555.2671, 1-800-555-0199; UK 07700 900123
# (5+6 digits); Australian mobile 0412 345 678
_NATIONAL = (
    r"(?:1[-. ]?)?(?:\([2-9][0-9]{2}\) ?[0-9]{3}[-. ]|[2-9][0-9]{2}(?P<sep>[-.])[0-9]{3}(?P=sep))"
    r"[0-9]{4}(?![-.][0-9])"
    r"|0[1-9][0-9]{3}[- ][0-9]{6}|04[0-9]{2} [0-9]{3} [0-9]{3}"
)


def _landline(trunk: str) -> str:
    """Area code (`trunk` is the 0 before it: required, or optional after +86) and number."""
    area3, area4 = "(?:10|2[0-9])", "[3-9][0-9]{2}"
    return (
        rf"(?:\({trunk}{area3}\)|{trunk}{area3})[- ]?[1-9][0-9]{{3}}[- ]?[0-9]{{4}}{_EXT}"
        rf"|(?:\({trunk}{area4}\)|{trunk}{area4})[- ]?[1-9][0-9]{{2,3}}[- ]?[0-9]{{4}}{_EXT}"
    )


_PATTERNS = {
    "email": re.compile(
        r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}"
        r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
        r"(?![A-Za-z0-9\-])"
    ),
    "ip_address": re.compile(
        r"(?<![0-9A-Za-z.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9A-Za-z]|\.[0-9])"
        r"|(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z:])"
    ),
    "id_number": re.compile(
        rf"{_LEFT}[1-8][0-9]{{5}}(?:18|19|20)[0-9]{{2}}(?:0[1-9]|1[0-2])"
        rf"(?:0[1-9]|[12][0-9]|3[01])[0-9]{{3}}[0-9Xx]{_RIGHT}"
    ),
    "bank_card": re.compile(
        rf"{_LEFT}(?:[2-6][0-9]{{12,18}}|[2-6][0-9]{{3}}(?:[- ][0-9]{{4}}){{2,3}}"
        rf"(?:[- ][0-9]{{1,3}})?|3[47][0-9]{{2}}[- ][0-9]{{6}}[- ][0-9]{{5}}){_RIGHT}"
    ),
    "phone": re.compile(
        rf"{_LEFT}(?:{_CN_CC}(?:{_MOBILE}|{_landline('0?')})|{_MOBILE}|{_landline('0')}"
        rf"|\+(?!86)[1-9][0-9]{{0,2}}(?:[- .]?(?:\([0-9]{{1,4}}\)|[0-9]{{1,4}})){{2,6}}"
        rf"|00(?!86)[1-9][0-9]{{0,2}}[- ](?:[- .]?(?:\([0-9]{{1,4}}\)|[0-9]{{1,4}})){{2,6}}"
        rf"|{_NATIONAL}){_RIGHT}"
    ),
}
_PRIORITY = {"email": 0, "ip_address": 1, "id_number": 2, "bank_card": 3, "phone": 4}
# an order label in prose (订单号：, order no., SKU) or as a key (order_id=, orderId=", "order_no": ")
_ORDER_LABEL = re.compile(
    r"(?:订单|单号|编号|运单|快递单|交易号|流水号|order|sku|tracking|invoice|no\.)"
    r"(?:[ _-]?(?:号码|号|id|no\.?|num|number|#))?"
    r"(?:[ ]*[:：#=]?[ ]*|[\"']?[ ]*[:=][ ]*[\"']?)$",
    re.IGNORECASE,
)
_VERSION_LABEL = re.compile(r"(?:version|ver\.?|版本号?)[ ]*[:：]?[ ]*$", re.IGNORECASE)
_MATH_SPAN = re.compile(rf"\$\$.+?\$\$|\$(?![ \n])[^$\n]+?(?<![ \n])\$(?![0-9])|{DELIMITED_MATH}", re.DOTALL)
_OPERATORS = frozenset("+-*/=<>^×÷≤≥≠±")
# math words (the module docstring's rule): a word operator needs an operand on its other side;
# a function word before a number (`sum of`, also the later items of its list) or a predicate
# after it (`prime`, `的和`) makes it math on its own
_WORD_OP = (
    r"(?:(?<![A-Za-z])(?:plus|minus|times|multiplied by|(?:is )?divided by|(?:is )?divisible by"
    r"|modulo|mod)(?![A-Za-z])|加上|加|减去|减|乘以|乘|除以)"
)
_WORD_OP_BEFORE = re.compile(rf"{_WORD_OP}[ ]*$", re.IGNORECASE)
_WORD_OP_AFTER = re.compile(rf"[ ]*{_WORD_OP}", re.IGNORECASE)
_JOIN = r"(?:and|与|和|及|、|,)"
_LIST = rf"(?:[0-9][0-9., ]*{_JOIN}[ ]*)"
_FUNCTION_BEFORE = re.compile(
    r"(?<![A-Za-z])(?:(?:sum|product|difference|quotient|remainder|gcd|lcm|square|cube|square root"
    r"|cube root|factorial|factors|prime factors|divisors|digits)[ ]+(?:of|between)"
    rf"|factori[sz]e|factor)[ ]*{_LIST}?$",
    re.IGNORECASE,
)
_PREDICATE_AFTER = re.compile(
    rf"[ ]*(?:{_JOIN}[ ]*[0-9][0-9., ]*)?的(?:和|差|积|乘积|商|余数|最大公约数|最小公倍数)"
    r"|[ ]*(?:的(?:平方根?|立方|因数|约数|质因数|因子|阶乘)|是(?:不是)?(?:质数|素数)|是否为?(?:质数|素数)"
    r"|能?被[ ]*[0-9]+[ ]*整除|(?:is )?(?:a )?prime(?: number)?(?=[ ]*(?:[?？.。,，;!]|$|or |and ))|squared|cubed|factorial)",
    re.IGNORECASE,
)
_ID_WEIGHTS = [2 ** (17 - i) % 11 for i in range(17)]  # 7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2


def id_number_valid(text: str) -> bool:
    """An 18-character resident ID (GB 11643-1999): a real birth date and the mod 11-2 check."""
    if len(text) != 18 or not text[:17].isdigit():
        return False
    try:
        datetime.date(int(text[6:10]), int(text[10:12]), int(text[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(text[:17], _ID_WEIGHTS))
    return "10X98765432"[total % 11] == text[17].upper()


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check that every payment card number carries in its last digit."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card_network(d: str) -> bool:
    n, two, three, four = len(d), int(d[:2]), int(d[:3]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if 3528 <= four <= 3589 or two == 62 or four == 6011 or 644 <= three <= 649 or two == 65:
        return 16 <= n <= 19
    return False


def _valid(kind: str, text: str, digits: str) -> bool:
    if kind == "id_number":
        return id_number_valid(text)
    if kind == "bank_card":
        return 13 <= len(digits) <= 19 and _card_network(digits) and luhn_valid(digits)
    if kind == "phone" and (
        text.startswith("+") and not text.startswith("+86") or text.startswith("00") and not text.startswith("0086")
    ):
        return 8 <= len(digits) <= 15  # E.164: at most 15 digits with the country code
    if kind == "ip_address":
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            return False
        return address.version == 4 or sum(1 for g in text.split(":") if g) >= 3
    return True


@dataclass(frozen=True)
class Hit:
    """One PII match in a value: where, what kind, its digits (for digit kinds), and why it is kept
    where it stands: "math" (an operand, a math word's, or inside a math span), "order" (after an
    order label or key), or "" (scrubbed unless its digits are kept elsewhere in the row)."""

    start: int
    end: int
    kind: str
    digits: str
    keep: str


def _near(view: str, i: int, step: int) -> int:
    """Index of the first non-space character from i going by step (-1 or len when none)."""
    while 0 <= i < len(view) and view[i] in " \t":
        i += step
    return i


def _operand_at(view: str, i: int, step: int, taken: list[tuple[int, int]]) -> bool:
    """Whether an operand (a number, a one-letter variable, a bracket) that is not one of the
    `taken` PII spans stands at i."""
    if not 0 <= i < len(view) or any(s <= i < e for s, e in taken):
        return False
    ch = view[i]
    if ch in (")]}" if step < 0 else "([{"):
        return True
    if ch.isascii() and ch.isdigit():
        return True
    if ch.isascii() and ch.isalpha():  # a variable, not a word such as tel=
        j = i + step
        return not (0 <= j < len(view) and view[j].isascii() and view[j].isalpha())
    return False


def _math_words(view: str, start: int, end: int) -> bool:
    """A math word makes the number at [start, end) math (see the module docstring)."""
    before, after = view[max(0, start - 60) : start], view[end : end + 60]
    if _FUNCTION_BEFORE.search(before) or _PREDICATE_AFTER.match(after):
        return True
    # a word operator says arithmetic, so the operand across it may itself look like PII
    op = _WORD_OP_BEFORE.search(before)
    if op and _operand_at(view, _near(view, start - len(before) + op.start() - 1, -1), -1, []):
        return True
    op = _WORD_OP_AFTER.match(after)
    return bool(op) and _operand_at(view, _near(view, end + op.end(), 1), 1, [])


def _is_math(view: str, start: int, end: int, taken: list[tuple[int, int]], spans: list[tuple[int, int]]) -> bool:
    if any(s <= start and end <= e for s, e in spans):
        return True
    if view[start] == "+":  # `5 +14155552671` is a sum, not a dialling prefix
        before = _near(view, start - 1, -1)
        if before >= 0 and _operand_at(view, before, -1, taken):
            return True
    left = _near(view, start - 1, -1)
    if left >= 0 and view[left] in _OPERATORS and _operand_at(view, _near(view, left - 1, -1), -1, taken):
        return True
    right = _near(view, end, 1)
    if right < len(view) and view[right] in _OPERATORS and _operand_at(view, _near(view, right + 1, 1), 1, taken):
        return True
    return _math_words(view, start, end)


def find_pii(view: str, kinds: Iterable[str] = PII_KINDS) -> list[Hit]:
    """The PII in one half-width value, left to right, without overlaps (see the module docstring)."""
    found = []
    for kind in kinds:
        for m in _PATTERNS[kind].finditer(view):
            text = m.group(0)
            digits = "".join(ch for ch in text if ch.isdigit()) if kind in _DIGIT_KINDS else ""
            if not _valid(kind, text, digits):
                continue
            before = view[max(0, m.start() - 24) : m.start()]
            if kind in ("ip_address", "phone") and "." in text and _VERSION_LABEL.search(before):
                continue
            order = kind in ("phone", "bank_card") and _ORDER_LABEL.search(before) is not None
            found.append((m.start(), -(m.end() - m.start()), _PRIORITY[kind], m.end(), kind, digits, order))
    taken: list[tuple[int, int]] = []
    chosen = []
    for start, _, _, end, kind, digits, order in sorted(found):
        if taken and start < taken[-1][1]:
            continue
        taken.append((start, end))
        chosen.append((start, end, kind, digits, order))
    spans = [m.span() for m in _MATH_SPAN.finditer(view)] if any(c[2] in _DIGIT_KINDS for c in chosen) else []
    return [
        Hit(
            s, e, k, d, "order" if order else "math" if k in _DIGIT_KINDS and _is_math(view, s, e, taken, spans) else ""
        )
        for s, e, k, d, order in chosen
    ]


def scrub_row(values: dict[str, str], kinds: Iterable[str] = PII_KINDS) -> tuple[dict[str, str], Counter]:
    """Replace the PII of one row's text fields; returns the new values and counts by kind.

    A digit-kind match whose digits are kept anywhere in the row (math: an operand, a math word's
    operand, a math span, or the whole reference; or an order number after its label or key) is
    kept in every field, so a question, its reference and the worked solution stay consistent."""
    kinds = tuple(kinds)
    views = {f: (v or "").translate(_VIEW) for f, v in values.items()}
    hits = {f: find_pii(view, kinds) for f, view in views.items()}
    keep = {h.digits for found in hits.values() for h in found if h.keep}
    reference = views.get("reference", "").strip()
    keep |= {
        h.digits
        for h in hits.get("reference", [])
        if h.kind in _DIGIT_KINDS and views["reference"][h.start : h.end] == reference
    }
    out, counts = {}, Counter()
    for field, value in values.items():
        pieces, last = [], 0
        for h in hits[field]:
            if h.kind in _DIGIT_KINDS and h.digits in keep:
                continue
            pieces += [value[last : h.start], PLACEHOLDERS[h.kind]]
            last = h.end
            counts[h.kind] += 1
        out[field] = "".join(pieces) + value[last:] if pieces else value
    return out, counts


def scrub_frame(df: pl.DataFrame, kinds: Iterable[str] = PII_KINDS) -> tuple[pl.DataFrame, dict[str, int], int]:
    """Scrub the text columns of `df`: (the frame, counts by kind, rows changed).

    Only rows where some field matches PII_HINT (one vectorized scan) go through Python."""
    kinds = tuple(kinds)
    cols = [f for f in FIELDS if f in df.columns]
    counts: Counter = Counter()
    if not cols or df.height == 0:
        return df, {k: 0 for k in kinds}, 0
    hint = pl.repeat(False, df.height, dtype=pl.Boolean, eager=True)
    for f in cols:
        half = df[f].cast(pl.String).fill_null("").str.replace_many(list(_VIEW_FROM), list(_VIEW_TO))
        hint = hint | half.str.contains(PII_HINT)
    idx = hint.arg_true()
    if idx.len() == 0:
        return df, {k: 0 for k in kinds}, 0
    rows = df.select(cols).gather(idx).to_dicts()
    new_rows, changed = [], 0
    for row in rows:
        scrubbed, found = scrub_row({f: row[f] or "" for f in cols}, kinds)
        counts.update(found)
        changed += bool(found)
        new_rows.append({f: None if row[f] is None else scrubbed[f] for f in cols})
    updates = [df[f].cast(pl.String).clone().scatter(idx, [r[f] for r in new_rows]).alias(f) for f in cols]
    return df.with_columns(updates), {k: counts.get(k, 0) for k in kinds}, changed
