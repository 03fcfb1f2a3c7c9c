"""Answer forms from Math-Verify's cases, each tried correct, wrong and hedged: labelled tuples,
assignments grouped per solution, a gold inequality against its interval, an exact value followed by
its approximation, a set listing a value twice; and a real model's `Answer: 3 * 12 = 36`."""

from __future__ import annotations

import pytest

from rlvrflow.verifiers import verify

CASES = [
    # (gold, response, status)
    ("$(p,q)=(3,2)$", "$(3,2)$", "correct"),
    ("$(p,q)=(3,2)$", "$\\boxed{(p, q) = (3, 2)}$", "correct"),
    ("$(3,2)$", "$\\boxed{(p, q) = (3, 2)}$", "correct"),
    ("$(p,q)=(3,2)$", "$(2,3)$", "wrong"),
    ("$(p,q)=(3,2)$", "$(p,q)=(3,2,1)$", "wrong"),
    ("$(p,q)=(3,2)$", "$(p,q)=(p,q)$", "wrong"),
    ("$p=5,q=2;p=7,q=2$", "$(5,2),(7,2)$", "correct"),
    ("$p=5,q=2;p=7,q=2$", "$(7,2),(5,2)$", "correct"),
    ("$p=5,q=2;p=7,q=2$", "$(5,2)$", "wrong"),
    ("$p=5,q=2;p=7,q=2$", "$(5,2),(7,3)$", "wrong"),
    ("$p=5,q=2;p=7,q=2$", "$(5,2),(7,2),(11,2)$", "wrong"),
    ("$(11,7)or(7,11)$", "$\\boxed{(7,11),\\ (11,7)}$", "correct"),
    ("$(11,7)or(7,11)$", "$\\boxed{(7,11)}$", "wrong"),
    ("$0<f(x)<1$", "$(0,1)$", "correct"),
    ("$0<f(x)<1$", "$[0,1]$", "wrong"),
    ("$0<f(x)<1$", "$(0,2)$", "wrong"),
    ("$-2 \\le x \\le 7$", "$x \\in [-2,7]$", "correct"),
    ("$-2 \\le x \\le 7$", "$x \\in (-2,7)$", "wrong"),
    ("$-793 < a < 10$", "$(-793, 10)$", "correct"),
    ("$f(2) < f(1) < f(4)$", "$f(2) < f(1) < f(4)$", "correct"),
    ("$f(2) < f(1) < f(4)$", "$(2,4)$", "wrong"),
    ("$1/3$", "$x=1/3\\approx0.33$", "correct"),
    ("$1/3$", "$x=1/4\\approx0.33$", "wrong"),
    ("$11$", "$x\\approx11$", "wrong"),  # only an approximation: not the exact answer
    ("$1/3$", "$x \\approx 0.333$", "wrong"),
    ("$(1,2),(3,4)$", "$(1,2),(3,4),(1,2)$", "correct"),
    ("$(1,2),(3,4)$", "$(1,2),(1,2)$", "wrong"),
    ("$5$", "$(5,5)$", "wrong"),
    ("$z = 1 + 1 = 2$", "$z = 3 - 1 = 2$", "correct"),
    ("$2$", "$z = 1 + 1 = 2$", "correct"),
    ("$15$", "Answer: 48+50+4=15+40=15", "wrong"),  # a false step: the chain states 102 and 55 too
    ("$15$", "Answer: $z = 3 \\times 4 = 15$", "wrong"),
    ("$12$", "Answer: $z = 3 \\times 4 = 12$", "correct"),
    ("$z = 1 + 1 = 2$", "$z = 1 + 1 = 3$", "wrong"),
    ("$10/9$", "Answer: $\\frac{1}{2} = \\frac{10}{9}$", "wrong"),  # two different numbers
    ("$10$", "$10 = 11$", "wrong"),
    # a real model's own form (SmolLM2 through its chat template): the working, then the value
    ("36", "Answer: 3 * 12 = 36", "correct"),
    ("36", "Answer: 3 * 12 = 36 yuan", "correct"),
    ("36", "Answer: 36 = 3 × 12", "correct"),
    ("68", "Answer: 80 * 0.85 = 68 dollars", "correct"),
    ("36", "Answer: 3 * 12 = 35", "wrong"),  # states 35
    ("35", "Answer: 3 * 12 = 35", "wrong"),  # and 36: a false step is no answer
    ("12", "Answer: 0.15 * 80 = 12", "correct"),
    ("68", "Answer: 0.15 * 80 = 12", "wrong"),
    ("5", "Answer: x + 1 = 5", "wrong"),  # an equation, not its solution
    ("36", "Answer: 3 * 12", "wrong"),  # the working without the value
    ("$x = -5, p = 14/3$", "$-5, \\frac{14}{3}$", "correct"),
    ("$x = -5, p = 14/3$", "$\\frac{14}{3}$", "wrong"),
    ("$(0;0;1),(4;-2;0)$", "$(4, -2, 0), (0, 0, 1)$", "correct"),
    ("$(0;0;1),(4;-2;0)$", "$(4, -2, 0), (0, 1, 0)$", "wrong"),
    ("$\\\\left(\\\\frac{1}{5},\\\\frac{1}{6}\\\\right)$", "$\\left( \\frac{1}{5}, \\frac{1}{6} \\right)$", "correct"),
    ("$\\\\left(\\\\frac{1}{5},\\\\frac{1}{6}\\\\right)$", "$\\left( \\frac{1}{6}, \\frac{1}{5} \\right)$", "wrong"),
]


