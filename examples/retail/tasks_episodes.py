"""The agent desk's multi-step tickets: the `multi_step` category, whose gold outcome needs a lookup first.

Three kinds of ticket, each about a real order in shop.db:
    shipping   a late delivery: refund the order's shipping fee (in `shipments`, not in the ticket)
    cancel     cancel the order if it has not shipped yet; a shipped one is left as it is
    damaged    one product of the order arrived broken: refund that line, quantity x price paid
               (promotions make the catalog price wrong)
The agent console logs the action taken as the rows the spec's outcome query returns afterwards
(`[["refund", 17, 8.0, "late_delivery"]]`, `[["cancel", 212, null, null]]`, or `[]` when nothing is
to change), and for a few tickets the whole worked transcript: the calls in `<tool_call>` tags and
the tools' results, written exactly as the environment writes them (verifiers/environment.py), which
attach checks by replaying it. The SQL below is the spec's tools' SQL (spec.yaml, rule `multi_step`);
a test attaches these rows with that spec, so the two cannot drift apart. Stdlib only.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

CATEGORY = "multi_step"
FILE = "agent_console.jsonl"
TODAY = "2026-08-01"  # the refund date the desk's issue_refund tool writes
KINDS = {"shipping": 0.3, "cancel": 0.35, "damaged": 0.35}
SQL = {
    "get_order": "SELECT o.order_id, o.customer, o.order_date, o.status, s.status AS shipment, s.shipping_fee "
    "FROM orders o JOIN shipments s USING (order_id) WHERE o.order_id = :order_id",
    "get_order_items": "SELECT p.name, i.qty, i.unit_price FROM order_items i JOIN products p USING (product_id) "
    "WHERE i.order_id = :order_id ORDER BY p.name",
}
_ASKS = {
    "shipping": {
        "en": [
            "{name}: order {o} came {d} days late. Please give me the shipping fee back.",
            "Order {o} arrived {d} days after the promised date; {name} wants the delivery fee refunded.",
        ],
        "zh": ["{name}：订单{o}晚到了{d}天，请把运费退给我。", "订单{o}比承诺晚了{d}天送达，{name}要求退运费。"],
    },
    "cancel": {
        "en": [
            "{name} changed their mind: please cancel order {o} if it has not shipped.",
            "Can you still cancel order {o}? - {name}",
        ],
        "zh": ["{name}不想要了：订单{o}如果还没发货就取消吧。", "订单{o}还能取消吗？——{name}"],
    },
    "damaged": {
        "en": [
            "The {p} in order {o} arrived damaged. {name} asks for that line to be refunded.",
            "{name}: the {p} from order {o} came broken, all of it. Please refund that line.",
        ],
        "zh": ["订单{o}里的{p}到货就坏了，{name}要求退这一项的钱。", "{name}：订单{o}的{p}全都摔坏了，请退款。"],
    },
}
_DONE = {
    "shipping": "I have refunded the {fee:g} yuan shipping fee of order {o}; sorry for the late delivery.",
    "cancel": "Order {o} had not shipped yet, so I have cancelled it.",
    "shipped": "Order {o} has already shipped, so it can no longer be cancelled; you can return it once it arrives.",
    "damaged": "I have refunded {amount:g} yuan for the {p} of order {o}.",
}


def _call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def _result(con: sqlite3.Connection, tool: str, order: int) -> dict:
    cur = con.execute(SQL[tool], {"order_id": order})
    return {"columns": [d[0] for d in cur.description], "rows": [list(r) for r in cur.fetchall()]}


def _tool(name: str, payload) -> dict:
    return {"role": "tool", "name": name, "content": json.dumps(payload, ensure_ascii=False, default=str)}


def _episode(con: sqlite3.Connection, kind: str, order: int, product: str | None) -> tuple[list, list[dict]]:
    """(gold outcome rows, worked transcript) for one ticket, from the order's data in shop.db."""
    if kind == "damaged":
        items = _result(con, "get_order_items", order)
        _, qty, price = next(r for r in items["rows"] if r[0] == product)
        amount = round(qty * price, 2)
        refund = _call("issue_refund", order_id=order, amount=amount, reason="damaged")
        return [["refund", order, amount, "damaged"]], [
            {"role": "assistant", "content": _call("get_order_items", order_id=order)},
            _tool("get_order_items", items),
            {"role": "assistant", "content": f"The {product} line is {qty} x {price:g} yuan.\n{refund}"},
            _tool("issue_refund", {"rows_affected": 1}),
            {"role": "assistant", "content": _DONE["damaged"].format(amount=amount, p=product, o=order)},
        ]
    info = _result(con, "get_order", order)
    shipment, fee = info["rows"][0][4], info["rows"][0][5]
    look = [{"role": "assistant", "content": _call("get_order", order_id=order)}, _tool("get_order", info)]
    if kind == "shipping":
        act = _call("issue_refund", order_id=order, amount=fee, reason="late_delivery")
        return [["refund", order, fee, "late_delivery"]], look + [
            {"role": "assistant", "content": act},
            _tool("issue_refund", {"rows_affected": 1}),
            {"role": "assistant", "content": _DONE["shipping"].format(fee=fee, o=order)},
        ]
    if shipment != "pending":
        return [], look + [{"role": "assistant", "content": _DONE["shipped"].format(o=order)}]
    return [["cancel", order, None, None]], look + [
        {"role": "assistant", "content": _call("cancel_order", order_id=order)},
        _tool("cancel_order", {"rows_affected": 1}),
        {"role": "assistant", "content": _DONE["cancel"].format(o=order)},
    ]


