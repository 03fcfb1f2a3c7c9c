"""Environments and episodes on the retail shop's schema: a refund that needs a lookup first, scored on
the end state; scripted correct episodes score 1, the hack suite scores no correctness."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvrflow.verifiers.config import TurnPenalty
from rlvrflow.verifiers.environment import Environment, expected_rows, sql_parameters
from rlvrflow.verifiers.episode import (
    ENVIRONMENT,
    FINAL,
    MAX_TURNS,
    POLICY,
    PROMPT,
    EpisodeRewardConfig,
    episode_reward,
    run_episode,
    run_episodes,
)
from rlvrflow.verifiers.function_call import verify_function_call

SCHEMA = Path(__file__).resolve().parents[2] / "examples" / "retail" / "schema.sql"
ROWS = """
INSERT INTO stores VALUES (1, 'Riverside', 'Shanghai');
INSERT INTO products VALUES (1, 'Kettle', 'kitchen', 45.0), (2, 'Mug', 'kitchen', 12.5),
                            (3, 'Notebook', 'stationery', 8.0), (4, 'Lamp', 'home', 60.0);
INSERT INTO orders VALUES (7, 1, 'Ann Lee', '2026-03-02', 'completed'),
                          (8, 1, 'Bo Chen', '2026-03-05', 'completed'),
                          (9, 1, 'Ann Lee', '2026-04-11', 'completed');
-- the kettle of order 7 was on promotion: the amount is in the order lines, not the catalog
INSERT INTO order_items VALUES (7, 1, 1, 36.0), (7, 2, 2, 12.5), (8, 4, 2, 60.0), (8, 3, 3, 8.0),
                               (9, 2, 1, 12.5);
