"""The `working` process verifier: the share of a response's arithmetic links that hold.

Cases in the forms outside data writes working: the retail desk's chains, GSM8K's calculator notes
(`<<48/2=24>>`, `#### 72`), Unicode signs, thousands separators, rounded money."""

import json
from pathlib import Path

import pytest

from rlvrflow.verifiers import verify
from rlvrflow.verifiers.working import links

HOLDS = [
    "5*20-2=100-2=98\nAnswer: 98",
    "80*25%=20\nAnswer: 20",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
    "10/3=3.33\nAnswer: 3.33",  # rounded to the decimals written
    "3 × 12 = 36\n答案：36",
    "1,200*2=2,400\nAnswer: 2,400",
    "Total 5*20 = 100 yuan\nAnswer: 100",
    "(3+4)*2=14\nAnswer: 14",
    "-5+8=3\nAnswer: 3",
    "12 ÷ 4 = 3",
    # LaTeX as math models write it
    "5 \\times 3 = 15",
    "\\(5 \\times 3 = 15\\)",
    "5 \\cdot 3 = 15",
    "2 \\div 4 = 0.5",
    "\\[ (2+3)*4 = 20 \\]",
    # list markers, dashes and full-width signs
    "- 5*3 = 15\n- 15+2 = 17\nAnswer: 17",
    "1. 5+5=10",
    "10 – 4 = 6",
    "10 — 4 = 6",
    "10－4=6",
    "5＋3＝8",
    "５×３=15",
    # several chains on a line, Chinese and ASCII commas between them
    "So 5*4=20. Then 20+5=25.",
    "5*4=20 and 20+5=25",
    "5 × 3 = 15，15 + 2 = 17\n答案：17",
    "5*3=15,15+2=17",
    "Cost: 3*4 = 12 dollars, tax 12*0.1 = 1.2",
    # answer forms
    "3*4=12\nAnswer: 3*4 = 12",
    "3*4=12\nThe final answer is 12",
    "3*4=12\n**Answer:** 12",
    "3*4=12\nAnswer: $12",
    "2-14=-12\nAnswer: −12",
    "3*4=12\n\\boxed{12}",
    "6 x 2 = 12",
    "$5*3=$15",
    "(5*3=15)",
    "1/3 = 0.3333333333333333333",
    # punctuation around the working (an em dash, a period, a note in brackets, bold, Chinese units)
    "Add the two amounts — 5 + 3 = 8",
    "He has 3 apples. 3 - 1 = 2",
    "i.e. 3*4 = 12",
    "The total is 3. -2 + 5 = 3",
    "2 + 2 = 4 (correct)",
    "12÷4=3（元）",
    "(10/3 = 3.33)",
    "**10/3 = 3.33**",
    "5 * 3 = **15**",
    "**Step 1:** 3*4 = 12",
    # LaTeX and other number forms
    "$\\frac{1}{2} + 3 = 3.5$",
    "1{,}200 \\times 2 = 2{,}400",
    "1\\,200 \\times 2 = 2\\,400",
    "\\$5 \\times 3 = \\$15",
    "₹500 × 2 = ₹1000",
    "¼ × 8 = 2",
    "12/18 = 66.67%",
    "1/3 = 33.3%",
    "C(5,2) = 5*4/2 = 10",
    # answers
    "6/8 = 3/4\nAnswer: 3/4",
    "6/8=0.75\nAnswer: \\frac{3}{4}",
    "40/200 = 0.2\nAnswer: 20%",
    "1/2 = 0.5\nAnswer: .5",
    "3*4+5=17\nAnswer: 17 (3*4+5)",
    "3*4=12\n答：12",
    "15+2=17\nAnswer: 17\nCheck: 17 - 2 = 15",
    "20 - 2 = 18, so 2x = 18 and x = 9\nAnswer: 9",  # algebra last: the answer is not checked
    "#### Step 1\n5*3=15\n#### Step 2\n15+2=17\nSo she has 17 apples.",  # Markdown headings are no answer
]


