"""Short-answer arithmetic tasks of a retail support desk, in English and Chinese.

Four categories, all checked by the `math` verifier with the gold number as reference:
`arithmetic` (refunds, restocking fees, change, store credit), `discount` (percent off, coupons),
`order_total` (sums of lines, shipping) and `unit_conversion` (kg/g, m/cm, dozens, boxes).

Every question is built from a few shared skills at graded depth, so what a model learns on one
prompt carries over to others: `q*p` (a quantity of 1-9 times a catalog price), `a+b` and `a-b`
(two- and three-digit sums and differences), `p*d%` (10/20/25/50% of a round price) and a unit
factor (x1000, x100, x12, a box size). Depth 1 is one of them (a refund of `q` items at `p`), depth
2 chains two (a refund net of a restocking fee: `q*p-f`), depth 3 three (two order lines plus
shipping). The worked reply is one compact line of that arithmetic (`3*12-5=36-5=31`) plus `Answer: N`
(English) or `答案: N` (Chinese), at most ~40 characters, so a ~1M-parameter character model can
learn it within a short budget. Each generator takes a `random.Random` and returns a `Task`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from catalog import CUSTOMERS_EN, CUSTOMERS_ZH, PRODUCTS

ANSWER_PREFIX = {"en": "Answer: ", "zh": "答案: "}


@dataclass(frozen=True)
class Task:
    """One clean task before it is written to a raw log (and possibly made messy)."""

    category: str
    lang: str  # en | zh
    question: str
    answer: str  # the reference, as the verifiers contract wants it
    solution: str  # a worked reply the category's verifier accepts
    depth: int = 1  # how many shared skills the answer chains (math tasks)


def fmt(x: float | Fraction | int) -> str:
    """12 -> '12', 12.5 -> '12.5', 0.25 -> '0.25' (no float noise)."""
    value = Fraction(x).limit_denominator(1000)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.4f}".rstrip("0").rstrip(".")


def _cheap(rng: random.Random, max_price: int = 50) -> tuple:
    return rng.choice([p for p in PRODUCTS if p[4] <= max_price])


def _pname(rng: random.Random, product: tuple, lang: str) -> str:
    """The product's name as the desk writes it: Chinese tickets often keep the English name."""
    return product[1] if lang == "en" or rng.random() < 0.12 else product[2]


def _who(rng: random.Random, lang: str) -> str:
    return rng.choice(CUSTOMERS_EN if lang == "en" else CUSTOMERS_ZH)


def _order_no(rng: random.Random) -> str:
    return f"SO{rng.randint(10000, 99999)}"


def _task(category: str, lang: str, question: str, work: str, answer, depth: int) -> Task:
    ans = fmt(answer)
    return Task(category, lang, question, ans, f"{work}\n{ANSWER_PREFIX[lang]}{ans}", depth)


def _pick(rng: random.Random, lang: str, en: list[str], zh: list[str]) -> str:
    return rng.choice(en if lang == "en" else zh)


