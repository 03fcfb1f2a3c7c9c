"""Support-desk actions as tool calls, in English and Chinese: the `tool_call` category.

A customer message asks for something one of the desk's four tools does; the reference is the
call the agent should make, checked by the `function_call` verifier against the tools' JSON
Schemas in spec.yaml (the rule's `params.tools`):
    issue_refund(order_id, amount)   items sent back (quantity x unit price) or a fee charged twice
    lookup_order(order_id)           where is my order, has it shipped
    cancel_order(order_id)           ordered by mistake
    escalate(order_id, reason)       a complaint for a supervisor; reason is one of REASONS
The reference is written the way the help desk logs it, `issue_refund(order_id="SO12345",
amount=36)`; `as_json` rewrites it as the JSON that another export writes. The solution is the call
in <tool_call> tags, the form the prompt's format example shows and the one the verifier's attach
hook builds for a row without a reply. One call a row: the prompt (template included) plus the
reply stays within the demo's SFT max_length of 420 characters; a second call would not.
"""

from __future__ import annotations

import ast
import json
import random

from tasks_math import Task, _cheap, _order_no, _pname, _who

TOOLS = ("issue_refund", "lookup_order", "cancel_order", "escalate")
REASONS = ("damaged", "late", "wrong_item", "rude_staff")

_ASKS = {
    "refund": {
        "en": [
            "{name}: {q} {p} in {o} broke ({price} yuan each). Refund them.",
            "Refund {name} for {q} {p} returned from {o}, {price} yuan each.",
            "{name} sent back {q} {p} ({o}, {price} yuan each) for a refund.",
        ],
        "zh": [
            "{name}：订单{o}里的{q}个{p}坏了（每个{price}元），请退款。",
            "给{name}退{q}个{p}的钱，订单{o}，单价{price}元。",
            "{name}退回了订单{o}的{q}个{p}，每个{price}元，要求退款。",
        ],
    },
    "fee": {
        "en": [
            "Order {o} was charged the {fee} yuan shipping fee twice. Refund the extra one.",
            "{name} paid {fee} yuan shipping twice on order {o}; please refund one.",
        ],
        "zh": ["订单{o}的运费{fee}元被扣了两次，请退还多扣的。", "{name}的订单{o}重复收了{fee}元运费，请退一次。"],
    },
    "lookup": {
        "en": [
            "{name} asks where order {o} is.",
            "Has order {o} shipped yet? - {name}",
            "{name} wants a status update on order {o}.",
        ],
        "zh": ["{name}问订单{o}到哪了。", "订单{o}发货了吗？——{name}", "{name}想查一下订单{o}的状态。"],
    },
    "cancel": {
        "en": [
            "{name} ordered by mistake and wants order {o} cancelled.",
            "Please cancel order {o}, I no longer need it. - {name}",
        ],
        "zh": ["{name}下错单了，要取消订单{o}。", "请取消订单{o}，不需要了。——{name}"],
    },
}
_COMPLAINTS = {  # reason -> asks; the reason is the complaint, never a refund request
    "damaged": {
        "en": ["{name} complains that order {o} arrived damaged and asks for a manager."],
        "zh": ["{name}投诉订单{o}的商品到货就坏了，要求找主管。"],
    },
    "late": {
        "en": ["{name} is angry that order {o} is {d} days late and wants to complain."],
        "zh": ["{name}很生气，订单{o}已经晚了{d}天，要投诉。"],
    },
    "wrong_item": {
        "en": ["{name} got the wrong item in order {o} and files a complaint."],
        "zh": ["{name}投诉订单{o}发错货了。"],
    },
    "rude_staff": {
        "en": ["{name} complains the staff were rude when handing over order {o}."],
        "zh": ["{name}投诉取订单{o}时店员态度恶劣。"],
    },
}
_KINDS = {"refund": 0.32, "fee": 0.08, "lookup": 0.2, "cancel": 0.15, "escalate": 0.25}


def render_call(name: str, arguments: dict) -> str:
    """`issue_refund(order_id="SO12345", amount=36)`: the call as the help desk logs it."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return f"{name}({args})"


def as_json(reference: str) -> str:
    """A call-syntax reference as JSON: `{"name": ..., "arguments": {...}}`."""
    node = ast.parse(reference, mode="eval").body
    call = {"name": node.func.id, "arguments": {k.arg: ast.literal_eval(k.value) for k in node.keywords}}
    return json.dumps(call, ensure_ascii=False)


def tool_call(rng: random.Random, lang: str) -> Task:
    kind = rng.choices(list(_KINDS), weights=list(_KINDS.values()))[0]
    name, o = _who(rng, lang), _order_no(rng)
    if kind == "refund":
        product = _cheap(rng)
        q, price = rng.randint(1, 9), product[4]
        ask = rng.choice(_ASKS[kind][lang]).format(name=name, o=o, q=q, p=_pname(rng, product, lang), price=price)
        tool, arguments = "issue_refund", {"order_id": o, "amount": q * price}
    elif kind == "fee":
        fee = rng.choice([6, 8, 10, 12])
        ask = rng.choice(_ASKS[kind][lang]).format(name=name, o=o, fee=fee)
        tool, arguments = "issue_refund", {"order_id": o, "amount": fee}
    elif kind in ("lookup", "cancel"):
        ask = rng.choice(_ASKS[kind][lang]).format(name=name, o=o)
        tool, arguments = f"{kind}_order", {"order_id": o}
    else:
        reason = rng.choice(REASONS)
        ask = rng.choice(_COMPLAINTS[reason][lang]).format(name=name, o=o, d=rng.randint(3, 20))
        tool, arguments = "escalate", {"order_id": o, "reason": reason}
    call = json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False)
    return Task("tool_call", lang, ask, render_call(tool, arguments), f"<tool_call>\n{call}\n</tool_call>")


GENERATORS = {"tool_call": tool_call}
