"""Builds shop.db, the SQLite database the retail domain's SQL report requests run against.

    python examples/retail/build_db.py --out examples/retail/shop.db [--seed 0]

The schema is the committed `schema.sql`; the rows (6 stores, 30 products, 320 orders with their
items, and refunds for roughly one order in five) are drawn from `random.Random(seed)` over the
catalog in `catalog.py`, so the same seed always gives the same data. Each order's shipment comes
from a stream of its own (`shipments`): a cancelled order's was cancelled, a returned one's
delivered, and a completed order placed from June 10 on is still pending or shipped half the time. The file is written to a
temporary name and renamed, so a reader never sees a half-built database. Stdlib only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from catalog import CUSTOMERS_EN, ORDER_STATUSES, PRODUCTS, REFUND_REASONS, STORES  # noqa: E402

N_ORDERS = 320
START = dt.date(2026, 1, 1)
DAYS = 181  # through 2026-06-30


def _orders(rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    orders, items = [], []
    for order_id in range(1, N_ORDERS + 1):
        day = START + dt.timedelta(days=rng.randrange(DAYS))
        store = rng.choice(STORES)[0]
        orders.append((order_id, store, rng.choice(CUSTOMERS_EN), day.isoformat(), rng.choice(ORDER_STATUSES)))
        for product in rng.sample(PRODUCTS, rng.randint(1, 4)):
            price = product[4]
            if rng.random() < 0.15:  # a promotion: 20% off, still a round number of jiao
                price = round(price * 0.8, 1)
            items.append((order_id, product[0], rng.randint(1, 5), float(price)))
    return orders, items


def _refunds(rng: random.Random, orders: list[tuple], items: list[tuple]) -> list[tuple]:
    by_order: dict[int, list[tuple]] = {}
    for item in items:
        by_order.setdefault(item[0], []).append(item)
    refunds = []
    for order_id, _store, _customer, day, status in orders:
        if status == "cancelled" or (status != "returned" and rng.random() > 0.15):
            continue
        item = rng.choice(by_order[order_id])
        qty = item[2] if status == "returned" else rng.randint(1, item[2])
        when = dt.date.fromisoformat(day) + dt.timedelta(days=rng.randint(1, 25))
        refunds.append(
            (len(refunds) + 1, order_id, when.isoformat(), round(qty * item[3], 2), rng.choice(REFUND_REASONS))
        )
    return refunds


CARRIERS = ("SF Express", "JD Logistics", "China Post")
RECENT = "2026-06-10"  # orders placed on or after it may not be delivered yet


def _shipments(rng: random.Random, orders: list[tuple]) -> list[tuple]:
    out = []
    for order_id, _store, _customer, day, status in orders:
        if status == "cancelled":
            state = "cancelled"
        elif status == "completed" and day >= RECENT:
            state = rng.choice(["pending", "shipped"])
        else:
            state = "delivered"
        out.append((order_id, rng.choice(CARRIERS), float(rng.choice([0, 6, 8, 10, 12])), state))
    return out


def build(path: Path, seed: int = 0) -> Path:
    """Write shop.db at `path` (atomically) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"shop.db:{seed}")
    orders, items = _orders(rng)
    refunds = _refunds(rng, orders, items)
    shipments = _shipments(random.Random(f"shop.db-shipments:{seed}"), orders)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript((HERE / "schema.sql").read_text(encoding="utf-8"))
        con.executemany("INSERT INTO stores VALUES (?, ?, ?)", [s[:3] for s in STORES])
        con.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", [(p[0], p[1], p[3], float(p[4])) for p in PRODUCTS])
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", orders)
        con.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?)", items)
        con.executemany("INSERT INTO refunds VALUES (?, ?, ?, ?, ?)", refunds)
        con.executemany("INSERT INTO shipments VALUES (?, ?, ?, ?)", shipments)
        con.commit()
    finally:
        con.close()
    os.replace(tmp, path)
    return path


def table_counts(path: Path) -> dict[str, int]:
    """Rows per table, for the manifest and the tests."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: con.execute(f"SELECT COUNT(*) FROM {n}").fetchone()[0] for n in names}
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "shop.db", help="database file to write")
    parser.add_argument("--seed", type=int, default=0, help="seed for the rows (default 0)")
    args = parser.parse_args(argv)
    print(build(args.out, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
