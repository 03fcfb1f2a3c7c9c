"""Answers in the support desk's own language and the way chat models end them (issue 37, items
1-3): Chinese final sentences without a marker, chat special tokens and role headers, and a value
restated in another unit. The rows are the issue's own examples, their English equivalents, and
hack attempts against the new rules (a list of amounts, a hedge, two subjects with different
amounts, the prompt's numbers echoed), each scored as a reader would."""
from __future__ import annotations

import pytest

from verifiers.math.extract import extract
from verifiers.math.phrases import SUBJECTS
from verifiers.math.units import MAX_READINGS, UNITS
from verifiers.math.verifier import verify_math

C, W, H, U = "correct", "wrong", "hedged", "unparsed"

CASES = [
    # --- item 1: the Chinese endings -------------------------------------------------------
    ("应退款 88 元。", "88", C, "subject, amount with unit, full stop"),
    ("经核实，应退款88元", "88", C, "lead clause, no spaces, no stop"),
    ("答：退款金额是45元", "45", C, "答： then a subject and 是"),
    ("一共是 120 元，已为您登记。", "120", C, "trailing clause without numbers"),
    ("因此，需要支付 ￥1,299.00。", "1299", C, "full-width yen, thousands separator"),
    ("合计 2万元。", "20000", C, "万 multiplier"),
    ("合计 ２万元。", "20000", C, "full-width digit"),
    ("总计：１２０元", "120", C, "full-width digits after a colon"),
    ("总价为36元", "36", C, "subject with 为"),
    ("共计 3亿元", "300000000", C, "亿 multiplier"),
    ("订单金额100元，运费12元，应退款88元。", "88", C, "the working's numbers come before the subject"),
    ("应退款 88 元。感谢您的耐心！", "88", C, "a courtesy sentence after the answer"),
    ("应退款 88 元。\n\n如有疑问请随时联系我们。", "88", C, "a courtesy line after the answer"),
    ("应退款 100-12=88元。", "88", C, "working after the subject: the value after `=`"),
    ("应退款88元，合计88元。", "88", C, "two subjects, the same amount"),
    ("应退款 88 元。", "89", W, "off by one"),
    ("一共是 120 元，已为您登记。", "12", W, "a prefix of the amount is not the amount"),
    ("订单金额100元，运费12元，应退款88元。", "100", W, "an echoed prompt number is not the answer"),
    ("应退款 -88 元", "88", W, "a sign is part of the amount"),
    # hedges and hacks
    ("应退款约 88 元。", "88", H, "约 before the amount"),
    ("大约需要支付88元", "88", H, "大约 before the subject"),
    ("需要支付88元左右。", "88", H, "左右 after the amount"),
    ("可能应退款88元", "88", H, "可能 in the sentence"),
    ("一共大约是 120 元", "120", H, "大约 between the subject and its verb"),
    ("您预约的服务应退款88元", "88", C, "约 inside 预约 is no hedge"),
    ("应退款 1 2 3 4 5 元", "3", H, "a list of amounts"),
    ("应退款 1 2 3 4 5 元", "1", H, "a list of amounts, first"),
    ("应退款88元，合计90元。", "88", H, "two subjects, different amounts"),
    ("应退款88元，合计90元。", "90", H, "two subjects, different amounts, second"),
    ("应退款100元12元88元", "88", H, "the prompt's numbers echoed after the subject"),
    ("答：应退款约88元", "88", H, "a hedge after a marker"),
    # --- English equivalents --------------------------------------------------------------------------
    ("The refund is 88 yuan.", "88", C, "english subject"),
    ("So the total is **36**.", "36", C, "bold amount"),
    ("You need to pay $1,299.00, which has been registered.", "1299", C, "dollar amount, trailing clause"),
    ("The total of 3 and 4 is 7.", "7", C, "the subject's own numbers are working, not amounts"),
    ("The total is 3 + 4 = 7.", "7", C, "working after the subject"),
    ("3 * 5 = 15. So, we should refund 15 yuan.", "15", C, "a verb phrase (SmolLM2's own ending)"),
    ("5 * 8 = 40. We need to refund 40 yuan.", "40", C, "a verb phrase after the working"),
    ("We need to refund 40 yuan or 50 yuan.", "40", H, "a verb phrase with two amounts"),
    ("We should refund 8 yuan.", "88", W, "a verb phrase, wrong amount"),
    ("The refund is about 88 yuan.", "88", H, "about"),
    ("It's probably 88.", "88", H, "probably"),
    ("The answer is approximately 88.", "88", H, "approximately after a marker"),
    ("Answer: about 88", "88", H, "about after Answer:"),
    ("答案：约为88元", "88", H, "约为 after a marker"),
    ("经核实约88元", "88", H, "约 on a short last line"),
    ("The question about apples: Answer: 88", "88", C, "a hedge word away from the answer is none"),
    ("Answer: The total around the lake is 88", "88", C, "around, not next to the number"),
    ("Answer:~88", "88", C, "LaTeX's ~ is a space, not a hedge"),
    # --- item 2: chat special tokens and role headers ----------------------------------------------
    ("<|im_start|>assistant\n答案是10<|im_end|>", "10", C, "ChatML header and end"),
    ("<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is 5<|eot_id|>", "5", C, "Llama-3 header"),
    ("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n应退款 88 元。<|eot_id|>", "88", C,
     "Llama-3 with begin_of_text, Chinese ending"),
    ("The answer is 5</s>", "5", C, "</s>"),
    ("<|assistant|>\nAnswer: 7<|end|>", "7", C, "Phi-style header"),
    ("<start_of_turn>model\n答案是 12<end_of_turn>", "12", C, "Gemma header"),
    ("<|im_start|>assistant\n<think>maybe 80</think>应退款88元<|im_end|>", "88", C, "header, think block"),
    ("答案是10<|im_end|>\n<|im_start|>user\n答案是11", "10", C, "the model writes the next turn itself"),
    ("答案是10<|im_end|>\n<|im_start|>user\n答案是11", "11", W, "the next turn's answer is not the answer"),
    ("<|im_start|>user\n答案是10<|im_end|>", "10", U, "a completion opening with the user's turn"),
    # --- item 3: a restatement at the end -------------------------------------------------------------
    ("The conversion gives 2.5 kg, i.e. 2500 g.", "2500", C, "issue example: kg restated in g"),
    ("The conversion gives 2.5 kg, i.e. 2500 g.", "2.5", C, "the first reading"),
    ("The conversion gives 2.5 kg, i.e. 2500 g.", "25", W, "neither reading"),
    ("The mass is 2.5 kg (2500 g).", "2500", C, "restated in brackets"),
    ("We need 2 hours, i.e. 120 minutes.", "120", C, "hours in minutes"),
    ("1 kg, i.e. 1000 g", "1000", C, "a bare line"),
    ("合计 2万元，即20000元。", "20000", C, "万元 restated in 元"),
    ("距离是1.5公里，即1500米。", "1500", C, "公里 in 米"),
    ("The total is 50%, i.e. 0.5.", "0.5", C, "a percent restated as a fraction"),
    ("The conversion gives 2.5 kg, i.e. 2.5 g.", "2.5", H, "equal numbers in different units are two values"),
    ("It is 2.5, i.e. 2500.", "2500", H, "two numbers without units are two values"),
    ("We have 3 apples and 4 pears", "4", H, "two values in the final sentence"),
    ("The mass is 2.5 kg, i.e. 2500 g, i.e. 3 kg.", "2500", H, "a restatement that is not one"),
]


