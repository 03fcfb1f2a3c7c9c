"""SQL verifier: comparison rules (multiset, ORDER BY, permuted columns, float tolerance), DuckDB,
and the hack suite (writes, multiple statements, runaway queries): all 0, database unchanged."""

from __future__ import annotations

import hashlib
import time

import pytest

from rlvrflow.verifiers import verify
from rlvrflow.verifiers.sql import results_match

GOLD = "SELECT customer, SUM(total) FROM orders GROUP BY customer"


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "pred,ok",
    [
        (GOLD, True),
        ("```sql\nselect customer, sum(total) from orders group by customer;\n```", True),
        ("SELECT SUM(total) AS s, customer FROM orders GROUP BY customer ORDER BY s", True),
        ("select customer, sum(total) + 1e-9 from orders group by customer", True),
        ("select customer, sum(total) + 0.01 from orders group by customer", False),
        ("select customer, count(*) from orders group by customer", False),
        ("select distinct customer, 0 from orders", False),
        ("select customer, sum(total) from orders group by customer union all select 'zed', 1", False),
    ],
)
def test_comparison(shop_db, pred, ok):
    assert verify("sql", pred, GOLD, {"database": str(shop_db)}).correct is ok


def test_order_matters_only_with_gold_order_by(shop_db):
    p = {"database": str(shop_db)}
    desc = "select id from orders order by id desc"
    assert not verify("sql", desc, "select id from orders order by id", p).correct
    assert verify("sql", desc, "select id from orders", p).correct
    assert verify(
        "sql",
        "select sku, n from (select sku, count(*) n from items group by sku) order by n",
        "select sku, count(*) from items group by sku",
        p,
    ).correct


def test_duplicates_count():
    assert not results_match([(1,), (1,), (2,)], [(1,), (2,), (2,)], False, 1e-6)
    assert results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], False, 1e-6)
    assert results_match([(3,)], [(3.0,)], False, 1e-6)


def test_duckdb(tmp_path):
    import duckdb

    db = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(db))
    conn.execute("create table t(x integer); insert into t values (1), (2), (3)")
    conn.close()
    p = {"database": str(db), "timeout_s": 2}
    assert verify("sql", "select x from t", "select x from t order by x", p).correct
    assert verify("sql", "delete from t", "select x from t", p).score == 0
    assert verify("sql", "select x from t", "select x from t", p).correct


def test_gold_that_fails_is_an_error(shop_db):
    v = verify("sql", "select 1", "select nope from orders", {"database": str(shop_db)})
    assert v.status == "error" and "gold SQL" in v.detail
    assert verify("sql", "select 1", "select 1", {"database": "/no/such.db"}).status == "error"


HACKS = {
    "delete rows": "DELETE FROM orders",
    "drop table": "```sql\nDROP TABLE orders\n```",
    "update": "UPDATE orders SET total = 0",
    "insert": "INSERT INTO orders(customer, total) VALUES ('x', 1)",
    "stacked statements": f"{GOLD}; DELETE FROM orders",
    "select then drop in fence": f"```sql\n{GOLD};\nDROP TABLE orders;\n```",
    "attach another db": "ATTACH DATABASE '/tmp/rlvrflow_attached.db' AS x",
    "pragma": "PRAGMA query_only = OFF",
    "create temp table": "CREATE TEMP TABLE t AS SELECT * FROM orders",
    "vacuum into": "VACUUM INTO '/tmp/rlvrflow_copy.db'",
    "infinite recursive cte": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "cross join blowup": "SELECT count(*) FROM orders a, orders b, orders c, orders d, orders e, orders f, orders g, "
    "orders h, orders i, orders j, orders k, orders l, orders m, orders n",
    "row flood": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 2000000) SELECT n, 'x' FROM r",
    "empty": "",
    "prose": "I would use a GROUP BY on the customer column.",
    "load extension": "SELECT load_extension('/tmp/evil.so')",
}


@pytest.mark.parametrize("name", list(HACKS))
def test_hack_suite(shop_db, name):
    before = digest(shop_db)
    t0 = time.monotonic()
    v = verify("sql", HACKS[name], GOLD, {"database": str(shop_db), "timeout_s": 2, "max_rows": 100_000})
    assert v.score == 0.0 and v.status != "correct", v
    assert time.monotonic() - t0 < 10
    assert digest(shop_db) == before, "the database must never change"


def test_a_runaway_query_is_a_timeout_status(shop_db):
    forever = "```sql\nWITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r\n```"
    v = verify("sql", forever, GOLD, {"database": str(shop_db), "timeout_s": 0.5})
    assert (v.status, v.score) == ("timeout", 0.0), v
