"""function_call verifier: call forms, each layer's detail, the number rules, partial credit,
broken references, a hack suite, rendered solutions, attach and the `rlvrflow verify` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from rlvrflow.verifiers import VerifierConfig, attach, verify
from rlvrflow.verifiers.function_call import check_reference, extract_calls, solution_from_reference

TOOLS = {
    "issue_refund": {
        "type": "object",
        "required": ["order_id", "amount"],
        "additionalProperties": False,
        "properties": {
            "order_id": {"type": "string", "pattern": "^SO[0-9]+$"},
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "notify": {"type": "boolean", "default": True},
        },
    },
    "lookup_order": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}},
    "update_ticket": {
        "type": "object",
        "required": ["ticket_id", "value"],
        "properties": {"ticket_id": {"type": "string"}, "value": {}},
    },
}
P = {"tools": TOOLS}
REFUND = 'issue_refund(order_id="SO12345", amount=36)'
REFUND_JSON = '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": 36}}'
LOOKUP_JSON = '{"name": "lookup_order", "arguments": {"order_id": "SO12345"}}'


def fc(response: str, reference: str = REFUND, **params):
    return verify("function_call", response, reference, {**P, **params})


@pytest.mark.parametrize(
    "response",
    [
        REFUND_JSON,
        f"<tool_call>\n{REFUND_JSON}\n</tool_call>",
        f"I'll refund the order now.\n<tool_call>\n{REFUND_JSON}\n</tool_call>",
        f"<tool_call>\n{REFUND_JSON}",  # `</tool_call>` was the stop string
        f"Refunding.\n```json\n{REFUND_JSON}\n```",
        f"```\n[{REFUND_JSON}]\n```",
        f"<think>the customer wants {LOOKUP_JSON}? no, a refund</think>\n<tool_call>\n{REFUND_JSON}\n</tool_call>",
        '{"type": "function", "function": {"name": "issue_refund", '
        '"arguments": "{\\"order_id\\": \\"SO12345\\", \\"amount\\": 36}"}}',
        '{"name": "issue_refund", "parameters": {"order_id": "SO12345", "amount": 36.00}}',
        '{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "issue_refund", '
        '"arguments": {"order_id": "SO12345", "amount": 36, "notify": true}}}]}',
    ],
)
def test_accepted_call_forms(response):
    v = fc(response)
    assert v.correct, v
    assert v.extracted.startswith('issue_refund(order_id="')


@pytest.mark.parametrize(
    "reference",
    [
        REFUND,
        REFUND_JSON,
        f"[{REFUND_JSON}]",
        f"{REFUND}\n",
        '{"type": "function", "function": {"name": "issue_refund", "arguments": "{\\"order_id\\": \\"SO12345\\", \\"amount\\": 36}"}}',
    ],
)
def test_reference_forms(reference):
    assert check_reference(reference, P) is None
    assert fc(REFUND_JSON, reference).correct


@pytest.mark.parametrize(
    "response,status,detail",
    [
        ("I have refunded your order.", "unparsed", "no tool call found"),
        ("<tool_call>\n{issue_refund: SO12345}\n</tool_call>", "unparsed", "<tool_call> 1 is not a JSON call"),
        ('{"order_id": "SO12345"}', "unparsed", "needs a string 'name'"),
        ('{"name": "refund_everything", "arguments": {}}', "wrong", "unknown tool 'refund_everything'"),
        (
            '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": "36"}}',
            "wrong",
            "schema at $.amount",
        ),
        ('{"name": "issue_refund", "arguments": {"order_id": "12345", "amount": 36}}', "wrong", "schema at $.order_id"),
        (
            '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": 36, "note": "x"}}',
            "wrong",
            "schema at $",
        ),
        (
            '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": 63}}',
            "wrong",
            "issue_refund: argument 'amount' is 63, expected 36",
        ),
        (
            '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": 36, "notify": false}}',
            "wrong",
            "argument 'notify' is false, expected true",
        ),
        (LOOKUP_JSON, "wrong", "missing call issue_refund("),
        (f"[{REFUND_JSON}, {LOOKUP_JSON}]", "wrong", "1 extra call(s): lookup_order("),
        (
            f"<tool_call>\n{REFUND_JSON}\n</tool_call>\n<tool_call>\n{{oops\n</tool_call>",
            "wrong",
            "<tool_call> 2 is not a JSON call",
        ),
    ],
)
def test_each_layer_says_what_failed(response, status, detail):
    v = fc(response)
    assert (v.status, v.score) == (status, 0.0), v
    assert detail in v.detail, v.detail


def ticket(value: str) -> str:
    return '{"name": "update_ticket", "arguments": {"ticket_id": "T-1", "value": %s}}' % value


@pytest.mark.parametrize(
    "ref,got,params,ok",
    [
        ("4410023918", "4410023918", {}, True),
        ("4410023918", "4410023917", {}, False),
        ("4410023918", "4410023917", {"rel_tol": 1e-3}, False),  # integers never get a tolerance
        ("4410023918", "4410023918.0", {}, True),
        ("123456789012345678901234567890", "123456789012345678901234567891", {}, False),
        ("36", "36.0", {}, True),
        ("36", '"36.00"', {}, True),
        ('"36.00"', "36", {}, True),
        ("36.5", '"36.50"', {}, True),
        ("36", "36.0000001", {"abs_tol": 0.01}, False),
        ("0.1", "0.1000001", {}, False),
        ("0.1", "0.1000001", {"rel_tol": 1e-5}, True),
        ("2.0", "1.9999999", {"abs_tol": 1e-6}, True),
        ("1.00000000000000000001", "1", {}, False),  # exact, not float-rounded
        ("1", "true", {}, False),
        ("true", "1", {}, False),
        ("false", "0", {}, False),
        ("0", "null", {}, False),
        ("1e308", "Infinity", {"rel_tol": 1}, False),
        ("1.5", "NaN", {"abs_tol": 10}, False),
        ("1.5", "1e999999999", {"rel_tol": 1}, False),  # never held exactly, answered at once
        ("2.5", "2.50000000000000000000000000001", {"abs_tol": 1e-20}, True),  # the math verifier's `close`
        ('"00123"', '"123"', {}, False),  # strings stay strings
        ('"Refund issued"', '"  refund   ISSUED "', {}, True),
        ('"Refund issued"', '"refund issued"', {"case_sensitive": True}, False),
        ('"ＳＯ１２"', '"SO12"', {}, True),
        ('{"qty": 2, "sku": "A1"}', '{"sku": "a1", "qty": 2.0}', {}, True),
        ('{"qty": 2}', '{"qty": 2, "extra": 1}', {}, False),
        ('["a", "b"]', '["b", "a"]', {}, False),
    ],
)
def test_number_and_value_rules(ref, got, params, ok):
    assert check_reference(ticket(ref), {**P, **params}) is None
    v = fc(ticket(got), ticket(ref), **params)
    assert v.correct is ok, v
    if not ok:
        assert "argument 'value" in v.detail or "schema" in v.detail, v.detail


def test_order_and_partial_credit():
    a = '{"name": "lookup_order", "arguments": {"order_id": "SO1"}}'
    b = '{"name": "issue_refund", "arguments": {"order_id": "SO1", "amount": 10}}'
    c = '{"name": "lookup_order", "arguments": {"order_id": "SO2"}}'
    ref = f"[{a}, {b}]"
    assert fc(f"[{b}, {a}]", ref).correct
    v = fc(f"[{b}, {a}]", ref, ordered=True)
    assert v.status == "wrong" and "out of order" in v.detail
    assert fc(f"[{a}, {b}]", ref, ordered=True).correct
    assert fc(f"[{a}]", ref, partial=True).score == 0.5
    assert fc(f"[{a}, {c}]", ref, partial=True).score == 0.0  # one matched, one extra
    assert fc(f"[{a}, {b}, {c}]", ref, partial=True).score == 0.5
    assert fc(f"[{b}, {a}]", ref, partial=True, ordered=True).score == 0.0  # one in order, one extra
    assert fc(f"[{a}, {c}, {b}]", ref, partial=True, ordered=True).score == 0.5
    v = fc(f"[{a}, {b}]", ref, partial=True)
    assert (v.status, v.score) == ("correct", 1.0)
    assert fc(f"[{a}]", ref).score == 0.0


def test_no_call_expected():
    assert fc("Your order already shipped; no refund is due.", "[]").correct
    v = fc(REFUND_JSON, "[]")
    assert v.status == "wrong" and "extra call" in v.detail


def test_tools_as_openai_list():
    tools = [
        {"type": "function", "function": {"name": k, "description": "d", "parameters": s}} for k, s in TOOLS.items()
    ]
    assert verify("function_call", REFUND_JSON, REFUND, {"tools": tools}).correct
    plain = [{"name": k, "parameters": s} for k, s in TOOLS.items()]
    assert verify("function_call", LOOKUP_JSON, REFUND, {"tools": plain}).status == "wrong"


@pytest.mark.parametrize(
    "reference,params,problem",
    [
        ("refund the customer", P, "neither JSON nor call syntax"),
        ('issue_refund("SO12345", 36)', P, "write every argument as name=value"),
        ("issue_refund(order_id=x)", P, "is not a literal"),
        ("   ", P, "empty"),
        ('{"name": "issue_refund", "arguments": {"order_id": "SO1", "order_id": "SO2", "amount": 1}}', P, "twice"),
        ('{"name": "issue_refund", "arguments": {"order_id": "SO1", "amount": 1}', P, "not valid JSON"),
        ("cancel_order(order_id='SO1')", P, "unknown tool 'cancel_order'"),
        ("issue_refund(order_id='SO1', amount=-5)", P, "schema at $.amount"),
        (ticket("NaN"), P, "can never be matched"),
        (REFUND, {}, "params.tools is required"),
        (REFUND, {"tools": {"issue_refund": {"type": "nope"}}}, "invalid JSON Schema"),
        (REFUND, {"tools": [{"description": "no name"}]}, "has no 'name'"),
        (REFUND, {"tools": {"issue_refund": "a refund"}}, "must be a JSON object"),
        (REFUND, {**P, "ordered": "yes"}, "params.ordered must be true or false"),
        (REFUND, {**P, "rel_tol": -1}, "params.rel_tol must be a number >= 0"),
    ],
)
def test_broken_reference_is_caught_at_attach_time(reference, params, problem):
    found = check_reference(reference, params)
    assert found is not None and problem in found, found
    v = verify("function_call", REFUND_JSON, reference, params)
    assert v.status == "error" and problem in v.detail


HACKS = {
    "empty": "",
    "prose around the JSON": f"Sure! Here is what I would do: {REFUND_JSON} Let me know.",
    "prose, then JSON": f"Refunding now\n{REFUND_JSON}",
    "call only inside thinking": f"<think><tool_call>\n{REFUND_JSON}\n</tool_call></think>Done!",
    "unclosed thinking": f"<think>maybe <tool_call>\n{REFUND_JSON}\n</tool_call>",
    "extra call": f"<tool_call>\n{REFUND_JSON}\n</tool_call>\n<tool_call>\n{LOOKUP_JSON}\n</tool_call>",
    "same call twice": f"[{REFUND_JSON}, {REFUND_JSON}]",
    "hedged amounts": f"<tool_call>\n{REFUND_JSON}\n</tool_call>\n<tool_call>\n"
    + REFUND_JSON.replace("36", "63")
    + "\n</tool_call>",
    "unknown tool beside the right call": f'[{REFUND_JSON}, {{"name": "grant_admin", "arguments": {{}}}}]',
    "schema-valid, wrong value": REFUND_JSON.replace("SO12345", "SO12346"),
    "schema-valid, close amount": REFUND_JSON.replace("36", "36.01"),
    "duplicate key hedge": '{"name": "issue_refund", "arguments": {"order_id": "SO12345", "amount": 63, "amount": 36}}',
    "amount as a string": REFUND_JSON.replace("36", '"36"'),
    "boolean for a number": REFUND_JSON.replace("36", "true"),
    "fenced example and a real call": f"Example:\n```json\n{LOOKUP_JSON}\n```\n```json\n{REFUND_JSON}\n```",
    "name only": '{"name": "issue_refund"}',
    "python code fence": f"```python\nissue_refund(order_id='SO12345', amount=36)\n```",
    "call syntax": REFUND,
    "giant response": REFUND_JSON + " " * 200_001,
}


@pytest.mark.parametrize("name", list(HACKS))
def test_hack_suite(name):
    v = fc(HACKS[name])
    assert v.score == 0.0 and v.status in ("wrong", "unparsed"), v


@pytest.mark.parametrize(
    "prompt,one,two",
    [
        ("Answer with a call inside <tool_call></tool_call> tags.", "<tool_call>\n{", "<tool_call>\n{"),
        ("Reply with a ```json block holding the call.", "```json\n{", "```json\n["),
        ("Which action?", "{", "["),
    ],
)
def test_solution_from_reference_renders_what_the_prompt_asks(prompt, one, two):
    for reference, starts in ((REFUND, one), (ticket("36.50"), one), (f"[{REFUND_JSON}, {LOOKUP_JSON}]", two)):
        solution = solution_from_reference(reference, prompt)
        assert solution.startswith(starts), solution
        assert verify("function_call", solution, reference, P).correct, solution
    assert solution_from_reference(ticket("36.50"), "").endswith('"value": 36.50}}')
    assert solution_from_reference("[]", "") is None and solution_from_reference("not a call", "") is None


def test_extract_calls_reports_each_broken_block():
    calls, problems = extract_calls(f"```json\n{REFUND_JSON}\n```\n```json\n[1]\n```")
    assert [c.name for c in calls] == ["issue_refund"]
    assert problems == ["fenced block 2 is not a JSON call: a JSON int is not a call"]


def test_attach_fills_solutions_and_rejects_broken_references(tmp_path):
    cfg = VerifierConfig.model_validate(
        {
            "rules": [{"category": "refund", "verifier": "function_call", "params": {"tools": TOOLS}}],
            "answer_only_targets": True,
        }
    )
    df = pl.DataFrame(
        [
            ("r1", "refund", "Use <tool_call> tags.", REFUND, ""),
            ("r2", "refund", "Which action?", "[" + LOOKUP_JSON + "]", ""),
            ("r3", "refund", "Which action?", "cancel_order(order_id='SO1')", ""),
            ("r4", "refund", "Which action?", REFUND, REFUND_JSON.replace("36", "63")),
        ],
        schema=["id", "category", "prompt", "reference", "solution"],
        orient="row",
    )
    kept, rejects, stats = attach(df, cfg, tmp_path, workers=1)
    assert stats["rows_in"] == 4 and list(kept["id"]) == ["r1", "r2"]
    assert kept["solution"][0].startswith("<tool_call>\n") and kept["solution"][1].startswith("{")
    details = dict(zip(rejects["id"], rejects["detail"]))
    assert set(rejects["reason"]) == {"reference_self_check"}
    assert "unknown tool 'cancel_order'" in details["r3"]
    assert "argument 'amount' is 63, expected 36" in details["r4"]


def test_rlvrflow_verify_command(tmp_path):
    rows = [
        {"id": 1, "response": f"<tool_call>\n{REFUND_JSON}\n</tool_call>", "reference": REFUND},
        {"id": 2, "response": REFUND_JSON.replace("36", "63"), "reference": REFUND},
        {"id": 3, "response": "I refunded it.", "reference": REFUND},
        {"id": 4, "response": "[" + LOOKUP_JSON + "]", "reference": LOOKUP_JSON},
        {"id": 5, "response": REFUND_JSON, "reference": "cancel_order(order_id='SO1')"},
        {
            "id": 6,
            "response": "[" + REFUND_JSON + "]",
            "reference": f"[{REFUND_JSON}, {LOOKUP_JSON}]",
            "params": {"partial": True},
        },
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cli = Path(sys.executable).parent / "rlvrflow"
    assert cli.is_file(), "the rlvrflow console script is missing; run `make setup` (pip install -e .)"
    done = subprocess.run(
        [
            str(cli),
            "verify",
            "--verifier",
            "function_call",
            "--params",
            json.dumps(P),
            "--workers",
            "1",
            str(src),
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(g["id"], g["status"], g["score"]) for g in got] == [
        (1, "correct", 1.0),
        (2, "wrong", 0.0),
        (3, "unparsed", 0.0),
        (4, "correct", 1.0),
        (5, "error", 0.0),
        (6, "wrong", 0.5),
    ]
    assert "'amount' is 63, expected 36" in got[1]["detail"] and "cancel_order" in got[4]["detail"]
