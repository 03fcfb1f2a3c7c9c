"""json, keyword/regex, reply and choice verifiers: regression tables and hack suites."""
from __future__ import annotations

import json

import pytest

from rlvrflow.verifiers import verify

SCHEMA_REF = json.dumps({"schema": {"type": "object", "required": ["sku", "qty"],
                                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}},
                         "fields": {"sku": "A1"}})


@pytest.mark.parametrize("response,ok", [
    ('{"sku": "A1", "qty": 2}', True),
    ('Sure:\n```json\n{"sku": "A1", "qty": 2}\n```', True),
    ('The order is {"sku": "A1", "qty": 1} as requested.', True),
    ('{"sku": "A1", "qty": 0}', False),
    ('{"sku": "B2", "qty": 2}', False),
    ('{"sku": "A1"}', False),
])
def test_json_table(response, ok):
    assert verify("json", response, SCHEMA_REF, {}).correct is ok


def test_json_nested_fields_and_params_schema():
    ref = json.dumps({"fields": {"order.items.0.sku": "A1", "order.id": 7}})
    assert verify("json", '{"order": {"id": 7, "items": [{"sku": "A1"}]}}', ref, {}).correct
    assert not verify("json", '{"order": {"id": 7, "items": []}}', ref, {}).correct
    assert verify("json", '{"a": 1}', "", {"schema": {"type": "object", "required": ["a"]}}).correct
    assert verify("json", "{}", "[1]", {}).status == "error"


JSON_HACKS = {"empty": "", "format only": "{}", "not json": "{sku: A1}", "just a fence": "```json\n```",
              "hedging two objects": '```json\n{"sku": "A1", "qty": 2}\n```\n```json\n{"sku": "B2", "qty": 2}\n```',
              "schema smuggled": '{"sku": "A1", "qty": "2"}', "array": '[{"sku": "A1", "qty": 2}]'}


@pytest.mark.parametrize("name", list(JSON_HACKS))
def test_json_hack_suite(name):
    v = verify("json", JSON_HACKS[name], SCHEMA_REF, {})
    assert v.score == 0.0 and v.status != "correct", v


KW_REF = json.dumps({"required": ["shop.example/returns"], "forbidden": ["guaranteed refund"]})


@pytest.mark.parametrize("response,ok", [
    ("You can start a return at https://shop.example/returns within 30 days.", True),
    ("You can start a return at HTTPS://SHOP.EXAMPLE/RETURNS.", True),
    ("Please contact us.", False),
    ("Guaranteed refund! See shop.example/returns", False),
])
def test_keyword_table(response, ok):
    assert verify("keyword", response, KW_REF, {}).correct is ok


def test_regex_and_plain_string_reference():
    assert verify("regex", "Your order #12345 shipped", json.dumps({"required": [r"#\d{5}\b"]}), {}).correct
    assert not verify("regex", "Your order #1234 shipped", json.dumps({"required": [r"#\d{5}\b"]}), {}).correct
    assert verify("keyword", "see the returns page", "returns page", {}).correct
    assert verify("regex", "x", json.dumps({"required": ["("]}), {}).status == "error"


KW_HACKS = {"empty": "", "keyword spam": "shop.example/returns " * 20,
            "giant response": "shop.example/returns " + "a" * 50_000,
            "forbidden inside": "shop.example/returns. guaranteed refund.",
            "near miss": "shop example returns"}


@pytest.mark.parametrize("verifier", ["keyword", "regex"])
@pytest.mark.parametrize("name", list(KW_HACKS))
def test_keyword_hack_suite(name, verifier):
    ref = KW_REF if verifier == "keyword" else json.dumps({"required": [r"shop\.example/returns"],
                                                            "forbidden": ["guaranteed refund"]})
    v = verify(verifier, KW_HACKS[name], ref, {})
    assert v.score == 0.0 and v.status != "correct", v


LINK = "https://shop.example.com/returns"
REPLY_REF = json.dumps({"link": LINK, "mention": [["Sam Lee", "Mr Lee"]], "action": ["start the return"],
                        "reply": f"{LINK} - start the return there, Sam Lee."})