def _candidates(con: sqlite3.Connection) -> dict[str, list[tuple[int, str, str | None]]]:
    """(order, customer, product) each kind can be asked about, in a fixed order."""
    orders = "SELECT o.order_id, o.customer FROM orders o JOIN shipments s USING (order_id) WHERE "
    return {
        "shipping": [
            (o, c, None)
            for o, c in con.execute(
                orders + "s.status = 'delivered' AND s.shipping_fee > 0 AND o.status = 'completed' ORDER BY 1"
            )
        ],
        "cancel": [(o, c, None) for o, c in con.execute(orders + "s.status IN ('pending', 'shipped') ORDER BY 1")],
        "damaged": list(
            con.execute(
                "SELECT o.order_id, o.customer, p.name FROM orders o JOIN shipments s USING (order_id) "
                "JOIN order_items i USING (order_id) JOIN products p USING (product_id) "
                "WHERE s.status = 'delivered' AND o.status = 'completed' ORDER BY 1, 3"
            )
        ),
    }


def rows(db_path: Path, n: int, rng: random.Random, worked_fraction: float) -> list[dict]:
    """n agent-console records (one ticket an order, so fewer when shop.db runs out of orders), about
    worked_fraction of them (at least one when it is above 0) with the worked transcript; every draw
    comes from `rng`."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        pools = _candidates(con)
        for pool in pools.values():
            rng.shuffle(pool)
        worked = set(rng.sample(range(n), min(n, max(int(worked_fraction > 0), round(n * worked_fraction)))))
        out, used = [], set()
        for k in range(n):
            kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
            pool = [c for c in pools[kind] if c[0] not in used] or [
                c for p in pools.values() for c in p if c[0] not in used
            ]
            if not pool:  # one ticket an order: shop.db's orders are all used
                break
            order, customer, product = pool[0]
            kind = next(k2 for k2, p in pools.items() if (order, customer, product) in p)
            used.add(order)
            lang = "zh" if rng.random() < 0.3 else "en"
            ask = rng.choice(_ASKS[kind][lang]).format(name=customer, o=order, d=rng.randint(3, 12), p=product)
            gold, transcript = _episode(con, kind, order, product)
            out.append(
                {
                    "case_id": f"CASE-{k + 1:05d}",
                    "opened_at": f"{TODAY}T{rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}:00+08:00",
                    "lang": lang,
                    "queue": CATEGORY,
                    "kind": kind,
                    "message": ask,
                    "outcome": json.dumps(gold, ensure_ascii=False),
                    "transcript": json.dumps(transcript, ensure_ascii=False) if k in worked else None,
                }
            )
        return out
    finally:
        con.close()
