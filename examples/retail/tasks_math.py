"""Short-answer arithmetic tasks of a retail support desk, in English and Chinese.

Four categories, all checked by the `math` verifier with the gold number as reference:
`arithmetic` (refunds, change, store credit), `discount` (percent off, coupons),
`order_total` (sums of 2-3 lines, shipping) and `unit_conversion` (kg/g, m/cm, dozens, boxes).
Operands are small (quantities 1-9, round prices, discounts of 10/20/25/50%) and the worked reply
is one compact line of arithmetic (`3*12=36`) plus `Answer: N` (English) or `答案: N` (Chinese),
at most ~35 characters, so a ~1M-parameter character model can learn it within a short budget. Each generator takes a `random.Random` and returns a `Task`.
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
    lang: str                  # en | zh
    question: str
    answer: str                # the reference, as the verifiers contract wants it
    solution: str              # a worked reply the category's verifier accepts


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


def _task(category: str, lang: str, question: str, work: str, answer) -> Task:
    ans = fmt(answer)
    return Task(category, lang, question, ans, f"{work}\n{ANSWER_PREFIX[lang]}{ans}")


def arithmetic(rng: random.Random, lang: str) -> Task:
    kind = rng.choice(["refund", "refund", "partial", "change", "credit"])
    name, oid = _who(rng, lang), _order_no(rng)
    product = _cheap(rng)
    p, prod = product[4], _pname(rng, product, lang)
    if kind == "refund":
        q = rng.randint(1, 9)
        question = rng.choice({
            "en": [f"Customer {name} returned {q} {prod} bought at {p} yuan each. How much should we refund?",
                   f"Refund request on order {oid}: {q} x {prod} at {p} yuan each, all returned. Refund amount?",
                   f"{name} sends back {q} {prod} ({p} yuan each). What is the refund in yuan?"],
            "zh": [f"顾客{name}退回{q}个{prod}，单价{p}元，应退款多少元？",
                   f"订单{oid}：退货{q}件{prod}，每件{p}元，退款金额是多少？",
                   f"{name}买了{q}个{prod}（每个{p}元），现在全部退货，要退多少钱？"]}[lang])
        return _task("arithmetic", lang, question, f"{q}*{p}={q * p}", q * p)
    if kind == "partial":
        q = rng.randint(2, 9)
        r = rng.randint(1, q - 1)
        question = rng.choice({
            "en": [f"{name} bought {q} {prod} at {p} yuan each and returned {r} of them. How much is refunded?",
                   f"Order {oid} had {q} {prod} ({p} yuan each); {r} came back damaged. Refund amount?"],
            "zh": [f"{name}买了{q}个{prod}，单价{p}元，退回其中{r}个，应退多少元？",
                   f"订单{oid}共{q}件{prod}，每件{p}元，有{r}件破损退回，退款多少？"]}[lang])
        return _task("arithmetic", lang, question, f"{r}*{p}={r * p}", r * p)
    if kind == "change":
        paid = rng.choice([20, 50, 100])
        cost = rng.randint(1, paid - 1)
        question = rng.choice({
            "en": [f"{name} paid {paid} yuan in cash for a {cost}-yuan order. How much change is due?",
                   f"Cash sale on {oid}: total {cost} yuan, customer hands over {paid} yuan. Change?"],
            "zh": [f"{name}用{paid}元现金支付了{cost}元的订单，应找零多少元？",
                   f"订单{oid}合计{cost}元，顾客付了{paid}元，找零多少？"]}[lang])
        return _task("arithmetic", lang, question, f"{paid}-{cost}={paid - cost}", paid - cost)
    x, y = rng.randint(1, 60), rng.choice([5, 10, 15, 20, 25, 30])
    question = rng.choice({
        "en": [f"{name} has {x} yuan of store credit and we add {y} yuan for a late delivery. New balance?",
               f"Store credit for {name}: {x} yuan now, plus a {y}-yuan goodwill credit. Total credit?"],
        "zh": [f"{name}的账户余额{x}元，因延迟发货补偿{y}元，现在余额多少？",
               f"{name}有{x}元购物金，又获得{y}元补偿，共有多少元？"]}[lang])
    return _task("arithmetic", lang, question, f"{x}+{y}={x + y}", x + y)


def discount(rng: random.Random, lang: str) -> Task:
    kind = rng.choice(["price", "price", "saving", "coupon"])
    name = _who(rng, lang)
    if kind in ("price", "saving"):
        d = rng.choice([10, 20, 25, 50])
        p = rng.choice([x for x in (20, 40, 60, 80, 100, 120, 150, 200) if x * d % 100 == 0])
        prod = _pname(rng, rng.choice(PRODUCTS), lang)
        cut = p * d // 100
        if kind == "price":
            question = rng.choice({
                "en": [f"The {prod} is listed at {p} yuan and is {d}% off this week. What is the sale price?",
                       f"{name} asks: {prod}, {p} yuan, {d}% discount. How much do I pay?"],
                "zh": [f"{prod}原价{p}元，本周打{fmt((100 - d) / 10)}折（减{d}%），现价多少元？",
                       f"{name}问：{prod}标价{p}元，优惠{d}%，实付多少钱？"]}[lang])
            return _task("discount", lang, question, f"{p}*{100 - d}%={p - cut}", p - cut)
        question = rng.choice({
            "en": [f"With {d}% off a {p}-yuan {prod}, how many yuan does {name} save?",
                   f"{prod} at {p} yuan, {d}% off. How much is the saving?"],
            "zh": [f"{p}元的{prod}优惠{d}%，{name}能省多少元？",
                   f"{prod}标价{p}元，降价{d}%，便宜了多少钱？"]}[lang])
        return _task("discount", lang, question, f"{p}*{d}%={cut}", cut)
    t = rng.choice([50, 100, 200])
    c = rng.choice([5, 10, 20]) if t == 50 else rng.choice([10, 20, 30, 50])
    total = rng.randint(t - 20, t + 60)
    question = rng.choice({
        "en": [f"Coupon: {c} yuan off orders of {t} yuan or more. {name}'s cart is {total} yuan. Amount to pay?",
               f"{name} has a '{c} off {t}' voucher and a {total}-yuan basket. What is the final price?"],
        "zh": [f"满{t}减{c}的优惠券，{name}的购物车是{total}元，实付多少元？",
               f"{name}购物车{total}元，使用满{t}减{c}券后要付多少？"]}[lang])
    if total >= t:
        return _task("discount", lang, question, f"{total}-{c}={total - c}", total - c)
    return _task("discount", lang, question, f"{total}<{t}", total)


def order_total(rng: random.Random, lang: str) -> Task:
    kind = rng.choice(["lines", "lines", "items", "shipping"])
    oid = _order_no(rng)
    if kind == "lines":
        first, second = rng.sample([p for p in PRODUCTS if p[4] <= 50], 2)
        (e1, p1), (e2, p2) = (first[1], first[4]), (second[1], second[4])
        z1, z2 = _pname(rng, first, "zh"), _pname(rng, second, "zh")
        q1, q2 = rng.randint(1, 3), rng.randint(1, 3)
        a, b = q1 * p1, q2 * p2
        question = rng.choice({
            "en": [f"Order {oid}: {q1} {e1} at {p1} yuan and {q2} {e2} at {p2} yuan. What is the order total?",
                   f"What does {oid} come to? {q1} x {e1} ({p1} yuan each), {q2} x {e2} ({p2} yuan each)."],
            "zh": [f"订单{oid}：{z1}{q1}个，单价{p1}元；{z2}{q2}个，单价{p2}元。订单总额多少元？",
                   f"{q1}个{z1}（每个{p1}元）加{q2}个{z2}（每个{p2}元），一共多少钱？"]}[lang])
        work = f"{q1}*{p1}+{q2}*{p2}={a}+{b}={a + b}"
        return _task("order_total", lang, question, work, a + b)
    items = rng.sample([p for p in PRODUCTS if p[4] <= 60], rng.choice([2, 3]))
    prices = [p[4] for p in items]
    names = [_pname(rng, p, lang) for p in items]
    listing = (", ".join(f"{n} ({p} yuan)" for n, p in zip(names, prices)) if lang == "en"
               else "、".join(f"{n}{p}元" for n, p in zip(names, prices)))
    if kind == "items":
        question = rng.choice({
            "en": [f"Order {oid} contains one of each: {listing}. Total?",
                   f"Please total this receipt: {listing}."],
            "zh": [f"订单{oid}各买一件：{listing}，合计多少元？",
                   f"帮忙算一下小票总额：{listing}。"]}[lang])
        return _task("order_total", lang, question, "+".join(map(str, prices)) + f"={sum(prices)}",
                     sum(prices))
    fee = rng.choice([6, 8, 10])
    question = rng.choice({
        "en": [f"Order {oid}: {listing}, plus {fee} yuan shipping. What is charged in total?"],
        "zh": [f"订单{oid}：{listing}，另加运费{fee}元，总共收多少元？"]}[lang])
    work = "+".join(map(str, prices + [fee])) + f"={sum(prices) + fee}"
    return _task("order_total", lang, question, work, sum(prices) + fee)


# (kind, factor, en question, zh question, allowed quantities)
_UNITS = [
    ("kg_g", 1000, "A parcel weighs {q} kg. How many grams is that?", "包裹重{q}千克，合多少克？",
     [1, 2, 3, 4, 5, 6, 7, 8, 9, 0.5, 1.5, 2.5]),
    ("g_kg", Fraction(1, 1000), "The {prod} weighs {q} g. What is that in kg?", "{prod}重{q}克，合多少千克？",
     [250, 500, 750, 1500, 2500, 200, 400, 600, 800, 1200]),
    ("m_cm", 100, "The shelf is {q} m long. How many centimetres?", "货架长{q}米，是多少厘米？",
     [1, 2, 3, 4, 5, 6, 7, 8, 9, 1.5, 2.5]),
    ("cm_m", Fraction(1, 100), "A roll of ribbon is {q} cm. How many metres?", "一卷丝带长{q}厘米，合多少米？",
     [50, 150, 250, 300, 120, 75, 25]),
    ("dozen", 12, "{name} orders {q} dozen {prod}. How many pieces?", "{name}订了{q}打{prod}，一共多少个？",
     [1, 2, 3, 4, 5, 6, 7, 8, 9]),
    ("l_ml", 1000, "A bottle holds {q} L. How many millilitres?", "一瓶容量{q}升，是多少毫升？",
     [1, 2, 3, 0.5, 1.5, 0.25]),
]


def unit_conversion(rng: random.Random, lang: str) -> Task:
    if rng.random() < 0.25:  # boxes of k units: a unit conversion the support desk meets daily
        n, k = rng.randint(2, 9), rng.choice([6, 12, 24])
        prod = _pname(rng, rng.choice(PRODUCTS), lang)
        question = (f"{n} boxes of {prod}, {k} per box. How many units in total?" if lang == "en"
                    else f"{n}箱{prod}，每箱{k}个，一共多少个？")
        return _task("unit_conversion", lang, question, f"{n}*{k}={n * k}", n * k)
    kind, factor, en, zh, quantities = rng.choice(_UNITS)
    q = rng.choice(quantities)
    prod = _pname(rng, rng.choice(PRODUCTS), lang)
    question = (en if lang == "en" else zh).format(q=fmt(q), prod=prod, name=_who(rng, lang))
    value = Fraction(q).limit_denominator(1000) * factor
    op = f"*{factor}" if isinstance(factor, int) else f"/{factor.denominator}"
    return _task("unit_conversion", lang, question, f"{fmt(q)}{op}={fmt(value)}", value)


GENERATORS = {
    "arithmetic": arithmetic,
    "discount": discount,
    "order_total": order_total,
    "unit_conversion": unit_conversion,
}