REPLY_PARAMS = {"format_example": f"{LINK} - start the return there.", "forbidden": ["Requirements:", "Format:"]}


@pytest.mark.parametrize("response,ok", [
    (f"{LINK} - start the return there, Sam Lee.", True),
    (f"Hi Mr Lee, sorry about the scratch. You can start the return at {LINK}.", True),
    (f"Hi Sam Lee, start the return on [our returns page]({LINK}). My phone is <PHONE>.", True),
    (f"Dear Sam Lee, please START THE RETURN here: {LINK.upper()}", True),
    (f"Sam Lee, start the return at {LINK}/.", True),                               # a trailing slash
    (f"Hi Sam Lee, the refund costs $0 - start the return at {LINK}, 100% free.", True),
    # what a real model wrote under the keyword rule, and its neighbours
    (f"{LINK} - start the return there.", False),                                  # the format example
    (f"{LINK} - start the return there. Sam Lee", False),                          # ... with the name after it
    (f"{LINK} - {LINK.rsplit('/', 1)[0]}/-startshesen-reti&#4227=", False),      # link, then junk
    (f"Sam Lee, start the return at {LINK} qz&#4227=xk", False),                   # a good reply padded with junk
    (f"Sam Lee, start the return at {LINK}-startshesen", False),                   # the link is not whole
    (f"Sam Lee, start the return at {LINK} or {LINK}", False),                     # link spam
    (f"Sam Lee, start the return at {LINK}/label", False),                         # the wrong link
    (f"Sam Lee, start the return at https://evil.example/x and {LINK}", False),  # a second URL
    (f"Hi Sam Lee, see {LINK}.", False),                                           # no action
    (f"Hello, start the return at {LINK}.", False),                                # not this customer
    ("Sam Lee, start the return on our returns page.", False),                     # no link
    (f"Sam Lee asks how to return a kettle.\nRequirements: include {LINK}\nFormat: ...", False),  # prompt echo
    (" ".join([f"Sam Lee start the return {LINK}"] * 4), False),
    ("Sam Lee " * 4 + f"start the return at {LINK}", False),                      # the name repeated
    ("", False), ("   ", False), ("\x00\x01" + LINK, False), (f"Sam Lee start the return {LINK} " + "a" * 700, False),
])
def test_reply_table(response, ok):
    v = verify("reply", response, REPLY_REF, REPLY_PARAMS)
    assert v.correct is ok, v
    assert v.score == (1.0 if ok else 0.0) and v.status in ("correct", "wrong", "unparsed")


def test_reply_chinese_row():
    ref = json.dumps({"link": LINK, "mention": ["王芳"], "action": "办理退货",
                      "reply": f"{LINK} 王芳您好，请在此页面办理退货。"})
    assert verify("reply", f"{LINK} 王芳您好，请在此页面办理退货。我的电话是<PHONE>。", ref, {}).correct
    assert not verify("reply", f"给王芳写一条简短回复，TA问：没拆封的水壶还能不能退。回复中必须包含退货页面链接。{LINK}", ref, {}).correct
    # the link written inside the sentence with no spaces, as Chinese text does: the URL ends at the 办
    assert verify("reply", f"王芳您好，请在{LINK}办理退货。", ref, {}).correct
    assert not verify("reply", f"王芳您好，请在{LINK}&x=1办理退货。", ref, {}).correct