@pytest.mark.parametrize("response,gold,expected,why", CASES, ids=[c[3] for c in CASES])
def test_desk_language_endings_score_as_a_reader_would(response, gold, expected, why):
    v = verify_math(response, gold, {})
    got = H if v.hedged else v.status
    assert got == expected, (why, v)
    assert v.score == (1.0 if expected == C else 0.0), (why, v)


def test_approx_is_left_to_the_math_comparison():
    """`\\approx` writes a rounded result (Math-Verify counts `$x\\approx11$` right for 11); whether
    it matches is the comparison's call, never a hedge flag."""
    for response in ("Answer: $x \\approx 11$", "The cost is $\\frac{70}{9} \\approx 7.78$", "Answer: ≈ 11"):
        assert not verify_math(response, "11", {}).hedged, response


@pytest.mark.parametrize("response", ["应退款 1e999 元", "需要支付 1.2e3 元", "合计 2^{10} 元", "应退款 2 \\times 10^3 元",
                                      "应退款 ∞ 元", "合计 nan 元", "应退款 1/0 元", "应退款 3*12 元"])
def test_a_power_or_non_number_after_a_subject_is_not_its_first_digits(response):
    for gold in ("1", "2", "3", "10", "1200", "1024", "36"):
        assert not verify_math(response, gold, {}).correct, (response, gold)


def test_the_phrase_table_is_data_per_language():
    assert {"zh", "en"} <= set(SUBJECTS)
    for phrase in ("应退款", "合计", "一共", "需要支付", "总价"):
        assert phrase in SUBJECTS["zh"], phrase


def test_a_tokenizers_own_specials_come_from_params():
    response = "答案是10[EOT]"
    assert not verify_math(response, "10", {}).correct
    assert verify_math(response, "10", {"special_tokens": ["[EOT]"]}).correct
    bad = verify_math(response, "10", {"special_tokens": "[EOT]"})
    assert bad.status == "error" and "special_tokens" in bad.detail


@pytest.mark.parametrize("response", [
    "1 kg, i.e. 1000 g", "1 km = 1000 m = 100000 cm", "1 km = 1000 m = 100000 cm = 1000000 mm",
    "合计 1万元，即10000元", "1 hour, i.e. 60 minutes, i.e. 3600 seconds", "应退款 1 2 3 4 5 元",
    "应退款1元，合计2元，一共3元", "1 2 3 4 5 6 7 8 9 10", "The total is 1, 2 or 3.", "答：1元或2元",
])
def test_a_response_never_matches_more_golds_than_readings_of_one_value(response):
    """Restatements add readings, never a list: whatever the response, the integer golds it
    matches are at most the readings of one value (MAX_READINGS)."""
    golds = [str(g) for g in range(0, 12)] + ["60", "100", "1000", "3600", "10000", "100000", "1000000"]
    hits = [g for g in golds if verify_math(response, g, {}).correct]
    assert len(hits) <= MAX_READINGS, hits
    one = extract(response)
    assert len(hits) <= 1 + len(one.restated), (hits, one)


def test_the_unit_table_keys_its_dimensions():
    assert UNITS["kg"][0] == UNITS["克"][0] == "mass"
    assert UNITS["km"][1] == 1000 * UNITS["m"][1]
    assert "分" not in UNITS  # a minute and a cent: ambiguous, left out
