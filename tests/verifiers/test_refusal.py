"""The refusal verifier: asking for the missing item scores; a confident number, a generic refusal,
and every canary of verifiers/canary.py never do, against any robustness reference."""

from __future__ import annotations

import pytest

from rlvrflow.verifiers import canary, verify
from rlvrflow.verifiers.attaching import self_check
from rlvrflow.verifiers.refusal import canaries, check_reference, solution_from_reference, verify_refusal

ORDER = "order id|order number|订单号"
PRICE = "price|cost|how much"
CONFLICT = (
    "conflict|contradict|don't match|doesn't match|do not match|which price|which amount|which number|which total"
)
REFERENCES = [ORDER, PRICE, CONFLICT, "quantity|how many", "shipping address|address"]


@pytest.mark.parametrize(
    "response,reference",
    [
        ("Could you share your order id? I can look up the total then.", ORDER),
        ("I can't work out the refund without the price of the item. What did it cost?", PRICE),
        ("You wrote $20 and $25 for the same mug: which price is right?", CONFLICT),
        ("The receipt says 3 mugs but the order shows 4. These numbers don't match; please confirm.", CONFLICT),
        ("Happy to help. What's your order number?", ORDER),
        ("请提供您的订单号，我再帮您计算。", ORDER),
        ("How much did the blender cost?", PRICE),  # a question naming the item is an ask without a phrase
    ],
)
def test_asking_for_the_missing_item_is_correct(response, reference):
    v = verify("refusal", response, reference, {})
    assert v.correct, v


@pytest.mark.parametrize(
    "response,reference,detail",
    [
        ("Answer: 42", ORDER, "final answer"),
        ("Could you share your order id? Answer: 42", ORDER, "final answer"),
        ("Please provide the order id. \\boxed{42}", ORDER, "final answer"),
        ("I need the price, but the total is $42.", PRICE, "final answer"),
        ("The price is missing, so I'd guess it's 42.", PRICE, "final answer"),
        ("Could you confirm the price?\n$42", PRICE, "final answer"),
        ("请提供订单号。合计42元。", ORDER, "final answer"),
        ("I cannot help with that.", ORDER, "does not name"),
        ("Could you provide more details?", PRICE, "does not name"),
        ("Your order id was noted.", ORDER, "neither asks"),
    ],
)
def test_answers_and_generic_refusals_are_wrong(response, reference, detail):
    v = verify("refusal", response, reference, {})
    assert v.status == "wrong" and detail in v.detail, v


def test_empty_long_and_unclosed_think_responses():
    assert verify("refusal", "   ", ORDER, {}).status == "unparsed"
    assert verify("refusal", "<think>could you share the order id?", ORDER, {}).status == "unparsed"
    long = "Could you share your order id? " + "really " * 400
    assert "max_chars" in verify("refusal", long, ORDER, {}).detail
    assert verify("refusal", long, ORDER, {"max_chars": 10_000}).correct


def test_phrases_param_replaces_the_defaults():
    response = "Kindly send over the order id."
    assert verify("refusal", response, ORDER, {}).status == "wrong"
    assert verify("refusal", response, ORDER, {"phrases": ["kindly send"]}).correct


def test_bad_reference_and_params_are_data_errors():
    assert "must name" in check_reference(" | ", {})
    assert "phrases" in check_reference(ORDER, {"phrases": "could you"})
    assert verify("refusal", "Could you share the order id?", "", {}).status == "error"


def test_built_solution_passes_the_self_check():
    for ref in REFERENCES:
        solution = solution_from_reference(ref, "What is my total?")
        assert self_check(solution, ref, {"verifier": "refusal", "params": {}}).correct, ref


def test_no_canary_scores_against_any_robustness_reference():
    """The fuzz of test_universal_answers.py for this family: garbage, the family list, each row's
    own canaries and another row's reference."""
    for ref in REFERENCES:
        responses = [r for _, r in canary.battery("refusal", {}, ref)] + [o for o in REFERENCES if o != ref]
        assert len(responses) >= 50
        for response in responses:
            v = verify("refusal", response, ref, {})
            assert v.score == 0.0, (response[:80], ref, v)
        assert len(canaries(ref, {})) >= 6


def test_echoed_prompt_does_not_score():
    prompt = "What's the total for my order? I bought 3 mugs.\nRequirements: show the working\nFormat: Answer: <number>"
    for ref in REFERENCES:
        assert verify("refusal", prompt, ref, {}).score == 0.0


@pytest.mark.parametrize(
    "response",
    [  # found in review: a hedged number is still an answer
        "请提供订单号。总价60元",
        "Please provide the order id. Estimated: $60",
        "I need the order id; my guess: 60 dollars",
        "Could you share the order id? Otherwise ~60.",
        "Please confirm the order id. It's roughly 60.",
    ],
)
def test_asking_while_hedging_a_number_is_wrong(response):
    assert verify_refusal(response, "order id|订单号", {}).status == "wrong"