def arithmetic(rng: random.Random, lang: str) -> Task:
    """Refunds (q*p; net of a restocking fee: q*p-f), change (a-b) and store credit (a+b)."""
    kind = rng.choice(["refund", "refund", "fee", "fee", "change", "credit"])
    name, oid = _who(rng, lang), _order_no(rng)
    product = _cheap(rng)
    p, prod = product[4], _pname(rng, product, lang)
    q = rng.randint(1, 9)
    if kind == "refund":
        question = _pick(
            rng,
            lang,
            [
                f"Customer {name} returned {q} {prod} bought at {p} yuan each. How much should we refund?",
                f"Refund request on order {oid}: {q} x {prod} at {p} yuan each, all returned. Refund amount?",
                f"{name} sends back {q} {prod} ({p} yuan each). What is the refund in yuan?",
            ],
            [
                f"顾客{name}退回{q}个{prod}，单价{p}元，应退款多少元？",
                f"订单{oid}：退货{q}件{prod}，每件{p}元，退款金额是多少？",
                f"{name}买了{q}个{prod}（每个{p}元），现在全部退货，要退多少钱？",
            ],
        )
        return _task("arithmetic", lang, question, f"{q}*{p}={q * p}", q * p, 1)
    if kind == "fee":
        f = rng.choice([2, 3, 5, 8, 10])
        if q * p <= f:
            q = rng.randint(2, 9)
        question = _pick(
            rng,
            lang,
            [
                f"{name} returned {q} {prod} at {p} yuan each; a {f}-yuan restocking fee applies. Refund?",
                f"Order {oid}: {q} x {prod} ({p} yuan each) sent back, minus a {f} yuan return fee. How much is refunded?",
            ],
            [
                f"{name}退回{q}个{prod}，单价{p}元，扣{f}元手续费，退款多少元？",
                f"订单{oid}退货{q}件{prod}，每件{p}元，需扣除{f}元退货费，应退多少？",
            ],
        )
        return _task("arithmetic", lang, question, f"{q}*{p}-{f}={q * p}-{f}={q * p - f}", q * p - f, 2)
    if kind == "change":
        paid = rng.choice([50, 100, 200])
        cost = rng.randint(11, paid - 1)
        question = _pick(
            rng,
            lang,
            [
                f"{name} paid {paid} yuan in cash for a {cost}-yuan order. How much change is due?",
                f"Cash sale on {oid}: total {cost} yuan, customer hands over {paid} yuan. Change?",
            ],
            [
                f"{name}用{paid}元现金支付了{cost}元的订单，应找零多少元？",
                f"订单{oid}合计{cost}元，顾客付了{paid}元，找零多少？",
            ],
        )
        return _task("arithmetic", lang, question, f"{paid}-{cost}={paid - cost}", paid - cost, 1)
    x, y = rng.randint(11, 99), rng.choice([5, 10, 15, 20, 25, 30])
    question = _pick(
        rng,
        lang,
        [
            f"{name} has {x} yuan of store credit and we add {y} yuan for a late delivery. New balance?",
            f"Store credit for {name}: {x} yuan now, plus a {y}-yuan goodwill credit. Total credit?",
        ],
        [
            f"{name}的账户余额{x}元，因延迟发货补偿{y}元，现在余额多少？",
            f"{name}有{x}元购物金，又获得{y}元补偿，共有多少元？",
        ],
    )
    return _task("arithmetic", lang, question, f"{x}+{y}={x + y}", x + y, 1)


def discount(rng: random.Random, lang: str) -> Task:
    """Percent off a round price (p*d%), the same on q items (q*p, then d% off) and threshold coupons."""
    kind = rng.choice(["price", "price", "saving", "lines", "coupon"])
    name = _who(rng, lang)
    d = rng.choice([10, 20, 25, 50])
    if kind in ("price", "saving"):
        p = rng.choice([x for x in (20, 40, 60, 80, 100, 120, 150, 200) if x * d % 100 == 0])
        prod = _pname(rng, rng.choice(PRODUCTS), lang)
        cut = p * d // 100
        if kind == "price":
            question = _pick(
                rng,
                lang,
                [
                    f"The {prod} is listed at {p} yuan and is {d}% off this week. What is the sale price?",
                    f"{name} asks: {prod}, {p} yuan, {d}% discount. How much do I pay?",
                ],
                [
                    f"{prod}原价{p}元，本周打{fmt((100 - d) / 10)}折（减{d}%），现价多少元？",
                    f"{name}问：{prod}标价{p}元，优惠{d}%，实付多少钱？",
                ],
            )
            return _task("discount", lang, question, f"{p}*{100 - d}%={p - cut}", p - cut, 1)
        question = _pick(
            rng,
            lang,
            [
                f"With {d}% off a {p}-yuan {prod}, how many yuan does {name} save?",
                f"{prod} at {p} yuan, {d}% off. How much is the saving?",
            ],
            [f"{p}元的{prod}优惠{d}%，{name}能省多少元？", f"{prod}标价{p}元，降价{d}%，便宜了多少钱？"],
        )
        return _task("discount", lang, question, f"{p}*{d}%={cut}", cut, 1)
    if kind == "lines":
        product = rng.choice([x for x in PRODUCTS if x[4] in (10, 20, 40, 60)])
        p, prod = product[4], _pname(rng, product, lang)
        q = rng.choice([x for x in range(1, 10) if x * p * d % 100 == 0])
        total, cut = q * p, q * p * d // 100
        question = _pick(
            rng,
            lang,
            [
                f"{name} buys {q} {prod} at {p} yuan each with {d}% off the order. Amount to pay?",
                f"{q} x {prod} ({p} yuan each), {d}% off for members. What does {name} pay?",
            ],
            [
                f"{name}买{q}个{prod}，每个{p}元，整单优惠{d}%，实付多少元？",
                f"{prod}单价{p}元，{name}买了{q}个，会员减{d}%，要付多少？",
            ],
        )
        return _task("discount", lang, question, f"{q}*{p}*{100 - d}%={total}*{100 - d}%={total - cut}", total - cut, 2)
    t = rng.choice([50, 100, 200])
    c = rng.choice([5, 10, 20]) if t == 50 else rng.choice([10, 20, 30, 50])
    total = rng.randint(t - 20, t + 60)
    question = _pick(
        rng,
        lang,
        [
            f"Coupon: {c} yuan off orders of {t} yuan or more. {name}'s cart is {total} yuan. Amount to pay?",
            f"{name} has a '{c} off {t}' voucher and a {total}-yuan basket. What is the final price?",
        ],
        [
            f"满{t}减{c}的优惠券，{name}的购物车是{total}元，实付多少元？",
            f"{name}购物车{total}元，使用满{t}减{c}券后要付多少？",
        ],
    )
    if total >= t:
        return _task("discount", lang, question, f"{total}-{c}={total - c}", total - c, 2)
    return _task("discount", lang, question, f"{total}<{t}", total, 2)


