"""The harder retail tasks: return-policy multiple choice, small Python helpers, reply-format drafts.

- `policy_choice` -> verifier `choice`: a scenario under the return policy in `catalog.POLICY`,
  options (A)-(D), reference = the option letter.
- `code` -> verifier `code`: reference = JSON {"tests": "def check(candidate): ...",
  "entry_point": name}; solution = a correct function in a ```python block.
- `reply_format` -> verifier `reply`: draft a customer reply that gives the returns link and answers
  what this customer asked; reference = JSON {"link", "mention": [the customer's name, the item],
  "action": [what this kind of request needs: "download", "30 days", ...], "reply"} (verifiers/reply.py):
  the link alone, the prompt's format example, an echo of the request or one stock reply for every
  request scores 0.
These are meant to be hard for a tiny model: they show the pass@k tiering at work.
"""

from __future__ import annotations

import json
import random
import re

from catalog import CUSTOMERS_EN, CUSTOMERS_ZH, POLICY, PRODUCTS, STORES
from tasks_math import ANSWER_PREFIX, Task

LETTERS = "ABCD"

_OUTCOMES = {
    "en": ["Full refund", "Store credit only", "Refund or exchange", "No return: the return period is over"],
    "zh": ["全额退款", "只能退为购物金", "退款或换货", "不能退货：已超过退货期限"],
}


def _window(category: str) -> int:
    return POLICY["electronics_window_days"] if category == "electronics" else POLICY["return_window_days"]


def _scenario(rng: random.Random, lang: str) -> tuple[str, int]:
    """A return scenario and the index of its correct outcome in _OUTCOMES."""
    _pid, en, zh, category, _price = rng.choice([p for p in PRODUCTS if p[3] != "food"])
    defective = rng.random() < 0.3
    days = rng.choice([3, 5, 10, 12, 14, 16, 20, 25, 29, 31, 35, 45, 58, 61, 75, 89, 95, 120])
    if defective:
        outcome = 2 if days <= POLICY["defect_window_days"] else 3
    elif days <= _window(category):
        outcome = 0
    elif days <= POLICY["store_credit_until_days"]:
        outcome = 1
    else:
        outcome = 3
    if lang == "en":
        name = rng.choice(CUSTOMERS_EN)
        state = "stopped working" if defective else "is unopened, receipt attached"
        text = f"{name} bought a {en} ({category}) {days} days ago. It {state}. What can we offer?"
    else:
        name = rng.choice(CUSTOMERS_ZH)
        state = "出现质量问题" if defective else "未拆封，有小票"
        cat_zh = {"electronics": "电子产品"}.get(category, "普通商品")
        text = f"{name}{days}天前买了{zh}（{cat_zh}），{state}。我们可以怎么处理？"
    return text, outcome


def policy_choice(rng: random.Random, lang: str) -> Task:
    text, outcome = _scenario(rng, lang)
    order = list(range(4))
    rng.shuffle(order)
    options = " ".join(f"({LETTERS[i]}) {_OUTCOMES[lang][o]}" for i, o in enumerate(order))
    letter = LETTERS[order.index(outcome)]
    lead = "Per the return policy: " if lang == "en" else "根据退货政策："
    return Task("policy_choice", lang, f"{lead}{text} {options}", letter, f"{ANSWER_PREFIX[lang]}{letter}")


