"""SQL report requests against shop.db, each with a gold query (the `sql` verifier's reference).

A request is a template ("total refund amount for store 3 in March") filled with parameters drawn
from shop.db itself; only parameter sets whose gold query returns a non-empty, non-NULL answer are
used, so the reference always means something. The analyst's reply (the solution) is the gold query
in a ```sql block. `SqlTasks(db_path)` checks every candidate once, then draws tasks from them.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from catalog import MONTHS_EN, STORES
from tasks_math import Task

_MONTH_RANGE = "'2026-{m:02d}-01' AND {col} < '2026-{n:02d}-01'"

# (key, English, Chinese, gold SQL); placeholders: s store id, sname, city, city_zh, m month,
# month (English name), x threshold, r reason, c product category, k count.
TEMPLATES = [
    (
        "refund_store_month",
        "What is the total refund amount for store {s} ({sname}) in {month} 2026?",
        "{s}号门店（{sname}）2026年{m}月的退款总额是多少元？",
        "SELECT ROUND(SUM(r.amount), 2) AS total_refund FROM refunds r JOIN orders o ON o.order_id = r.order_id "
        "WHERE o.store_id = {s} AND r.refund_date >= " + _MONTH_RANGE.format(m=0, n=0, col="r.refund_date"),
    ),
    (
        "orders_store_month",
        "How many orders did store {s} ({sname}) take in {month} 2026, cancelled ones included?",
        "{s}号门店（{sname}）2026年{m}月一共有多少笔订单（含已取消）？",
        "SELECT COUNT(*) AS n_orders FROM orders WHERE store_id = {s} AND order_date >= "
        + _MONTH_RANGE.format(m=0, n=0, col="order_date"),
    ),
    (
        "orders_over",
        "How many orders have a total (sum of qty x unit price) over {x} yuan?",
        "订单金额（数量×单价之和）超过{x}元的订单有多少笔？",
        "SELECT COUNT(*) AS n_orders FROM (SELECT order_id, SUM(qty * unit_price) AS total FROM order_items "
        "GROUP BY order_id) WHERE total > {x}",
    ),
    (
        "top_product_store",
        "Which product sold the most units at store {s} ({sname})? Give the product name and units.",
        "{s}号门店（{sname}）销量（件数）最高的商品是哪个？给出商品名和件数。",
        "SELECT p.name, SUM(i.qty) AS units FROM order_items i JOIN orders o ON o.order_id = i.order_id "
        "JOIN products p ON p.product_id = i.product_id WHERE o.store_id = {s} AND o.status <> 'cancelled' "
        "GROUP BY p.product_id ORDER BY units DESC, p.name LIMIT 1",
    ),
    (
        "revenue_by_store_month",
        "List revenue per store for {month} 2026 (completed orders only), highest first.",
        "列出2026年{m}月各门店的营业额（只算已完成订单），从高到低排序。",
        "SELECT o.store_id, ROUND(SUM(i.qty * i.unit_price), 2) AS revenue FROM orders o "
        "JOIN order_items i ON i.order_id = o.order_id WHERE o.status = 'completed' AND o.order_date >= "
        + _MONTH_RANGE.format(m=0, n=0, col="o.order_date")
        + " GROUP BY o.store_id ORDER BY revenue DESC",
    ),
    (
        "refunds_by_reason",
        "How many refunds were issued for the reason '{r}'?",
        "退款原因为'{r}'的退款一共有多少笔？",
        "SELECT COUNT(*) AS n_refunds FROM refunds WHERE reason = '{r}'",
    ),
    (
        "avg_order_city",
        "What is the average order value (sum of qty x unit price) for stores in {city}?",
        "{city_zh}门店的平均订单金额（数量×单价之和）是多少？",
        "SELECT ROUND(AVG(total), 2) AS avg_order FROM (SELECT o.order_id, SUM(i.qty * i.unit_price) AS total "
        "FROM orders o JOIN order_items i ON i.order_id = o.order_id JOIN stores s ON s.store_id = o.store_id "
        "WHERE s.city = '{city}' GROUP BY o.order_id)",
    ),
    (
        "frequent_customers",
        "Which customers placed more than {k} orders? Show name and order count, most orders first.",
        "哪些顾客下单超过{k}次？显示姓名和订单数，按订单数从多到少排列。",
        "SELECT customer, COUNT(*) AS n_orders FROM orders GROUP BY customer HAVING COUNT(*) > {k} "
        "ORDER BY n_orders DESC, customer",
    ),
    (
        "cheap_products",
        "List the {c} products priced under {x} yuan, cheapest first.",
        "列出单价低于{x}元的{c}类商品，按价格从低到高排序。",
        "SELECT name, unit_price FROM products WHERE category = '{c}' AND unit_price < {x} ORDER BY unit_price, name",
    ),
    (
        "refund_rate_store",
        "What share of store {s}'s ({sname}) orders got a refund? Answer as a fraction rounded to 3 decimals.",
        "{s}号门店（{sname}）有退款的订单占其订单总数的比例是多少？保留3位小数。",
        "SELECT ROUND(CAST(COUNT(DISTINCT r.order_id) AS REAL) / COUNT(DISTINCT o.order_id), 3) AS refund_share "
        "FROM orders o LEFT JOIN refunds r ON r.order_id = o.order_id WHERE o.store_id = {s}",
    ),
]


def _month_sql(sql: str, m: int) -> str:
    # the month range placeholders were pre-filled with 00; put in the real month and the next one
    return sql.replace("2026-00-01", f"2026-{m:02d}-01", 1).replace("2026-00-01", f"2026-{m + 1:02d}-01", 1)


def _candidates() -> list[tuple[str, dict]]:
    out = []
    for key, _en, _zh, _sql in TEMPLATES:
        if key in ("refund_store_month", "orders_store_month"):
            out += [(key, {"s": s, "m": m}) for s, *_ in STORES for m in range(1, 7)]
        elif key in ("top_product_store", "refund_rate_store"):
            out += [(key, {"s": s, "m": 0}) for s, *_ in STORES]
        elif key == "orders_over":
            out += [(key, {"x": x, "m": 0}) for x in (50, 100, 150, 200, 300, 400, 500, 800)]
        elif key == "revenue_by_store_month":
            out += [(key, {"m": m}) for m in range(1, 7)]
        elif key == "refunds_by_reason":
            out += [(key, {"r": r, "m": 0}) for r in ("damaged", "wrong_size", "late_delivery", "changed_mind")]
        elif key == "avg_order_city":
            out += [(key, {"s": s, "m": 0}) for s, *_ in STORES]
        elif key == "frequent_customers":
            out += [(key, {"k": k, "m": 0}) for k in (14, 16, 18, 20)]
        elif key == "cheap_products":
            out += [
                (key, {"c": c, "x": x, "m": 0})
                for c in ("kitchen", "stationery", "apparel", "electronics", "home")
                for x in (20, 30, 50, 100)
            ]
    return out


def render(key: str, params: dict, lang: str) -> tuple[str, str]:
    """(question, gold SQL) for one template and parameter set."""
    _key, en, zh, sql = next(t for t in TEMPLATES if t[0] == key)
    store = next((st for st in STORES if st[0] == params.get("s")), STORES[0])
    m = params.get("m") or 1
    values = {"sname": store[1], "city": store[2], "city_zh": store[3], "month": MONTHS_EN[m - 1], **params}
    gold = _month_sql(sql.format(**values), m) if "2026-00-01" in sql else sql.format(**values)
    return (en if lang == "en" else zh).format(**values), gold


class SqlTasks:
    """Draws SQL report requests whose gold query has an answer on the given shop.db."""

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        con = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            self.pool = [(k, p) for k, p in _candidates() if self._has_answer(con, render(k, p, "en")[1])]
        finally:
            con.close()

    @staticmethod
    def _has_answer(con: sqlite3.Connection, gold: str) -> bool:
        rows = con.execute(gold).fetchall()
        return bool(rows) and all(v is not None for v in rows[0]) and rows[0] != (0,)

    def __call__(self, rng: random.Random, lang: str) -> Task:
        key, params = rng.choice(self.pool)
        question, gold = render(key, params, lang)
        return Task("sql", lang, question, gold, f"```sql\n{gold};\n```")