def order_total(rng: random.Random, lang: str) -> Task:
    """One of each item (a+b(+c)), a line plus shipping (q*p+s), two lines (q1*p1+q2*p2), two lines plus shipping."""
    kind = rng.choice(["items", "line_ship", "lines", "lines", "lines_ship"])
    oid = _order_no(rng)
    if kind == "items":
        items = rng.sample([p for p in PRODUCTS if p[4] <= 60], rng.choice([2, 3]))
        prices = [p[4] for p in items]
        names = [_pname(rng, p, lang) for p in items]
        listing = (
            ", ".join(f"{n} ({p} yuan)" for n, p in zip(names, prices))
            if lang == "en"
            else "、".join(f"{n}{p}元" for n, p in zip(names, prices))
        )
        question = _pick(
            rng,
            lang,
            [f"Order {oid} contains one of each: {listing}. Total?", f"Please total this receipt: {listing}."],
            [f"订单{oid}各买一件：{listing}，合计多少元？", f"帮忙算一下小票总额：{listing}。"],
        )
        return _task("order_total", lang, question, "+".join(map(str, prices)) + f"={sum(prices)}", sum(prices), 1)
    fee = rng.choice([6, 8, 10])
    if kind == "line_ship":
        product = _cheap(rng)
        p, q, prod = product[4], rng.randint(2, 9), _pname(rng, product, lang)
        question = _pick(
            rng,
            lang,
            [f"Order {oid}: {q} {prod} at {p} yuan each, plus {fee} yuan shipping. Total charged?"],
            [f"订单{oid}：{prod}{q}个，单价{p}元，另加运费{fee}元，总共收多少元？"],
        )
        return _task("order_total", lang, question, f"{q}*{p}+{fee}={q * p}+{fee}={q * p + fee}", q * p + fee, 2)
    first, second = rng.sample([p for p in PRODUCTS if p[4] <= 50], 2)
    (p1, p2), (q1, q2) = (first[4], second[4]), (rng.randint(1, 3), rng.randint(1, 3))
    n1, n2 = _pname(rng, first, lang), _pname(rng, second, lang)
    a, b = q1 * p1, q2 * p2
    if kind == "lines":
        question = _pick(
            rng,
            lang,
            [
                f"Order {oid}: {q1} {n1} at {p1} yuan and {q2} {n2} at {p2} yuan. What is the order total?",
                f"What does {oid} come to? {q1} x {n1} ({p1} yuan each), {q2} x {n2} ({p2} yuan each).",
            ],
            [
                f"订单{oid}：{n1}{q1}个，单价{p1}元；{n2}{q2}个，单价{p2}元。订单总额多少元？",
                f"{q1}个{n1}（每个{p1}元）加{q2}个{n2}（每个{p2}元），一共多少钱？",
            ],
        )
        return _task("order_total", lang, question, f"{q1}*{p1}+{q2}*{p2}={a}+{b}={a + b}", a + b, 2)
    question = _pick(
        rng,
        lang,
        [f"Order {oid}: {q1} {n1} at {p1} yuan, {q2} {n2} at {p2} yuan, shipping {fee} yuan. Total?"],
        [f"订单{oid}：{n1}{q1}个单价{p1}元，{n2}{q2}个单价{p2}元，运费{fee}元，共多少元？"],
    )
    return _task(
        "order_total", lang, question, f"{q1}*{p1}+{q2}*{p2}+{fee}={a}+{b}+{fee}={a + b + fee}", a + b + fee, 3
    )


