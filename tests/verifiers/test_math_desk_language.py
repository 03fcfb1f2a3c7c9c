"""Answers in the support desk's own language and the way chat models end them (issue 37, items
1-3): Chinese final sentences without a marker, chat special tokens and role headers, and a value
restated in another unit. The rows are the issue's own examples, their English equivalents, and
hack attempts against the new rules (a list of amounts, a hedge, two subjects with different
amounts, the prompt's numbers echoed), each scored as a reader would."""

from __future__ import annotations

import pytest

from rlvrflow.verifiers.math.extract import extract
from rlvrflow.verifiers.math.phrases import SUBJECTS
from rlvrflow.verifiers.math.units import MAX_READINGS, UNITS, quantities
from rlvrflow.verifiers.math.verifier import verify_math

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
    (
        "<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n应退款 88 元。<|eot_id|>",
        "88",
        C,
        "Llama-3 with begin_of_text, Chinese ending",
    ),
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
    # --- review: a number after a comma is a second amount, not part of the first ---------------------
    ("应退款88元，90元", "88", H, "a second amount after a full-width comma"),
    ("The refund is 88 yuan,99 yuan", "88", H, "a second amount after a comma"),
    ("The refund is 1,299.00 yuan", "1299", C, "a thousands comma stays one number"),
    # a count and an amount: a reader calls 12 the total price, the rule reads two values (hedged:
    # a false negative left as it is, never a wrong answer accepted)
    ("合计 3 件，12 元", "12", H, "a count and an amount: two values"),
    # --- review: bounds and approximations are hedges -------------------------------------------------
    ("合计 100 元以上", "100", H, "以上 after the amount"),
    ("合计100元以内", "100", H, "以内 after the amount"),
    ("应退款100余元", "100", H, "余 after the number"),
    ("应退款100来元", "100", H, "来 after the number"),
    ("应退款100多块", "100", H, "多 after the number"),
    ("合计不到100元", "100", H, "不到 before the amount"),
    ("至少需要支付88元", "88", H, "至少 before the subject"),
    ("The total is 88+ yuan", "88", H, "88+"),
    ("The total is at least 88 yuan", "88", H, "at least"),
    ("The total is more than 88 yuan.", "88", H, "more than"),
    ("The total is 88 yuan at most", "88", H, "at most after the amount"),
    ("The total is 88 or more", "88", H, "or more"),
    ("The total is 2+3 = 5", "5", C, "a plus in working is no bound"),
    ("将来应退款88元", "88", C, "来 inside 将来 is no hedge"),
    # doubts after the amount, questions, a retraction
    ("The total is 88 yuan, I believe", "88", H, "I believe"),
    ("The total is 88 yuan, unsure", "88", H, "unsure"),
    ("The total is 88 yuan, give or take", "88", H, "give or take"),
    ("应退款88元，对吗？", "88", H, "对吗"),
    ("应退款88元，我猜", "88", H, "我猜"),
    ("应退款88元吧", "88", H, "吧 asks for agreement"),
    ("应退款 88 元吗？", "88", H, "a question"),
    ("The refund is 88 yuan?", "88", H, "a question mark"),
    ("应退款 88 元。不对。", "88", H, "a retraction after the answer"),
    ("The refund is 88 yuan. Just kidding.", "88", H, "a retraction in English"),
    ("应退款 88 元。感谢！", "88", C, "thanks are no retraction"),
    # --- review: negations -----------------------------------------------------------------------------
    ("不应退款88元", "88", H, "不 before the subject"),
    ("无需支付 88 元", "88", H, "无需"),
    ("不需要支付 88 元", "88", H, "不需要"),
    ("我们无法确认应退款88元", "88", H, "无法 in the clause"),
    ("是否应退款 88 元？", "88", H, "是否"),
    ("If the refund is 88 yuan, fine", "88", H, "if"),
    ("应退款不是 88 元", "88", H, "a negated verb"),
    ("If you return it, the refund is 88 yuan.", "88", C, "a condition in its own clause"),
    ("不锈钢杯总价为36元", "36", C, "不 in a product name negates nothing"),
    ("无线耳机合计88元", "88", C, "无 in a product name negates nothing"),
    ("如果不是您本人操作，请联系我们。应退款88元。", "88", C, "a negation in an earlier sentence"),
    # --- review: the last subject is the answer, the numbers before it its working --------------------
    ("The total is 100 yuan, minus 12 yuan, so the refund is 88 yuan.", "88", C, "working, then the refund"),
    ("The total is 100 yuan, minus 12 yuan, so the refund is 88 yuan.", "100", W, "the working's total"),
    ("总价100元，优惠12元，实付88元", "88", C, "total, discount, paid"),
    ("总价100元，优惠12元，实付88元", "100", W, "the working's total, Chinese"),
    ("应付 88 元，已付 50 元，还需支付 38 元", "38", C, "owed, paid, still to pay"),
    ("应付 88 元，已付 50 元，还需支付 38 元", "88", W, "the first subject's amount"),
    # a reader calls 24 the answer; the rule sees two numbers after `in total` (hedged: a false
    # negative left as it is)
    ("In total, 5 friends ate 24 apples", "24", H, "a count before the amount"),
    ("答：共需支付 36 元。", "36", C, "共需 and 需支付 overlap: the longest subject at the amount"),
    ("答：一共需要 12 个盒子。", "12", C, "需要 as a verb"),
    ("一共需要 12 个盒子", "12", C, "需要 as a verb, no marker"),
    # --- review: units that disagree are several values --------------------------------------------
    ("The total is 1 m 1 g", "1", H, "a length and a mass"),
    ("The total is 0 kg, 0 m, 0 s", "0", H, "three dimensions"),
    ("3 yuan, i.e. 3 dollars", "3", H, "two currencies"),
    ("The total is 3 yuan, i.e. 3 dollars", "3", H, "two currencies after a subject"),
    ("5 apples, 5 pears", "5", H, "two nouns"),
    ("The total is 5 apples, 5 pears", "5", H, "two nouns after a subject"),
    # --- review: compound amounts add up ----------------------------------------------------------------
    ("合计 1 元 10 角", "10", W, "1 yuan 10 jiao is 2 yuan, not 10"),
    ("合计 1 元 10 角", "1", W, "nor 1"),
    ("合计 1 元 10 角", "2", C, "a reader adds them"),
    ("合计1元5角", "1.5", C, "yuan and jiao"),
    ("合计1元5角", "5", W, "a part of a compound amount"),
    ("The total is 1 h 30 min", "90", C, "hours and minutes, in minutes"),
    ("The total is 1 h 30 min", "1.5", C, "hours and minutes, in hours"),
    ("The total is 1 h 30 min", "30", W, "the minutes alone"),
    ("The total is 42 dollars and 50 cents", "42.5", C, "dollars and cents"),
    ("The total is 42 dollars and 50 cents", "42", W, "the dollars alone"),
    ("The total is 42 dollars and 50 cents", "50", W, "the cents alone"),
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