@pytest.mark.parametrize("response", HOLDS)
def test_sound_working_scores_one(response):
    v = verify("working", response, "", {})
    assert v.correct and v.score == 1.0, (response, v)


@pytest.mark.parametrize(
    "response, score",
    [
        ("80-25-2=5-2=4\nAnswer: 4", 1 / 3),  # 80-25-2 is 53; 5-2 is 3, not 4; the answer follows its last value
        ("90/150=9.5\nAnswer: 955", 0.0),
        ("420*80%=36\nAnswer: 36", 0.5),  # the slip is in the link; the answer matches it
        ("5*20=100\nAnswer: 90", 0.5),  # right arithmetic, an answer that does not follow
        ("3*4=12\n\\boxed{13}", 0.5),
        ("3*4=12\nAnswer: 12\nAnswer: 13", 0.5),  # the last answer given counts
        ("2+2 = 4 and 3+3 = 6 and 4+4 = 9", 2 / 3),
        ("1000000000+1 = 1000000000", 0.0),  # exact: no relative tolerance on whole numbers
        ("<<36*2=72>>72\n5*5=30\n#### 72", 1 / 3),  # a note does not hide the text around it
        ("3*4=12\n答：13", 0.5),
    ],
)
def test_slips_get_partial_credit(response, score):
    v = verify("working", response, "", {})
    assert v.status == "wrong" and v.score == pytest.approx(score), (response, v)


def test_a_link_the_text_copies_from_its_note_counts_once():
    assert verify("working", "Natalia sold 48/2 = <<48/2=24>>24 clips.", "", {}).detail == "1 of 1 links hold"
    slip = verify("working", "Natalia sold 48/2 = <<48/2=24>>25 clips.", "", {})  # the copy differs: its own link
    assert slip.detail == "1 of 2 links hold"
    # only one copy per note: the same link written again later on the line is a link of its own
    assert verify("working", "48/2 = <<48/2=24>>24, so 48/2 = 24", "", {}).detail == "2 of 2 links hold"


def test_rounding_follows_the_decimals_written():
    assert verify("working", "10/3=3.3", "", {}).correct
    assert verify("working", "10/3=3.4", "", {}).status == "wrong"
    assert verify("working", "10/3=3", "", {}).status == "wrong"  # a whole number must be exact
    assert verify("working", "7/2=3.5", "", {}).correct
    assert verify("working", "1/3 = 0.3333333334", "", {}).status == "wrong"  # read exactly, not as a float
    assert verify("working", "12/18 = 66.6%", "", {}).status == "wrong"  # a percent rounds at d + 2
    assert verify("working", "2/3*10=6.666666666666666", "", {}).correct  # a float's print: last digit off


@pytest.mark.parametrize(
    "response",
    [
        "",
        "hello",
        "Answer: 5",
        "x=5",
        "a=b=c",
        "2**100=4",
        "__import__('os')=1",
        "9" * 40 + "=1",
        "72=72\nAnswer: 72",  # a restatement is not working
        "3 times 4 = 12",
        "half of 10 = 5",
        "25% of 80 = 20",
        "6 boxes x 2 = 12",  # words carried part of the sum
        "9" * 15 + ("*" + "9" * 15) * 21 + " = 7\nAnswer: 7",  # too long to read
        "+".join(["1"] * 2000) + " = 2000",
        "-" * 2000 + "1 = 1",
        "-" * 200_000 + "1 = 1",
        # cut from what it cannot read: a variable, a function, a power, a factorial, a remainder
        "3x + 2 = 11",
        "x - 5 = 10",
        "$2x + 3 = 11$",
        "a_n = 3n - 2 = 7",
        "$\\sqrt{16} + 2 = 6$",
        "3! + 2 = 8",
        "$2^{10} - 24 = 1000$",
        "3² + 4² = 25",
        "The area is 5 m² × 2 = 10 m²",
        "7 ÷ 2 = 3 remainder 1",
        "7÷2=3余1",
        "7 / 2 = 3 R 1",
        # degenerate outputs an RL policy can produce: long, and read in linear time
        "-" * 100_000,
        "\n" * 100_000,
        "1" * 100_000,
        "0. " * 30_000,
    ],
)
def test_no_readable_link_is_unparsed_and_nothing_raises(response):
    v = verify("working", response, "", {})
    assert v.status == "unparsed" and v.score == 0.0, (response[:60], v)