# (kind, factor, en question, zh question, allowed quantities)
_UNITS = [
    (
        "kg_g",
        1000,
        "A parcel weighs {q} kg. How many grams is that?",
        "包裹重{q}千克，合多少克？",
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 0.5, 1.5, 2.5],
    ),
    (
        "g_kg",
        Fraction(1, 1000),
        "The {prod} weighs {q} g. What is that in kg?",
        "{prod}重{q}克，合多少千克？",
        [250, 500, 750, 1500, 2500, 200, 400, 600, 800, 1200],
    ),
    (
        "m_cm",
        100,
        "The shelf is {q} m long. How many centimetres?",
        "货架长{q}米，是多少厘米？",
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 1.5, 2.5],
    ),
    (
        "cm_m",
        Fraction(1, 100),
        "A roll of ribbon is {q} cm. How many metres?",
        "一卷丝带长{q}厘米，合多少米？",
        [50, 150, 250, 300, 120, 75, 25],
    ),
    (
        "dozen",
        12,
        "{name} orders {q} dozen {prod}. How many pieces?",
        "{name}订了{q}打{prod}，一共多少个？",
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
    ),
    (
        "l_ml",
        1000,
        "A bottle holds {q} L. How many millilitres?",
        "一瓶容量{q}升，是多少毫升？",
        [1, 2, 3, 0.5, 1.5, 0.25],
    ),
]


def unit_conversion(rng: random.Random, lang: str) -> Task:
    """A unit factor (x1000, /100, x12), boxes of k (n*k) and boxes less the units sold (n*k-s)."""
    if rng.random() < 0.4:  # boxes of k units: a unit conversion the support desk meets daily
        n, k = rng.randint(2, 9), rng.choice([6, 12, 24])
        prod = _pname(rng, rng.choice(PRODUCTS), lang)
        if rng.random() < 0.5:
            question = (
                f"{n} boxes of {prod}, {k} per box. How many units in total?"
                if lang == "en"
                else f"{n}箱{prod}，每箱{k}个，一共多少个？"
            )
            return _task("unit_conversion", lang, question, f"{n}*{k}={n * k}", n * k, 1)
        s = rng.randint(1, k - 1)
        question = (
            f"We had {n} boxes of {prod}, {k} per box, and sold {s} units. How many units are left?"
            if lang == "en"
            else f"库存{n}箱{prod}，每箱{k}个，卖出{s}个，还剩多少个？"
        )
        return _task("unit_conversion", lang, question, f"{n}*{k}-{s}={n * k}-{s}={n * k - s}", n * k - s, 2)
    kind, factor, en, zh, quantities = rng.choice(_UNITS)
    q = rng.choice(quantities)
    prod = _pname(rng, rng.choice(PRODUCTS), lang)
    question = (en if lang == "en" else zh).format(q=fmt(q), prod=prod, name=_who(rng, lang))
    value = Fraction(q).limit_denominator(1000) * factor
    op = f"*{factor}" if isinstance(factor, int) else f"/{factor.denominator}"
    return _task("unit_conversion", lang, question, f"{fmt(q)}{op}={fmt(value)}", value, 1)


GENERATORS = {
    "arithmetic": arithmetic,
    "discount": discount,
    "order_total": order_total,
    "unit_conversion": unit_conversion,
}