@pytest.mark.parametrize("gold,response,status", CASES)
def test_form(gold, response, status):
    v = verify("math", response, gold, {})
    assert v.status == status, v


@pytest.mark.parametrize(
    "response",
    ["$(0,1)$ or $(0,2)$", "The answer is $(3,2)$ or $(2,3)$.", "$\\boxed{(3,2)}$ or maybe $\\boxed{(2,3)}$"],
)
def test_hedged_forms_score_nothing(response):
    gold = "$(p,q)=(3,2)$" if "3" in response else "$0<f(x)<1$"
    v = verify("math", response, gold, {})
    assert not v.correct, v


@pytest.mark.parametrize(
    "response",
    [
        "$x$",
        "$(x,y)$",
        "$(p,q)=(p,q)$",
        "$0<x<1$",
        "$\\approx$",
        "$a<x<b$",
        "$(-\\infty,\\infty)$",
        "$p=p,q=q;p=p,q=q$",
    ],
)
@pytest.mark.parametrize("gold", ["$(p,q)=(3,2)$", "$0<f(x)<1$", "$p=5,q=2;p=7,q=2$", "$1/3$"])
def test_universal_answers_are_refused(gold, response):
    assert not verify("math", response, gold, {}).correct


@pytest.mark.parametrize(
    "response,gold",
    [
        ("The answer is $3$ or $4$.", "3"),
        ("The answer is $4$ or $3$.", "3"),
        ("The answer is $(3,2)$ or $(2,3)$.", "$(3,2)$"),
        ("答案是 $3$ 或 $4$。", "3"),
    ],
)
def test_a_marker_followed_by_an_alternative_hedges(response, gold):
    assert not verify("math", response, gold, {}).correct


@pytest.mark.parametrize(
    "gold,response,status",
    [
        ("$(3, 3), (1, 1)$", "$\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}$", "correct"),
        ("$(3, 3), (1, 1)$", "$\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 2)}$", "wrong"),
        ("$(3, 3), (1, 1)$", "$\\boxed{(3, 3)}$ or maybe $\\boxed{(1, 1)}$ or $\\boxed{(2, 2)}$", "wrong"),
        ("$3, 4$", "$\\boxed{3} \\quad \\boxed{4}$", "correct"),
        ("$3$", "$\\boxed{3} \\quad \\boxed{4}$", "wrong"),
        ("$3$", "Final answer: \\boxed{3}. Or perhaps \\boxed{3.5}", "wrong"),
        (
            "$12 and 13$",
            'The final answer is \\"$12 $ and $13 $\\". I hope it is correct. \\boxed{12 and 13}',
            "correct",
        ),
    ],
)
def test_several_boxed_parts(gold, response, status):
    v = verify("math", response, gold, {})
    assert v.status == status, v
    if status == "wrong" and gold == "$3$":
        assert v.hedged, v


@pytest.mark.parametrize(
    "response,gold,status",
    [
        ("The final answer is $14 {, }916$.", "14916", "correct"),
        ("The final answer is $14{,}916$.", "14916", "correct"),
        ("The final answer is $14{,}917$.", "14916", "wrong"),
    ],
)
def test_braced_comma_between_digits(response, gold, status):
    assert verify("math", response, gold, {}).status == status


@pytest.mark.parametrize("response,status", [("Answer: $\frac{1}{4}$", "correct"), ("Answer: $\frac{1}{5}$", "wrong")])
def test_form_feed_is_the_f_of_frac(response, status):
    assert "\f" in response
    assert verify("math", response, "$\\frac{1}{4}$", {}).status == status
