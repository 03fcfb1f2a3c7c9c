"""The `working` process verifier: the share of a response's arithmetic links that hold.

Cases in the forms outside data writes working: the retail desk's chains, GSM8K's calculator notes
(`<<48/2=24>>`, `#### 72`), Unicode signs, thousands separators, rounded money."""

import pytest

from verifiers import verify
from verifiers.working import links

HOLDS = [
    "5*20-2=100-2=98\nAnswer: 98",
    "80*25%=20\nAnswer: 20",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
    "10/3=3.33\nAnswer: 3.33",                         # rounded to the decimals written
    "3 × 12 = 36\n答案：36",
    "1,200*2=2,400\nAnswer: 2400",
    "Total 5*20 = 100 yuan\nAnswer: 100",
    "(3+4)*2=14\nAnswer: 14",
    "-5+8=3\nAnswer: 3",
    "12 ÷ 4 = 3",
]


@pytest.mark.parametrize("response", HOLDS)
def test_sound_working_scores_one(response):
    v = verify("working", response, "", {})
    assert v.correct and v.score == 1.0, (response, v)


def test_slips_get_partial_credit():
    assert verify("working", "80-25-2=5-2=4\nAnswer: 4", "", {}).score == pytest.approx(1 / 3)
    assert verify("working", "90/150=9.5\nAnswer: 955", "", {}).score == 0.0
    assert verify("working", "420*80%=36\nAnswer: 36", "", {}).score == pytest.approx(0.5)
    v = verify("working", "5*20=100\nAnswer: 90", "", {})
    assert v.status == "wrong" and v.score == pytest.approx(0.5) and "1 of 2" in v.detail


def test_rounding_follows_the_decimals_written():
    assert verify("working", "10/3=3.3", "", {}).correct
    assert not verify("working", "10/3=3.4", "", {}).correct
    assert not verify("working", "10/3=3", "", {}).correct     # a whole number must be exact
    assert verify("working", "7/2=3.5", "", {}).correct


@pytest.mark.parametrize("response", ["", "hello", "Answer: 5", "x=5", "a=b=c", "2**100=4", "__import__('os')=1",
                                      "9" * 40 + "=1"])
def test_no_arithmetic_link_is_unparsed(response):
    v = verify("working", response, "", {})
    assert v.status == "unparsed" and v.score == 0.0


def test_links_read_in_order_and_give_the_last_value():
    assert links("2+2=4=5\n6/3=2") == ([True, False, True], 2.0)
    assert links("no maths here") == ([], None)
    assert links("8/0=1") == ([], None)                       # division by zero is no value, not a crash


def test_max_digits_param():
    assert verify("working", "123456*2=246912", "", {"max_digits": 6}).correct
    assert verify("working", "123456*2=246912", "", {"max_digits": 5}).status == "unparsed"


def test_a_rule_that_uses_it_as_the_row_verifier_is_stopped_by_the_canaries():
    from verifiers import canary

    class Rule:
        category, verifier = "totals", "working"

    rows = [{"id": f"r{i}", "category": "totals", "prompt": f"What is {i} * 3?", "reference": str(3 * i),
             "verifier": "working", "verifier_params": "{}"} for i in range(5)]
    report = canary.probe(rows, [Rule], canary.CanaryConfig(), workers=1)
    assert not report["ok"]
    assert {f["canary"] for f in report["failed"]} >= {"pointless arithmetic", "calculator note"}
