"""json, keyword/regex and choice verifiers: regression tables and hack suites (reply: test_reply.py)."""

from __future__ import annotations

import json

import pytest

from rlvrflow.verifiers import verify

SCHEMA_REF = json.dumps(
    {
        "schema": {
            "type": "object",
            "required": ["sku", "qty"],
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
        },
        "fields": {"sku": "A1"},
    }
)


@pytest.mark.parametrize(
    "response,ok",
    [
        ('{"sku": "A1", "qty": 2}', True),
        ('Sure:\n```json\n{"sku": "A1", "qty": 2}\n```', True),
        ('The order is {"sku": "A1", "qty": 1} as requested.', True),
        ('{"sku": "A1", "qty": 0}', False),
        ('{"sku": "B2", "qty": 2}', False),
        ('{"sku": "A1"}', False),
    ],
)
def test_json_table(response, ok):
    assert verify("json", response, SCHEMA_REF, {}).correct is ok


def test_json_nested_fields_and_params_schema():
    ref = json.dumps({"fields": {"order.items.0.sku": "A1", "order.id": 7}})
    assert verify("json", '{"order": {"id": 7, "items": [{"sku": "A1"}]}}', ref, {}).correct
    assert not verify("json", '{"order": {"id": 7, "items": []}}', ref, {}).correct
    assert verify("json", '{"a": 1}', "", {"schema": {"type": "object", "required": ["a"]}}).correct
    assert verify("json", "{}", "[1]", {}).status == "error"


JSON_HACKS = {
    "empty": "",
    "format only": "{}",
    "not json": "{sku: A1}",
    "just a fence": "```json\n```",
    "hedging two objects": '```json\n{"sku": "A1", "qty": 2}\n```\n```json\n{"sku": "B2", "qty": 2}\n```',
    "schema smuggled": '{"sku": "A1", "qty": "2"}',
    "array": '[{"sku": "A1", "qty": 2}]',
}


@pytest.mark.parametrize("name", list(JSON_HACKS))
def test_json_hack_suite(name):
    v = verify("json", JSON_HACKS[name], SCHEMA_REF, {})
    assert v.score == 0.0 and v.status != "correct", v


KW_REF = json.dumps({"required": ["shop.example/returns"], "forbidden": ["guaranteed refund"]})


@pytest.mark.parametrize(
    "response,ok",
    [
        ("You can start a return at https://shop.example/returns within 30 days.", True),
        ("You can start a return at HTTPS://SHOP.EXAMPLE/RETURNS.", True),
        ("Please contact us.", False),
        ("Guaranteed refund! See shop.example/returns", False),
    ],
)
def test_keyword_table(response, ok):
    assert verify("keyword", response, KW_REF, {}).correct is ok


def test_regex_and_plain_string_reference():
    assert verify("regex", "Your order #12345 shipped", json.dumps({"required": [r"#\d{5}\b"]}), {}).correct
    assert not verify("regex", "Your order #1234 shipped", json.dumps({"required": [r"#\d{5}\b"]}), {}).correct
    assert verify("keyword", "see the returns page", "returns page", {}).correct
    assert verify("regex", "x", json.dumps({"required": ["("]}), {}).status == "error"


KW_HACKS = {
    "empty": "",
    "keyword spam": "shop.example/returns " * 20,
    "giant response": "shop.example/returns " + "a" * 50_000,
    "forbidden inside": "shop.example/returns. guaranteed refund.",
    "near miss": "shop example returns",
}


@pytest.mark.parametrize("verifier", ["keyword", "regex"])
@pytest.mark.parametrize("name", list(KW_HACKS))
def test_keyword_hack_suite(name, verifier):
    ref = (
        KW_REF
        if verifier == "keyword"
        else json.dumps({"required": [r"shop\.example/returns"], "forbidden": ["guaranteed refund"]})
    )
    v = verify(verifier, KW_HACKS[name], ref, {})
    assert v.score == 0.0 and v.status != "correct", v


@pytest.mark.parametrize(
    "response,ok",
    [
        ("(B)", True),
        ("B", True),
        ("b.", True),
        ("选B", True),
        ("答案：B", True),
        ("答案是 B", True),
        ("Answer: B", True),
        ("The answer is (B).", True),
        ("I pick (B) because of the policy.", True),
        ("\\boxed{B}", True),
        ("Ｂ", True),
        ("Answer: C", False),
        ("(D)", False),
    ],
)
def test_choice_table(response, ok):
    assert verify("choice", response, "B", {}).correct is ok


def test_choice_gold_forms_and_options():
    assert verify("choice", "Answer: B", "答案：B", {}).correct
    assert verify("choice", "Answer: B", "(B)", {}).correct
    assert verify("choice", "E", "E", {"options": "ABCD"}).status == "error"


CHOICE_HACKS = {
    "empty": "",
    "all letters": "ABCD",
    "answer all": "Answer: ABCD",
    "either": "Answer: A or B",
    "two markers": "Answer: A\nAnswer: B",
    "two parens": "(A) (B)",
    "list": "Answer: A, B, C, D",
    "chinese both": "答案：A或B",
    "format only": "Answer:",
    "word": "Answer: because",
}


@pytest.mark.parametrize("name", list(CHOICE_HACKS))
def test_choice_hack_suite(name):
    v = verify("choice", CHOICE_HACKS[name], "B", {})
    assert v.score == 0.0 and v.status != "correct", v


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "response,status",
    [
        ("[" * 5000, "unparsed"),
        ("1" * 5000, "unparsed"),
        ("{" * 2000 + "}" * 2000, "wrong"),
        ("```" * 30000, "unparsed"),
        ('{"a": "x' * 20000, "unparsed"),
    ],
)
def test_json_never_raises_and_stays_linear_on_adversarial_output(response, status):
    v = verify("json", response, json.dumps({"fields": {"order_id": "SO1"}}), {})
    assert v.status == status, v


def test_json_in_prose_with_many_inner_objects_is_read_whole():
    order = {"order_id": "SO1", "items": [{"sku": i} for i in range(300)]}
    assert verify(
        "json", "Here is the order: " + json.dumps(order), json.dumps({"fields": {"order_id": "SO1"}}), {}
    ).correct


@pytest.mark.timeout(60)
def test_choice_whitespace_run_is_linear():
    assert verify("choice", "\t" * 20000, "A", {}).status == "unparsed"