# name -> (English ask, Chinese ask, solution source, check body); {a} {b} are per-row parameters.
_CODE = {
    "refund_after_fee": (
        "Write a Python function `{fn}(price, qty)` returning the refund for qty items at price each "
        "minus a {a}% restocking fee, rounded to 2 decimals.",
        "写一个Python函数`{fn}(price, qty)`：退款 = 单价×数量，扣除{a}%的重新上架费，保留两位小数。",
        "def {fn}(price, qty):\n    return round(price * qty * (100 - {a}) / 100, 2)\n",
        "    assert candidate(10, 3) == round(30 * (100 - {a}) / 100, 2)\n"
        "    assert candidate(12.5, 2) == round(25 * (100 - {a}) / 100, 2)\n"
        "    assert candidate(0, 5) == 0\n",
    ),
    "shipping_fee": (
        "Write `{fn}(subtotal)`: shipping is free when the subtotal is at least {a} yuan, otherwise {b} yuan.",
        "写函数`{fn}(subtotal)`：订单满{a}元免运费，否则运费{b}元。",
        "def {fn}(subtotal):\n    return 0 if subtotal >= {a} else {b}\n",
        "    assert candidate({a}) == 0\n    assert candidate({a} + 1) == 0\n"
        "    assert candidate({a} - 1) == {b}\n    assert candidate(0) == {b}\n",
    ),
    "loyalty_points": (
        "Write `{fn}(total)` returning loyalty points: 1 point per full {a} yuan spent (no partial points).",
        "写函数`{fn}(total)`：每消费满{a}元积1分，不足部分不积分。",
        "def {fn}(total):\n    return int(total // {a})\n",
        "    assert candidate({a} * 3) == 3\n    assert candidate({a} - 1) == 0\n"
        "    assert candidate({a} * 7 + 1) == 7\n",
    ),
    "valid_sku": (
        "Write `{fn}(sku)` returning True when sku looks like '{p}-' followed by exactly {a} digits.",
        "写函数`{fn}(sku)`：当sku为'{p}-'加恰好{a}位数字时返回True，否则False。",
        "import re\n\ndef {fn}(sku):\n    return re.fullmatch(r'{p}-\\d{{{a}}}', sku) is not None\n",
        "    assert candidate('{p}-' + '7' * {a}) is True\n    assert candidate('{p}-' + '7' * ({a} + 1)) is False\n"
        "    assert candidate('XX-' + '7' * {a}) is False\n    assert candidate('{p}-' + '7' * ({a} - 1) + 'a') is False\n",
    ),
    "to_halfwidth": (
        "Write `{fn}(text)` converting full-width ASCII characters (U+FF01-U+FF5E) and the ideographic "
        "space to their half-width forms, leaving other characters alone.",
        "写函数`{fn}(text)`：把全角ASCII字符（U+FF01-U+FF5E）和全角空格转换为半角，其余字符不变。",
        "def {fn}(text):\n    out = []\n    for ch in text:\n        code = ord(ch)\n"
        "        if code == 0x3000:\n            code = 0x20\n        elif 0xFF01 <= code <= 0xFF5E:\n"
        "            code -= 0xFEE0\n        out.append(chr(code))\n    return ''.join(out)\n",
        "    assert candidate('\\uff11\\uff12\\u3000\\uff41') == '12 a'\n    assert candidate('价格') == '价格'\n"
        "    assert candidate('') == ''\n",
    ),
    "order_total": (
        "Write `{fn}(lines)` where lines is a list of (unit_price, qty) pairs; return the order total, "
        "minus {a} yuan when the total is at least {b} yuan.",
        "写函数`{fn}(lines)`：lines是(单价, 数量)列表，返回订单总额；总额满{b}元时减{a}元。",
        "def {fn}(lines):\n    total = sum(p * q for p, q in lines)\n"
        "    return total - {a} if total >= {b} else total\n",
        "    assert candidate([]) == 0\n    assert candidate([({b}, 1)]) == {b} - {a}\n"
        "    assert candidate([(1, {b} - 1)]) == {b} - 1\n    assert candidate([(5, 2), (3, 1)]) == (13 - {a} if 13 >= {b} else 13)\n",
    ),
}
_CODE_PARAMS = {
    "refund_after_fee": [(a, 0) for a in (5, 10, 15, 20)],
    "shipping_fee": [(a, b) for a in (49, 99, 199) for b in (6, 8, 10, 12)],
    "loyalty_points": [(a, 0) for a in (5, 10, 20, 50)],
    "valid_sku": [(a, 0) for a in (3, 4, 5, 6)],
    "to_halfwidth": [(0, 0)],
    "order_total": [(a, b) for a in (10, 20) for b in (100, 200, 300)],
}
_FN_NAMES = {
    "refund_after_fee": ["refund_after_fee", "net_refund", "refund_amount"],
    "shipping_fee": ["shipping_fee", "delivery_charge"],
    "loyalty_points": ["loyalty_points", "points_for"],
    "valid_sku": ["valid_sku", "is_sku"],
    "to_halfwidth": ["to_halfwidth", "normalize_width", "halfwidth"],
    "order_total": ["order_total", "basket_total"],
}


def _example(key: str, fn: str, x: int, a: int, b: int, prefix: str, lang: str) -> str:
    """One worked call, e.g. ' Example: shipping_fee(120) == 0.' (computed, so it is always right)."""
    if key == "refund_after_fee":
        call, result = f"{fn}({x % 50 + 1}, 2)", round((x % 50 + 1) * 2 * (100 - a) / 100, 2)
    elif key == "shipping_fee":
        call, result = f"{fn}({x})", 0 if x >= a else b
    elif key == "loyalty_points":
        call, result = f"{fn}({x})", x // a
    elif key == "valid_sku":
        call, result = f"{fn}('{prefix}-{str(x).zfill(a)[:a]}')", True
    elif key == "to_halfwidth":
        call, result = f"{fn}('SO{x}')", f"'SO{x}'"
    else:
        call, result = f"{fn}([({x}, 1)])", x - a if x >= b else x
    return f" Example: {call} == {result}." if lang == "en" else f" 例：{call} == {result}。"


