"""An agent's environment as data: tools backed by the team's own SQLite database, and the outcome check.

    env = Environment.model_validate({
        "database": "shop.db", "max_turns": 6,
        "tools": [{"name": "get_order_items", "description": "lines of an order",
                   "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}},
                                  "required": ["order_id"]},
                   "sql": "SELECT product_id, qty, unit_price FROM order_items WHERE order_id = :order_id"},
                  {"name": "issue_refund", ..., "sql": "INSERT INTO refunds(...) VALUES (:order_id, ...)"}],
        "outcome": {"query": "SELECT order_id, amount FROM refunds WHERE refund_id > 100"}})

A tool is a SQL statement with named parameters (`:order_id`), bound from the call's arguments (never
formatted into the text), or a Python callable `package.module:function` called as
`function(conn, **arguments)` with the episode's connection; it returns anything JSON can write.
Every episode works on its own copy of the database in a temporary folder (`Sandbox`), so nothing an
episode does reaches the real file. The outcome check is one read-only query on the episode's end
state; the row's reference holds the rows it must return (a JSON array of rows), compared as the `sql`
verifier compares results. Left out: DuckDB databases, and running Python tools in a separate process
(they run in the episode's process, with its database copy, like the verifier pool's in-process checks).
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .sql import _deny_writes, _strip_literals, results_match

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_DENY_ATTACH = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolError(Exception):
    """A tool call that could not run (bad argument, SQL error, timeout): its text goes back to the
    policy as the tool's result, and the episode goes on."""


def sql_parameters(sql: str) -> list[str]:
    """The named parameters (`:name`) of a statement, in order of first use, string literals skipped."""
    return list(dict.fromkeys(_PARAM.findall(_strip_literals(sql))))


def _single(sql: str, where: str) -> str:
    text = sql.strip().rstrip(";").strip()
    if not sqlite3.complete_statement(text + ";") or ";" in _strip_literals(text):
        raise ValueError(f"{where} must be exactly one SQL statement")
    return text


def _import_callable(path: str) -> Callable:
    module, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not module or not attr:
        raise ValueError(f"{path!r} is not a dotted path; write 'package.module:function'")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {path!r}: {exc}") from None
    if not callable(fn):
        raise ValueError(f"{path!r} is not callable")
    return fn