@pytest.mark.parametrize(
    "response",
    [
        "应退款 1e999 元",
        "需要支付 1.2e3 元",
        "合计 2^{10} 元",
        "应退款 2 \\times 10^3 元",
        "应退款 ∞ 元",
        "合计 nan 元",
        "应退款 1/0 元",
        "应退款 3*12 元",
    ],
)
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


@pytest.mark.parametrize(
    "response",
    [
        "1 kg, i.e. 1000 g",
        "1 km = 1000 m = 100000 cm",
        "1 km = 1000 m = 100000 cm = 1000000 mm",
        "合计 1万元，即10000元",
        "1 hour, i.e. 60 minutes, i.e. 3600 seconds",
        "应退款 1 2 3 4 5 元",
        "应退款1元，合计2元，一共3元",
        "1 2 3 4 5 6 7 8 9 10",
        "The total is 1, 2 or 3.",
        "答：1元或2元",
    ],
)
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


@pytest.mark.timeout(120)  # a guard against hangs, not a speed claim (as test_math's adversarial sizes)
def test_the_quantity_pattern_reads_a_long_blank_run_once():
    """`(?P<cur>...)?\\s*` before the number rescanned every blank from every start (the review's
    `\\boxed{about` + 20,000 spaces took 14 s, so 99,000 took minutes); the currency now owns its
    spacing and answer_hedge reads at most MAX_SENTENCE_CHARS. The timing itself is bench/'s job."""
    assert [q.text for q in quantities("about" + " " * 5000 + "88 元")] == ["88 元"]
    assert [q.text for q in quantities("¥ 88")] == ["¥ 88"]
    assert not verify_math("\\boxed{about" + " " * 99_000 + "x}", "88", {}).correct
    assert not verify_math("\\boxed{about" + " " * 99_000 + "88}", "88", {}).correct