def test_links_read_in_order_and_give_the_last_value():
    assert links("2+2=4=5\n6/3=2") == ([True, False, True], (2, "2"))
    assert links("5*2=10\nso x = 18")[1] is None  # the last `=` was not read: no last value
    assert links("no maths here") == ([], None)
    assert links("8/0=1") == ([], None)  # division by zero is no value, not a crash


def test_an_answer_too_long_to_read_is_not_checked():
    assert verify("working", "1+1=2\nAnswer: " + "9" * 5000, "", {}).detail == "1 of 1 links hold"
    assert verify("working", "1+1=2\n\\boxed{" + "9" * 5000 + "}", "", {}).detail == "1 of 1 links hold"


@pytest.mark.parametrize(
    "reference, params",
    [('{"max_digits": Infinity}', {}), ("", {"max_digits": float("inf")}), ("", {"max_digits": "abc"})],
)
def test_unusable_settings_give_an_error_verdict(reference, params):
    v = verify("working", "1+1=2", reference, params)
    assert v.status == "error" and v.score == 0.0 and "max_digits" in v.detail


@pytest.mark.parametrize("reference", ['{"a":' + "[" * 100_000, "{not json", "72"])
def test_a_reference_that_is_no_json_object_is_ignored(reference):
    assert verify("working", "1+1=2", reference, {}).correct


def test_max_digits_param():
    assert verify("working", "123456*2=246912", "", {"max_digits": 6}).correct
    assert verify("working", "123456*2=246912", "", {"max_digits": 5}).status == "unparsed"
    bad = verify("working", "1+1=2", "", {"max_digits": "abc"})
    assert bad.status == "error" and "max_digits" in bad.detail


def test_a_rule_that_uses_it_as_the_row_verifier_is_stopped_by_the_canaries():
    from rlvrflow.verifiers import canary

    class Rule:
        category, verifier = "totals", "working"

    rows = [
        {
            "id": f"r{i}",
            "category": "totals",
            "prompt": f"What is {i} * 3?",
            "reference": str(3 * i),
            "verifier": "working",
            "verifier_params": "{}",
        }
        for i in range(5)
    ]
    report = canary.probe(rows, [Rule], canary.CanaryConfig(), workers=1)
    assert not report["ok"]
    assert {f["canary"] for f in report["failed"]} >= {"pointless arithmetic", "calculator note"}


GSM8K = [
    json.loads(line)
    for line in (Path(__file__).with_name("cases") / "gsm8k_working_cases.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
]


@pytest.mark.parametrize("case", GSM8K, ids=[c["source"] for c in GSM8K])
def test_outside_solutions_from_gsm8k(case):
    """Solutions as GSM8K's authors and GPT-3 models wrote them, copied from openai/grade-school-math
    (MIT License, Copyright (c) 2021 OpenAI), grade_school_math/data/example_model_solutions.jsonl, line
    and field in `source`: every ground truth's arithmetic holds; in the model solutions the expected
    score counts by hand the links that hold (`why` names the broken ones)."""
    v = verify("working", case["solution"], "", {})
    assert v.score == pytest.approx(case["score"]), (case["why"], v.detail)


def test_the_gsm8k_table_has_ground_truths_and_model_slips():
    assert len(GSM8K) == 20
    assert sum(c["why"].startswith("ground truth") for c in GSM8K) == 12
    assert sum(c["score"] < 1.0 for c in GSM8K) == 6