class Tool(_Frozen):
    """One tool the policy may call: its name, what it does, its arguments' JSON Schema, and one
    implementation (`sql` or `python`)."""

    name: str = Field(pattern=_NAME, description="the name the policy calls, e.g. get_order_items")
    description: str = Field(min_length=1, description="what the tool does, shown to the policy")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments (an object schema)",
    )
    sql: str | None = Field(
        None,
        description=(
            "one SQL statement with named parameters, e.g. SELECT * FROM orders WHERE order_id = :order_id; "
            "every parameter must be a property of `parameters`"
        ),
    )
    python: str | None = Field(
        None, description=("dotted path of a callable 'package.module:function', called as function(conn, **arguments)")
    )

    @field_validator("parameters")
    @classmethod
    def _schema(cls, schema: dict) -> dict:
        import jsonschema

        if schema.get("type") != "object":
            raise ValueError("the arguments' schema must have type: object")
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON Schema at {exc.json_path}: {exc.message}") from None
        return schema

    @field_validator("sql")
    @classmethod
    def _one_statement(cls, sql: str | None) -> str | None:
        return None if sql is None else _single(sql, "sql")

    @field_validator("python")
    @classmethod
    def _importable(cls, path: str | None) -> str | None:
        if path is not None:
            _import_callable(path)
        return path

    @model_validator(mode="after")
    def _one_implementation(self) -> "Tool":
        if (self.sql is None) == (self.python is None):
            raise ValueError(f"tool {self.name!r}: give exactly one of sql or python")
        if self.sql is not None:
            declared = set(self.parameters.get("properties", {}))
            missing = [p for p in sql_parameters(self.sql) if p not in declared]
            if missing:
                raise ValueError(
                    f"tool {self.name!r}: sql uses :{missing[0]}, which parameters.properties "
                    "does not declare; add it to the schema"
                )
        return self

    def schema(self) -> dict:
        """The tool in the OpenAI form that chat templates' `tools` argument takes."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class OutcomeCheck(_Frozen):
    """The query on the episode's end state whose rows the row's reference gives."""

    query: str = Field(
        min_length=1,
        description=(
            "one read-only SQL query on the end state, e.g. SELECT order_id, amount FROM refunds WHERE "
            "refund_id > 100 (the refunds the episode made)"
        ),
    )
    ordered: bool = Field(False, description="compare rows in order (else as a multiset)")
    float_tol: float = Field(1e-6, ge=0.0, description="relative tolerance of numbers, as the sql verifier's")

    @field_validator("query")
    @classmethod
    def _one_statement(cls, query: str) -> str:
        return _single(query, "outcome.query")


class Environment(_Frozen):
    """What an episode runs against: the database, the tools, the turn limit and the outcome check."""

    database: Path = Field(
        description=("the SQLite file each episode gets a fresh copy of; in a spec, relative to the spec file's folder")
    )
    tools: list[Tool] = Field(min_length=1, description="the tools: {name, description, parameters, sql | python}")
    max_turns: int = Field(
        6,
        ge=1,
        le=64,
        description=("most assistant messages in an episode; one still calling tools at the limit ends it unfinished"),
    )
    outcome: OutcomeCheck = Field(description="{query, ordered, float_tol}: the end-state check")
    instructions: str = Field("", description="system message put before the row's prompt (may be empty)")
    tool_timeout_s: float = Field(5.0, gt=0, description="wall-clock limit of one SQL tool call")
    max_result_rows: int = Field(50, ge=1, description="rows of a query tool's result shown to the policy")

    @field_validator("database")
    @classmethod
    def _sqlite(cls, path: Path) -> Path:
        if path.suffix in (".duckdb", ".ddb"):
            raise ValueError(f"{path}: environments run on SQLite files only; export the tables to SQLite")
        return path

    @field_validator("tools")
    @classmethod
    def _unique(cls, tools: list[Tool]) -> list[Tool]:
        names = [t.name for t in tools]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"tool {dup!r} is defined twice; keep one")
        return tools

    @classmethod
    def load(cls, mapping: dict, base_dir: Path) -> "Environment":
        """Validate an environment mapping, a relative `database` resolved against `base_dir`."""
        data = dict(mapping)
        if isinstance(data.get("database"), (str, Path)) and not Path(data["database"]).is_absolute():
            data["database"] = Path(base_dir) / data["database"]
        return cls.model_validate(data)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def schemas(self) -> list[dict]:
        return [t.schema() for t in self.tools]

    def check(self) -> None:
        """Compile every SQL statement against a copy of the database; ValueError naming the tool."""
        with Sandbox(self) as box:
            for tool in self.tools:
                if tool.sql is not None:
                    try:
                        box.conn.execute(f"EXPLAIN {tool.sql}", dict.fromkeys(sql_parameters(tool.sql)))
                    except sqlite3.Error as exc:
                        raise ValueError(
                            f"tool {tool.name!r}: its sql does not run on {self.database}: {exc}"
                        ) from None
            try:
                box.end_state(explain=True)
            except ValueError as exc:
                raise ValueError(f"{exc} (on {self.database})") from None


def expected_rows(reference: str) -> list[tuple]:
    """The outcome rows a row's reference gives: a JSON array of rows (arrays, or scalars for one
    column), `[]` when the episode must change nothing the query sees. ValueError if unreadable."""
    try:
        value = json.loads(reference)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the reference is not JSON ({exc.msg}); write the expected rows, e.g. [[123, 36.0]]"
        ) from None
    if not isinstance(value, list):
        raise ValueError("the reference must be a JSON array of the outcome query's rows, e.g. [[123, 36.0]]")
    rows = [tuple(r) if isinstance(r, list) else (r,) for r in value]
    if any(isinstance(c, (dict, list)) for row in rows for c in row) or len({len(r) for r in rows}) > 1:
        raise ValueError("every expected row must be a list of the same number of plain values")
    return rows


def outcome_matches(expected: list[tuple], got: list[tuple], check: OutcomeCheck) -> bool:
    return results_match(expected, got, check.ordered, check.float_tol)


class Sandbox:
    """One episode's copy of the database, in its own temporary folder, removed on close."""

    def __init__(self, env: Environment):
        if not env.database.is_file():
            raise FileNotFoundError(f"environment.database {env.database} does not exist; build it or fix the path")
        self.env = env
        self.folder = Path(tempfile.mkdtemp(prefix="rlvrflow-episode-"))
        self.path = self.folder / env.database.name
        shutil.copyfile(env.database, self.path)
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.conn.set_authorizer(
            lambda action, *_: sqlite3.SQLITE_DENY if action in _DENY_ATTACH else sqlite3.SQLITE_OK
        )

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def run_tool(self, tool: Tool, arguments: dict) -> Any:
        """The tool's result (JSON-able); ToolError with the reason the policy is shown."""
        if tool.python is not None:
            try:
                result = _import_callable(tool.python)(self.conn, **arguments)
                self.conn.commit()
                json.dumps(result)
            except Exception as exc:  # noqa: BLE001 - the user's tool failing is the tool's result
                self.conn.rollback()
                raise ToolError(f"{tool.name} failed: {type(exc).__name__}: {exc}") from None
            return result
        params = {}
        for name in sql_parameters(tool.sql):
            value = arguments.get(name)
            if isinstance(value, (dict, list)):
                raise ToolError(f"{tool.name}: argument {name!r} must be a single value")
            params[name] = value
        deadline = time.monotonic() + self.env.tool_timeout_s
        self.conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        try:
            cur = self.conn.execute(tool.sql, params)
            rows = cur.fetchmany(self.env.max_result_rows + 1) if cur.description else None
            self.conn.commit()
        except sqlite3.Error as exc:
            self.conn.rollback()
            if "interrupted" in str(exc):
                raise ToolError(f"{tool.name} took longer than {self.env.tool_timeout_s:g} s") from None
            raise ToolError(f"{tool.name} failed: {exc}") from None
        finally:
            self.conn.set_progress_handler(None, 0)
        if rows is None:
            return {"rows_affected": cur.rowcount}
        out = {"columns": [d[0] for d in cur.description], "rows": [list(r) for r in rows[: self.env.max_result_rows]]}
        if len(rows) > self.env.max_result_rows:
            out["truncated"] = True
        return out

    def end_state(self, explain: bool = False) -> list[tuple]:
        """The outcome query's rows on this copy, read-only; ValueError naming outcome.query if it
        cannot run (a write, a missing table, past tool_timeout_s)."""
        self.conn.set_authorizer(_deny_writes)
        deadline = time.monotonic() + self.env.tool_timeout_s
        self.conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        try:
            return self.conn.execute(("EXPLAIN " if explain else "") + self.env.outcome.query).fetchall()
        except sqlite3.Error as exc:
            raise ValueError(f"outcome.query does not run: {exc}") from None
        finally:
            self.conn.set_progress_handler(None, 0)
            self.conn.set_authorizer(None)