def code(rng: random.Random, lang: str) -> Task:
    key = rng.choice(sorted(_CODE))
    a, b = rng.choice(_CODE_PARAMS[key])
    fn = rng.choice(_FN_NAMES[key])
    prefix = rng.choice(["RT", "SH", "HB"])
    ask_en, ask_zh, source, checks = _CODE[key]
    values = {"fn": fn, "a": a, "b": b, "p": prefix}
    question = (ask_en if lang == "en" else ask_zh).format(**values)
    # Context and an example call make rows of one template differ by more than a digit, as real
    # requests do (and keep them apart for near-duplicate detection).
    store = rng.choice(STORES)
    x = rng.randint(1, 400)
    ctx = f"Request from the {store[1]} store team. " if lang == "en" else f"{store[3]}{store[1]}门店提出需求："
    question = ctx + question + _example(key, fn, x, a, b, prefix, lang)
    tests = "def check(candidate):\n" + checks.format(**values)
    reference = json.dumps({"tests": tests, "entry_point": fn}, ensure_ascii=False)
    return Task("code", lang, question, reference, "```python\n" + source.format(**values) + "```")


# What customers ask, and what the desk's reply must tell each of them (the reply rule's `action`:
# words the request does not use, and different for every kind of request, so neither an echo of
# the request nor one stock reply scores). {w} is the item's return window, {d} the refund time.
_ISSUES = {
    "en": [
        (
            "how to send back a {p} that arrived scratched",
            ["refund or exchange", "replacement"],
            "{n}, the {p} can get a refund or exchange there.",
        ),
        (
            "whether an unopened {p} can still be returned",
            ["{w} days"],
            "{n}, an unopened {p} can go back in {w} days.",
        ),
        ("where to print a return label for the {p}", ["download"], "{n}, download the {p}'s return label there."),
        (
            "how long a refund for the {p} takes",
            ["{d} business days", "{d} working days"],
            "{n}, the refund for the {p} takes {d} business days.",
        ),
    ],
    "zh": [
        ("收到的{p}有划痕，怎么退回", ["退款或换货", "换新"], "{n}您好，很抱歉{p}有划痕，请在此页面申请退款或换货。"),
        ("没拆封的{p}还能不能退", ["{w}天"], "{n}您好，没拆封的{p}在{w}天内可以全额退款。"),
        ("{p}的退货单在哪里打印", ["下载"], "{n}您好，{p}的退货单可以在此页面下载。"),
        ("{p}的退款多久到账", ["{d}个工作日"], "{n}您好，{p}的退款会在{d}个工作日内到账。"),
    ],
}


def reply_format(rng: random.Random, lang: str) -> Task:
    link = POLICY["return_link"]  # first in the reply, so a short generation budget still reaches it
    product = rng.choice(PRODUCTS)
    prod = product[1 if lang == "en" else 2]
    ask, action, answer = rng.choice(_ISSUES[lang])
    issue = ask.format(p=prod)
    if lang == "en":
        name = rng.choice(CUSTOMERS_EN)
        question = rng.choice(
            [
                f"Draft a short reply to {name}, who asks {issue}. The reply must include the returns page link.",
                f"{name} (order SO{rng.randint(10000, 99999)}) wrote in asking {issue}. Write the answer; "
                f"it has to contain the link to our returns page.",
                f'Reply to this message from {name}: "I\'d like to know {issue}." Include the returns link.',
            ]
        )
        sep = " - "
    else:
        name = rng.choice(CUSTOMERS_ZH)
        question = rng.choice(
            [
                f"给{name}写一条简短回复，TA问：{issue}。回复中必须包含退货页面链接。",
                f"顾客{name}（订单SO{rng.randint(10000, 99999)}）来信询问{issue}，请起草回复，务必附上退货页面链接。",
                f"请帮忙回复{name}：“{issue}？”要求回复里带上退货链接。",
            ]
        )
        sep = " "
    # no extra draws here: every later row keeps its bytes
    facts = {"p": prod, "n": name, "w": _window(product[3]), "d": POLICY["refund_business_days"]}
    reply = link + sep + answer.format(**facts)
    item = re.split(r"\s*[(（]", prod)[0]  # "green tea (100 g)": a reply may say "green tea"
    reference = json.dumps(
        {"link": link, "mention": [name, item], "action": [a.format(**facts) for a in action], "reply": reply}
    )
    return Task("reply_format", lang, question, reference, reply)


GENERATORS = {"policy_choice": policy_choice, "code": code, "reply_format": reply_format}
