"""The `sql` verifier: run gold and predicted queries read-only and compare their results.

reference: the gold SQL. params: `database` (path to a SQLite file, or a DuckDB file ending in
.duckdb/.ddb), `timeout_s` (5), `float_tol` (1e-6 relative), `max_rows` (100000).

Safety: SQLite is opened with `mode=ro` URI plus `PRAGMA query_only`, and an authorizer denies
every write, ATTACH and PRAGMA; a progress handler interrupts the query at the deadline (so the
timeout really stops a runaway join). DuckDB opens `read_only=True` and is interrupted from a
timer. Only one statement is allowed. Errors and write attempts score 0.

Comparison (after Spider's test-suite evaluation, with a float tolerance): same row count; rows
as a multiset (duplicates count), in order only when the gold query has a top-level ORDER BY;
columns may be permuted (a gold column pairs with a predicted column holding the same values);
numbers compare with the relative tolerance, 3 == 3.0.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from collections import Counter
from itertools import permutations
from pathlib import Path

from . import verdict as V

_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite)?[^\n]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_WRITE_OPS = {
    sqlite3.SQLITE_INSERT,
    sqlite3.SQLITE_UPDATE,
    sqlite3.SQLITE_DELETE,
    sqlite3.SQLITE_CREATE_TABLE,
    sqlite3.SQLITE_DROP_TABLE,
    sqlite3.SQLITE_ATTACH,
    sqlite3.SQLITE_DETACH,
    sqlite3.SQLITE_PRAGMA,
    sqlite3.SQLITE_ALTER_TABLE,
    sqlite3.SQLITE_CREATE_INDEX,
    sqlite3.SQLITE_DROP_INDEX,
    sqlite3.SQLITE_CREATE_VIEW,
    sqlite3.SQLITE_CREATE_TRIGGER,
    sqlite3.SQLITE_TRANSACTION,
    sqlite3.SQLITE_CREATE_TEMP_TABLE,
    sqlite3.SQLITE_CREATE_VTABLE,
    sqlite3.SQLITE_SAVEPOINT,
}
MAX_PERMUTED_COLUMNS = 8


class QueryError(Exception):
    pass


def extract_sql(response: str) -> str | None:
    blocks = _FENCE.findall(response)
    text = blocks[-1] if blocks else response
    m = re.search(r"(?is)\b(select|with)\b.*", text) if not blocks else None
    sql = (m.group(0) if m else text).strip().rstrip(";").strip()
    return sql or None


def _single_statement(sql: str) -> str:
    stripped = sql.strip().rstrip(";").strip()
    if not sqlite3.complete_statement(stripped + ";") or ";" in _strip_literals(stripped):
        raise QueryError("exactly one SQL statement is allowed")
    return stripped


def _strip_literals(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "''", sql)


def _deny_writes(action, *_):
    return sqlite3.SQLITE_DENY if action in _WRITE_OPS else sqlite3.SQLITE_OK


def run_sqlite(db: Path, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    sql = _single_statement(sql)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_deny_writes)
        deadline = time.monotonic() + timeout_s
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        try:
            cur = conn.execute(sql)
            rows = cur.fetchmany(max_rows + 1)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise TimeoutError(f"query exceeded {timeout_s:g} s") from None
            raise QueryError(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise QueryError(str(exc)) from None
        if len(rows) > max_rows:
            raise QueryError(f"query returned more than {max_rows} rows")
        return rows
    finally:
        conn.close()


def run_duckdb(db: Path, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    import duckdb

    sql = _single_statement(sql)
    conn = duckdb.connect(str(db), read_only=True)
    timer = threading.Timer(timeout_s, conn.interrupt)
    timer.start()
    try:
        rows = conn.execute(sql).fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        raise TimeoutError(f"query exceeded {timeout_s:g} s") from None
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    finally:
        timer.cancel()
        conn.close()
    if len(rows) > max_rows:
        raise QueryError(f"query returned more than {max_rows} rows")
    return rows


def run_query(db: Path, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    if db.suffix in (".duckdb", ".ddb"):
        return run_duckdb(db, sql, timeout_s, max_rows)
    return run_sqlite(db, sql, timeout_s, max_rows)


def _cell(value, tol: float):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        f = float(value)
        if f == int(f) and abs(f) < 2**53:
            return int(f)
        digits = max(1, int(round(-math.log10(tol)))) if tol > 0 else 15
        return float(f"{f:.{digits}g}")
    if isinstance(value, bytes):
        return value.hex()
    return value if value is None else str(value)


def _has_order_by(sql: str) -> bool:
    depth, text = 0, _strip_literals(sql).lower()
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and text.startswith("order by", i):
            return True
    return False


def results_match(gold: list[tuple], pred: list[tuple], ordered: bool, tol: float) -> bool:
    if len(gold) != len(pred):
        return False
    if not gold:
        return True
    g = [tuple(_cell(c, tol) for c in row) for row in gold]
    p = [tuple(_cell(c, tol) for c in row) for row in pred]
    if len(g[0]) != len(p[0]):
        return False
    for perm in _column_permutations(g, p):
        q = [tuple(row[i] for i in perm) for row in p]
        if (q == g) if ordered else (Counter(q) == Counter(g)):
            return True
    return False


def _column_permutations(g: list[tuple], p: list[tuple]):
    """Orders of predicted columns whose value multisets match the gold columns, identity first."""
    n = len(g[0])
    gcols = [Counter(row[i] for row in g) for i in range(n)]
    pcols = [Counter(row[i] for row in p) for i in range(n)]
    options = [[j for j in range(n) if pcols[j] == gcols[i]] for i in range(n)]
    if any(not o for o in options):
        return
    if n > MAX_PERMUTED_COLUMNS:
        yield tuple(range(n))
        return
    for perm in permutations(range(n)):
        if all(perm[i] in options[i] for i in range(n)):
            yield perm


def verify_sql(response: str, reference: str, params: dict) -> V.Verdict:
    db = params.get("database")
    if not db or not Path(db).is_file():
        return V.error(f"params.database {db!r} is not an existing database file")
    db = Path(db)
    timeout_s = float(params.get("timeout_s", 5.0))
    max_rows = int(params.get("max_rows", 100_000))
    tol = float(params.get("float_tol", 1e-6))
    try:
        gold = run_query(db, reference, timeout_s, max_rows)
    except (QueryError, TimeoutError) as exc:
        return V.error(f"gold SQL fails: {exc}")
    pred_sql = extract_sql(response)
    if not pred_sql:
        return V.unparsed("no SQL query found in the response")
    try:
        pred = run_query(db, pred_sql, timeout_s, max_rows)
    except TimeoutError as exc:
        return V.timeout(str(exc), V.clip(pred_sql))
    except QueryError as exc:
        return V.wrong(V.clip(pred_sql), f"query failed: {V.clip(exc, 200)}")
    ordered = _has_order_by(reference)
    if results_match(gold, pred, ordered, tol):
        return V.correct(V.clip(pred_sql), f"{len(gold)} rows match ({'ordered' if ordered else 'as a multiset'})")
    return V.wrong(V.clip(pred_sql), f"result differs: gold has {len(gold)} rows, prediction {len(pred)}")


def check_reference(reference: str, params: dict) -> str | None:
    v = verify_sql(f"```sql\n{reference}\n```", reference, params)
    return None if v.correct else f"gold SQL does not verify: {v.detail}"


def solution_from_reference(reference: str, prompt: str) -> str:
    return f"```sql\n{reference.strip()}\n```"