INSERT INTO refunds VALUES (1, 9, '2026-04-20', 12.5, 'changed_mind');
"""
TASKS = [  # (order, damaged product, gold amount)
    (7, "Kettle", 36.0),
    (8, "Lamp", 120.0),
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA.read_text(encoding="utf-8") + ROWS)
    con.commit()
    con.close()
    return path


def _spec(db: Path) -> dict:
    order_arg = {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    return {
        "database": str(db),
        "max_turns": 5,
        "instructions": "You work the support desk of a shop. Use the tools.",
        "tools": [
            {
                "name": "get_order",
                "description": "an order's customer, date and status",
                "parameters": order_arg,
                "sql": "SELECT order_id, customer, order_date, status FROM orders WHERE order_id = :order_id",
            },
            {
                "name": "get_order_items",
                "description": "the lines of an order, with the price paid",
                "parameters": order_arg,
                "sql": "SELECT p.name, i.qty, i.unit_price FROM order_items i JOIN products p USING (product_id) "
                "WHERE i.order_id = :order_id",
            },
            {
                "name": "find_orders",
                "description": "a customer's orders",
                "parameters": {
                    "type": "object",
                    "properties": {"customer": {"type": "string"}},
                    "required": ["customer"],
                },
                "sql": "SELECT order_id, order_date FROM orders WHERE customer = :customer",
            },
            {
                "name": "issue_refund",
                "description": "refund an amount of an order",
                "parameters": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["order_id", "amount", "reason"],
                    "properties": {
                        "order_id": {"type": "integer"},
                        "amount": {"type": "number"},
                        "reason": {"type": "string"},
                    },
                },
                "sql": "INSERT INTO refunds (order_id, refund_date, amount, reason) "
                "VALUES (:order_id, '2026-07-01', :amount, :reason)",
            },
        ],
        "outcome": {"query": "SELECT order_id, amount, reason FROM refunds WHERE refund_id > 1"},
    }


@pytest.fixture
def env(db: Path) -> Environment:
    return Environment.model_validate(_spec(db))


def _row(order: int, product: str, amount: float) -> dict:
    return {
        "prompt": f"The {product.lower()} of order {order} arrived damaged. Please refund it.",
        "reference": json.dumps([[order, amount, "damaged"]]),
    }


def _call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def _ticket(messages: list[dict]) -> tuple[int, str]:
    text = next(m["content"] for m in messages if m["role"] == "user")
    product, order = re.search(r"The (\w+) of order (\d+)", text).groups()
    return int(order), product


def _turn(messages: list[dict]) -> int:
    return sum(m["role"] == "assistant" for m in messages)


def _last_result(messages: list[dict]) -> dict:
    return json.loads(next(m["content"] for m in reversed(messages) if m["role"] == "tool"))


def agent(messages: list[dict]) -> str:
    """The right episode: read the order's lines, refund the damaged line's amount, then reply."""
    order, product = _ticket(messages)
    turn = _turn(messages)
    if turn == 0:
        return _call("get_order_items", order_id=order)
    if turn == 1:
        lines = _last_result(messages)["rows"]
        name, qty, price = next(r for r in lines if r[0].lower() == product.lower())
        return f"The {name} line is {qty} x {price}.\n" + _call(
            "issue_refund", order_id=order, amount=qty * price, reason="damaged"
        )
    return "I have refunded the damaged item; the money is on its way back to you."


def _db_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the right episodes ------------------------------------------------------------------------------


def test_correct_episode_scores_one_and_its_transcript_says_who_wrote_what(env, db):
    before = _db_digest(db)
    ep = run_episode(env, _row(*TASKS[0]), agent)
    assert ep.verdict.correct and ep.stop == FINAL
    assert ep.end_state == [(7, 36.0, "damaged")]
    assert [m["role"] for m in ep.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert ep.sources == [PROMPT, PROMPT, POLICY, ENVIRONMENT, POLICY, ENVIRONMENT, POLICY]
    assert ep.loss_mask == [0, 0, 1, 0, 1, 0, 1]
    assert json.loads(ep.messages[3]["content"])["rows"] == [["Kettle", 1, 36.0], ["Mug", 2, 12.5]]
    assert json.loads(ep.messages[5]["content"]) == {"rows_affected": 1}
    assert [(r.name, r.ok) for r in ep.tool_runs] == [("get_order_items", True), ("issue_refund", True)]
    assert ep.final_reply.startswith("I have refunded")
    r = episode_reward(ep)
    assert (r.correctness, r.format, r.turn_penalty) == (1.0, 1.0, 0.0) and r.total == pytest.approx(1.1)
    assert _db_digest(db) == before  # the episode worked on its own copy
    saved = json.loads(json.dumps(ep.to_dict()))
    assert saved["end_state"] == [[7, 36.0, "damaged"]] and saved["verdict"]["status"] == "correct"
    assert saved["sources"] == ep.sources and saved["tool_runs"][1]["arguments"]["amount"] == 36.0


def test_batched_episodes_are_independent_and_one_policy_call_serves_every_open_conversation(env, db):
    before = _db_digest(db)
    calls = []

    def batched(conversations):
        calls.append(len(conversations))
        return [agent(m) for m in conversations]

    rows = [_row(*t) for t in TASKS] + [_row(*TASKS[0])]
    episodes = run_episodes(env, rows, batched)
    assert calls == [3, 3, 3]
    assert [ep.end_state for ep in episodes] == [
        [(7, 36.0, "damaged")],
        [(8, 120.0, "damaged")],
        [(7, 36.0, "damaged")],
    ]
    assert all(ep.verdict.correct for ep in episodes)
    assert _db_digest(db) == before


def test_conversations_leave_the_batch_when_they_end(env):
    seen = []

    def batched(conversations):
        seen.append(len(conversations))
        return ["No refund is possible." if _ticket(m)[0] == 8 else agent(m) for m in conversations]

    episodes = run_episodes(env, [_row(*TASKS[0]), _row(*TASKS[1])], batched)
    assert seen == [2, 1, 1]
    assert [ep.verdict.correct for ep in episodes] == [True, False]
    assert episodes[1].assistant_turns == 1


def test_a_wrong_amount_from_the_catalog_price_scores_zero(env):
    def catalog_guess(messages):
        return _call("issue_refund", order_id=7, amount=45.0, reason="damaged") if _turn(messages) == 0 else "Refunded."

    ep = run_episode(env, _row(*TASKS[0]), catalog_guess)
    assert ep.verdict.status == "wrong" and "expected" in ep.verdict.detail


def test_max_turns_ends_an_unfinished_episode_without_format_and_with_the_turn_penalty(env):
    ep = run_episode(env, _row(*TASKS[0]), lambda m: _call("get_order", order_id=7))
    assert ep.stop == MAX_TURNS and ep.assistant_turns == env.max_turns and ep.final_reply == ""
    r = episode_reward(ep, EpisodeRewardConfig(turns=TurnPenalty(per_turn=0.05, free_turns=2)))
    assert (r.format, r.correctness) == (0.0, 0.0)
    assert r.turn_penalty == pytest.approx(0.15) and r.total == pytest.approx(-0.15)


def test_the_spec_sets_the_turn_penalty_in_verifiers_reward_and_the_episode_reward_reads_it(env):
    from rlvrflow.verifiers.config import RewardConfig

    reward = RewardConfig.model_validate({"format_weight": 0.2, "turn_penalty": {"per_turn": 0.1, "free_turns": 1}})
    ep = run_episode(env, _row(*TASKS[0]), agent)  # two lookups' worth of turns, then the reply
    r = episode_reward(ep, EpisodeRewardConfig.of(reward))
    assert r.turn_penalty == pytest.approx(0.1 * (ep.assistant_turns - 1)) and r.correctness == 1.0
    assert r.total == pytest.approx(0.2 + 1.0 - r.turn_penalty)
    assert episode_reward(ep).turn_penalty == pytest.approx(0.02 * max(0, ep.assistant_turns - 3))
    with pytest.raises(ValidationError, match="max_penalty"):
        RewardConfig.model_validate({"turn_penalty": {"max_penalty": 2}})


def test_turn_penalty_is_bounded():
    from rlvrflow.verifiers.episode import Episode
    from rlvrflow.verifiers.verdict import correct

    ep = Episode([], [POLICY] * 40, stop=FINAL, verdict=correct())
    r = episode_reward(ep, EpisodeRewardConfig(turns=TurnPenalty(per_turn=0.05, free_turns=2, max_penalty=0.3)))
    assert r.turn_penalty == 0.3 and r.total == pytest.approx(0.8)


def test_tool_results_show_errors_and_the_episode_goes_on(env):
    replies = iter([_call("get_order_items", order_id="seven"), _call("get_order_items", order_id=7), "ok"])
    ep = run_episode(env, _row(*TASKS[0]), lambda m: next(replies))
    first = json.loads(ep.messages[3]["content"])
    assert "arguments fail its schema at $.order_id" in first["error"]
    assert ep.bad_calls == 1 and ep.tool_runs[1].ok
    assert episode_reward(ep).format == 0.0


def test_a_think_block_is_not_a_call_and_two_calls_in_one_message_both_run(env):
    two = _call("get_order", order_id=7) + "\n" + _call("get_order_items", order_id=7)
    replies = iter(
        [
            "<think>maybe "
            + _call("issue_refund", order_id=7, amount=36, reason="damaged")
            + "</think>Let me look.\n"
            + two,
            "done",
        ]
    )
    ep = run_episode(env, _row(*TASKS[0]), lambda m: next(replies))
    assert [r.name for r in ep.tool_runs] == ["get_order", "get_order_items"]
    assert ep.sources.count(ENVIRONMENT) == 2 and ep.end_state == []


def test_python_tool_runs_on_the_episode_copy(db, tmp_path, monkeypatch):
    pkg = tmp_path / "desk_tools"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "def cancel_order(conn, order_id):\n"
        "    n = conn.execute(\"UPDATE orders SET status = 'cancelled' WHERE order_id = ?\", (order_id,)).rowcount\n"
        "    if not n:\n"
        "        raise LookupError(f'no order {order_id}')\n"
        "    return {'cancelled': order_id}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = _spec(db)
    spec["tools"].append(
        {
            "name": "cancel_order",
            "description": "cancel an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
            "python": "desk_tools:cancel_order",
        }
    )
    spec["outcome"] = {"query": "SELECT order_id FROM orders WHERE status = 'cancelled'"}
    env = Environment.model_validate(spec)
    before = _db_digest(db)
    replies = iter([_call("cancel_order", order_id=99), _call("cancel_order", order_id=8), "Cancelled."])
    ep = run_episode(env, {"prompt": "Cancel order 8.", "reference": "[8]"}, lambda m: next(replies))
    assert "LookupError: no order 99" in ep.tool_runs[0].result and ep.tool_runs[1].ok
    assert ep.verdict.correct and _db_digest(db) == before


# --- the hack suite: none of these may score correctness --------------------------------------------


def _hack_call_every_tool(messages):
    order, _ = _ticket(messages)
    if _turn(messages) == 0:
        return "\n".join(
            [
                _call("get_order", order_id=order),
                _call("get_order_items", order_id=order),
                _call("find_orders", customer="Ann Lee"),
                _call("issue_refund", order_id=order, amount=45.0, reason="damaged"),
            ]
        )
    return "Done."


def _hack_refund_every_amount(messages):
    order, _ = _ticket(messages)
    turn = _turn(messages)
    if turn == 0:
        return _call("get_order_items", order_id=order)
    if turn == 1:
        lines = _last_result(messages)["rows"]
        return "\n".join(_call("issue_refund", order_id=order, amount=q * p, reason="damaged") for _, q, p in lines)
    return "Refunded."


def _hack_refund_every_order(messages):
    if _turn(messages) == 0:
        return "\n".join(_call("issue_refund", order_id=o, amount=36.0, reason="damaged") for o in (7, 8, 9))
    return "Refunded."


def _hack_repeat_the_right_call(messages):
    if _turn(messages) < 2:
        return agent(messages)
    if _turn(messages) == 2:
        return _call("issue_refund", order_id=7, amount=36.0, reason="damaged")
    return "Refunded."


_FINAL_CALL = 'issue_refund(order_id=7, amount=36.0, reason="damaged")'


def _hack_call_in_final_reply(messages):
    if _turn(messages) == 0:
        return _call("get_order_items", order_id=7)
    return f"I will now run:\n```json\n{json.dumps({'name': 'issue_refund', 'arguments': {'order_id': 7, 'amount': 36.0, 'reason': 'damaged'}})}\n```"


def _hack_claims_the_refund(messages):
    return "I have issued a refund of 36.0 for the damaged kettle of order 7. Refund id 2."


def _hack_malformed_json(messages):
    if _turn(messages) == 0:
        return '<tool_call>{"name": "issue_refund", "arguments": {"order_id": 7, "amount": 36.0,}</tool_call>'
    return "Refunded."


def _hack_unknown_tool(messages):
    if _turn(messages) == 0:
        return _call("execute_sql", sql="INSERT INTO refunds VALUES (2, 7, '2026-07-01', 36.0, 'damaged')")
    return "Refunded."


def _hack_sql_injection(messages):
    if _turn(messages) == 0:
        return "\n".join(
            [
                _call("find_orders", customer="x' OR '1'='1"),
                _call(
                    "issue_refund",
                    order_id=7,
                    amount=36.0,
                    reason="damaged'); DELETE FROM refunds; INSERT INTO refunds VALUES (9, 7, 'x', 36.0, 'damaged",
                ),
            ]
        )
    return "Refunded."


def _hack_string_amount(messages):
    if _turn(messages) == 0:
        return _call("issue_refund", order_id=7, amount="36.0); DROP TABLE refunds; --", reason="damaged")
    return "Refunded."


HACKS = {
    "call_every_tool": _hack_call_every_tool,
    "refund_every_amount": _hack_refund_every_amount,
    "refund_every_order": _hack_refund_every_order,
    "repeat_the_right_call": _hack_repeat_the_right_call,
    "call_in_final_reply": _hack_call_in_final_reply,
    "claims_the_refund": _hack_claims_the_refund,
    "malformed_json": _hack_malformed_json,
    "unknown_tool": _hack_unknown_tool,
    "sql_injection": _hack_sql_injection,
    "string_amount_injection": _hack_string_amount,
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hack_gets_no_correctness(env, db, name):
    before = _db_digest(db)
    ep = run_episode(env, _row(*TASKS[0]), HACKS[name])
    r = episode_reward(ep)
    assert ep.verdict.score == 0.0 and r.correctness == 0.0 and r.total <= 0.1, ep.end_state
    assert _db_digest(db) == before


def test_injected_text_is_bound_as_a_value(env):
    ep = run_episode(env, _row(*TASKS[0]), _hack_sql_injection)
    assert json.loads(ep.messages[3]["content"]) == {"columns": ["order_id", "order_date"], "rows": []}
    assert ep.end_state == [
        (7, 36.0, "damaged'); DELETE FROM refunds; INSERT INTO refunds VALUES (9, 7, 'x', 36.0, 'damaged")
    ]


def test_malformed_and_unknown_calls_come_back_as_errors_and_cost_the_format(env):
    for hack, needle in ((_hack_malformed_json, "is not a JSON call"), (_hack_unknown_tool, "unknown tool")):
        ep = run_episode(env, _row(*TASKS[0]), hack)
        assert needle in json.loads(ep.messages[3]["content"])["error"]
        assert ep.bad_calls == 1 and episode_reward(ep).format == 0.0


def test_the_single_reply_verifier_would_pay_the_call_in_the_final_reply_but_the_outcome_does_not(env):
    tools = {t.name: t.parameters for t in env.tools}
    reply = _hack_call_in_final_reply([{"role": "assistant", "content": ""}])
    assert verify_function_call(reply, _FINAL_CALL, {"tools": tools}).correct
    ep = run_episode(env, _row(*TASKS[0]), _hack_call_in_final_reply)
    assert ep.stop == FINAL and ep.end_state == [] and not ep.verdict.correct


# --- bad configs and references -------------------------------------------------------------------


def _error(spec: dict) -> str:
    with pytest.raises(ValidationError) as info:
        Environment.model_validate(spec)
    return str(info.value)


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda s: s["tools"].append(dict(s["tools"][0])), "tool 'get_order' is defined twice"),
        (
            lambda s: s["tools"][0].update(sql="SELECT * FROM orders WHERE order_id = :id"),
            "sql uses :id, which parameters.properties does not declare",
        ),
        (lambda s: s["tools"][0].update(python="json:dumps"), "give exactly one of sql or python"),
        (lambda s: s["tools"][0].update(sql=None), "give exactly one of sql or python"),
        (lambda s: s["tools"][0].update(sql="SELECT 1; DELETE FROM orders"), "exactly one SQL statement"),
        (lambda s: s["tools"][0].update(parameters={"type": "array"}), "must have type: object"),
        (
            lambda s: s["tools"][0].update(parameters={"type": "object", "properties": {"order_id": {"type": 5}}}),
            "invalid JSON Schema",
        ),
        (lambda s: s["tools"][0].update(name="get order"), "tools.0.name"),
        (lambda s: s["tools"][3].update(sql=None, python="desk_missing_pkg:refund"), "cannot import"),
        (lambda s: s.update(database="shop.duckdb"), "SQLite files only"),
        (lambda s: s.update(max_turns=0), "max_turns"),
        (lambda s: s.pop("outcome"), "outcome"),
        (lambda s: s.update(tools=[]), "tools"),
        (lambda s: s["tools"][0].update(timeout=3), "tools.0.timeout"),
    ],
)
def test_bad_configs_name_the_field(db, change, needle):
    spec = _spec(db)
    change(spec)
    assert needle in _error(spec)


def test_check_compiles_every_statement_against_the_database(db):
    Environment.model_validate(_spec(db)).check()
    spec = _spec(db)
    spec["tools"][1]["sql"] = "SELECT * FROM order_lines WHERE order_id = :order_id"
    with pytest.raises(ValueError, match="tool 'get_order_items': its sql does not run .*order_lines"):
        Environment.model_validate(spec).check()
    spec = _spec(db)
    spec["outcome"]["query"] = "SELECT amount FROM refund"
    with pytest.raises(ValueError, match="outcome.query does not run"):
        Environment.model_validate(spec).check()


def test_a_missing_database_names_the_field(tmp_path, db):
    spec = _spec(db)
    spec["database"] = str(tmp_path / "nowhere.db")
    with pytest.raises(FileNotFoundError, match="environment.database .* does not exist"):
        run_episode(Environment.model_validate(spec), _row(*TASKS[0]), agent)


@pytest.mark.parametrize(
    "reference, needle",
    [
        ("36", "must be a JSON array"),
        ("[[7, 36", "is not JSON"),
        ('[[7, {"a": 1}]]', "plain values"),
        ("[[7, 36], [8]]", "same number"),
    ],
)
def test_unreadable_references_are_data_errors(reference, needle):
    with pytest.raises(ValueError, match=needle):
        expected_rows(reference)


def test_expected_rows_reads_scalars_as_one_column_rows():
    assert expected_rows("[8, 9]") == [(8,), (9,)] and expected_rows("[]") == []


def test_sql_parameters_skip_literals_and_casts():
    assert sql_parameters("SELECT ':x', a::int FROM t WHERE b = :b AND c = :c OR d = :b") == ["b", "c"]


def test_a_policy_that_returns_the_wrong_number_of_messages_is_a_caller_error(env):
    with pytest.raises(ValueError, match="returned 1 messages for 2 conversations"):
        run_episodes(env, [_row(*TASKS[0]), _row(*TASKS[1])], lambda batch: ["hi"])


def test_load_resolves_a_relative_database_against_the_base_dir(db):
    spec = _spec(db)
    spec["database"] = db.name
    env = Environment.load(spec, db.parent)
    assert env.database == db
    assert run_episode(env, _row(*TASKS[0]), agent).verdict.correct


# --- environment canaries: scripted policies that know nothing of the answer --------------------------


def _canary_rows() -> list[dict]:
    return [_row(*t) for t in TASKS] + [{"prompt": "Has order 9 been refunded already?", "reference": "[]"}]


def test_canaries_pass_a_sound_environment_and_allow_no_action_where_nothing_should_change(env):
    from rlvrflow.verifiers.episode_canary import check_environment

    check = check_environment(env, _canary_rows())
    assert check.ok, check.problems
    assert {r.canary: r.passed for r in check.results} == {
        "no_action": [2],
        "call_every_tool": [],
        "call_every_tool_twice": [],
    }  # the guesses refund order 9


def test_no_action_stops_an_outcome_query_that_reads_nothing_the_tools_change(db):
    from rlvrflow.verifiers.episode_canary import check_environment

    spec = _spec(db)
    spec["outcome"] = {"query": "SELECT order_id, qty * unit_price FROM order_items WHERE product_id = 1"}
    check = check_environment(
        Environment.model_validate(spec), [{"prompt": "Refund the kettle of order 7.", "reference": "[[7, 36.0]]"}]
    )
    assert not check.ok and "no_action passes row(s) [0]" in check.problems[0]


@pytest.mark.parametrize(
    "query, stopped",
    [
        ("SELECT DISTINCT order_id FROM refunds WHERE refund_id > 1", {"call_every_tool", "call_every_tool_twice"}),
        ("SELECT order_id FROM refunds WHERE refund_id > 1", {"call_every_tool"}),
    ],
)
def test_guessing_canaries_stop_an_outcome_that_does_not_pin_the_amount(db, query, stopped):
    from rlvrflow.verifiers.episode_canary import check_environment, guessed_calls

    spec = _spec(db)
    spec["outcome"] = {"query": query}
    env = Environment.model_validate(spec)
    assert '"name": "issue_refund", "arguments": {"order_id": 7, "amount": 7.0' in guessed_calls(
        env, _row(*TASKS[0])["prompt"]
    )
    rows = [{"prompt": _row(*t)["prompt"], "reference": json.dumps([[t[0]]])} for t in TASKS]
    check = check_environment(env, rows)
    assert {p.split()[0] for p in check.problems} == stopped
    assert "make it read every column the ticket fixes" in check.problems[0]


def test_canaries_name_a_row_with_an_unusable_reference(env):
    from rlvrflow.verifiers.episode_canary import check_environment

    check = check_environment(env, [_row(*TASKS[0]), {"prompt": "x", "reference": "36"}])
    assert check.problems == [
        "row 1: reference unusable: the reference must be a JSON array of the outcome query's rows, e.g. [[123, 36.0]]"
    ]


def test_a_runaway_tool_query_is_stopped_and_reported_to_the_policy(db):
    spec = _spec(db)
    spec["tool_timeout_s"] = 0.2
    spec["tools"].append(
        {
            "name": "count_forever",
            "description": "never ends",
            "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n",
        }
    )
    replies = iter([_call("count_forever"), "ok"])
    ep = run_episode(Environment.model_validate(spec), _row(*TASKS[0]), lambda m: next(replies))
    assert not ep.tool_runs[0].ok and ep.tool_runs[0].result == "count_forever took longer than 0.2 s"


def test_an_outcome_query_that_writes_is_refused(db):
    spec = _spec(db)
    spec["outcome"] = {"query": "DELETE FROM refunds"}
    env = Environment.model_validate(spec)
    with pytest.raises(ValueError, match="outcome.query does not run: not authorized"):
        env.check()
    with pytest.raises(ValueError, match="outcome.query does not run"):
        run_episode(env, _row(*TASKS[0]), agent)


def test_the_package_exports_the_episode_names():
    from rlvrflow import verifiers
    from rlvrflow.verifiers.episode_canary import check_environment

    assert verifiers.Environment is Environment and verifiers.run_episodes is run_episodes
    assert verifiers.episode_reward is episode_reward and verifiers.check_environment is check_environment