@pytest.mark.parametrize("reference,fix", [
    ("not json", "is not JSON"),
    (json.dumps(["x"]), "JSON object"),
    (json.dumps({"link": "shop.example.com/returns", "action": "a", "reply": "r"}), "'link' must be one URL"),
    (json.dumps({"link": LINK, "action": "a"}), "needs 'reply'"),
    (json.dumps({"link": LINK, "reply": f"{LINK} hi"}), "needs 'action'"),
    (json.dumps({"link": LINK, "mention": [""], "action": "go", "reply": f"{LINK} go"}), "non-empty string"),
    (json.dumps({"link": LINK, "required": [LINK], "action": "go", "reply": f"{LINK} go"}), "unknown keys"),
    # the reference's own reply must pass the rule: here it never names the customer
    (json.dumps({"link": LINK, "mention": ["Sam Lee"], "action": "go", "reply": f"{LINK} go there"}),
     "own reply fails"),
])
def test_reply_reference_errors_name_the_fix(reference, fix):
    from rlvrflow.verifiers.reply import check_reference

    problem = check_reference(reference, {})
    assert problem is not None and fix in problem, problem
    assert verify("reply", "anything", reference, {}).status in ("error", "wrong")


def test_reply_reference_reply_that_copies_the_format_example_is_a_data_error():
    from rlvrflow.verifiers.reply import check_reference

    ref = json.dumps({"link": LINK, "mention": [], "action": "start the return", "reply": f"{LINK} - start the return there."})
    assert "format example" in check_reference(ref, REPLY_PARAMS)
    assert check_reference(REPLY_REF, REPLY_PARAMS) is None
    assert "max_hits" in check_reference(REPLY_REF, {"max_hits": -1})
    assert "forbidden" in check_reference(REPLY_REF, {"forbidden": "Format:"})
    assert verify("reply", f"Sam Lee, start the return at {LINK}", REPLY_REF, {"max_chars": "x"}).status == "error"


def test_reply_verdict_pickles():
    import pickle

    v = verify("reply", f"{LINK} - start the return there, Sam Lee.", REPLY_REF, REPLY_PARAMS)
    assert pickle.loads(pickle.dumps(v)) == v and v.extracted == LINK


@pytest.mark.parametrize("response,ok", [
    ("(B)", True), ("B", True), ("b.", True), ("选B", True), ("答案：B", True), ("答案是 B", True),
    ("Answer: B", True), ("The answer is (B).", True), ("I pick (B) because of the policy.", True),
    ("\\boxed{B}", True), ("Ｂ", True), ("Answer: C", False), ("(D)", False),
])
def test_choice_table(response, ok):
    assert verify("choice", response, "B", {}).correct is ok


def test_choice_gold_forms_and_options():
    assert verify("choice", "Answer: B", "答案：B", {}).correct
    assert verify("choice", "Answer: B", "(B)", {}).correct
    assert verify("choice", "E", "E", {"options": "ABCD"}).status == "error"


CHOICE_HACKS = {"empty": "", "all letters": "ABCD", "answer all": "Answer: ABCD", "either": "Answer: A or B",
                "two markers": "Answer: A\nAnswer: B", "two parens": "(A) (B)", "list": "Answer: A, B, C, D",
                "chinese both": "答案：A或B", "format only": "Answer:", "word": "Answer: because"}


@pytest.mark.parametrize("name", list(CHOICE_HACKS))
def test_choice_hack_suite(name):
    v = verify("choice", CHOICE_HACKS[name], "B", {})
    assert v.score == 0.0 and v.status != "correct", v


@pytest.mark.timeout(120)
@pytest.mark.parametrize("response,status", [
    ("[" * 5000, "unparsed"), ("1" * 5000, "unparsed"), ("{" * 2000 + "}" * 2000, "wrong"),
    ("```" * 30000, "unparsed"), ('{"a": "x' * 20000, "unparsed"),
])
def test_json_never_raises_and_stays_linear_on_adversarial_output(response, status):
    v = verify("json", response, json.dumps({"fields": {"order_id": "SO1"}}), {})
    assert v.status == status, v


def test_json_in_prose_with_many_inner_objects_is_read_whole():
    order = {"order_id": "SO1", "items": [{"sku": i} for i in range(300)]}
    assert verify("json", "Here is the order: " + json.dumps(order), json.dumps({"fields": {"order_id": "SO1"}}), {}).correct


@pytest.mark.timeout(60)
def test_choice_whitespace_run_is_linear():
    assert verify("choice", "\t" * 20000, "A", {}).status == "unparsed"
