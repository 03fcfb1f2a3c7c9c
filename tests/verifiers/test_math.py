"""Math verifier: the shared regression table, extraction and normalization details, hack suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvrflow.verifiers import verify
from rlvrflow.verifiers.math.compare import Options, equal
from rlvrflow.verifiers.math.numbers import read_number
from rlvrflow.verifiers.math.extract import extract
from rlvrflow.verifiers.math.normalize import normalize

CASES = Path(__file__).resolve().parents[2] / "bench" / "cases" / "math_cases.jsonl"


def math_cases() -> list[dict]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("case", math_cases(), ids=lambda c: c["why"])
def test_regression_table(case):
    v = verify("math", case["response"], case["gold"], case.get("params", {}))
    assert int(v.correct) == case["expected"], v


@pytest.mark.parametrize(
    "text,level,answer",
    [
        ("The answer is \\boxed{7}. Answer: 7", "marker", "7"),
        ("\\boxed{3} then Answer: 3", "boxed", "3"),
        ("Answer: 5", "answer", "5"),
        ("no digits here at all, just words", "none", None),
    ],
)
def test_extraction_priority(text, level, answer):
    got = extract(text)
    assert (got.level, got.answer) == (level, answer)


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("３６", "36"),
        ("$1,234$", "1234"),
        ("¥40", "40"),
        ("\\dfrac12", "\\frac{1}{2}"),
        ("(1,234)", "(1,234)"),
        ("12.5.", "12.5"),
    ],
)
def test_normalize(raw, norm):
    assert normalize(raw) == norm


def test_numbers_are_exact_where_they_can_be():
    assert read_number("0.1").value * 3 == read_number("0.3").value
    for gold, pred in (("12345678", "12345679"), ("100", "100.01")):
        vote = equal(gold, pred, Options(symbolic_timeout_s=None))
        assert (vote.outcome, vote.voter) == ("different", "numeric")


def test_rel_tol_param_loosens_numeric():
    assert verify("math", "Answer: 100.01", "100", {"rel_tol": 1e-3}).correct


def test_bad_gold_is_an_error_not_a_wrong():
    v = verify("math", "Answer: 3", "   ", {})
    assert v.status == "error" and "reference" in v.detail


HACKS = [
    ("answer spam", "Answer: 1, 2, 3, 36, 37, 38"),
    ("hedging boxed", "\\boxed{36} \\boxed{35}"),
    ("hedging words", "The answer is 36 or 35."),
    ("format only", "Answer: \\boxed{}"),
    ("empty", ""),
    ("whitespace", "   \n  "),
    ("number wall", " ".join(str(i) for i in range(1000))),
    ("huge power", "\\boxed{9^{9^{9^{9}}}}"),
    ("code injection", "\\boxed{__import__('os').system('touch /tmp/pwned')}"),
    ("attribute access", "\\boxed{x.__class__}"),
    ("long garbage", "x" * 200_000),
    ("nested braces", "\\boxed{" + "{" * 5000 + "}" * 5000 + "}"),
    # universal answers (issue 18): each once scored 1.0 against every gold
    ("infinity", "Answer: \\infty"),
    ("boxed infinity", "\\boxed{\\infty}"),
    ("minus infinity", "Answer: -\\infty"),
    ("sympy infinity", "Answer: oo"),
    ("overflow literal", "Answer: 1e999"),
    ("overflow cjk", "答案是1e400"),
    ("power of ten", "Answer: 10^{1000}"),
    ("power of two", "Answer: 2^{10000}"),
    ("overflow product", "Answer: 1e308*10"),
    ("restated product", "Answer: 3*12"),
    ("near miss", "Answer: 36.0000000001"),
    ("nan", "Answer: nan"),
    ("zero times x", "Answer: 36 + 0*x"),
    ("unicode infinity", "答案：∞"),
    ("one over zero", "\\boxed{\\frac{1}{0}}"),
]


@pytest.mark.timeout(120)  # a guard against hangs, not a speed claim
@pytest.mark.parametrize("name,response", HACKS, ids=[h[0] for h in HACKS])
def test_hack_suite(name, response, tmp_path):
    v = verify("math", response, "36", {"symbolic_timeout_s": 2})
    assert v.score == 0.0 and v.status != "correct", v


ADVERSARIAL_SIZE = [  # once quadratic (minutes at 100 KB); each must still give the right verdict
    ("blank lines", "\n" * 50_000 + "36", 1),
    ("crlf lines", "\r\n" * 30_000 + "36", 1),
    ("unclosed boxes", "\\boxed{" * 14_000, 0),
    ("unclosed parens", "\\(" * 50_000, 0),
    ("unclosed brackets", "\\[" * 50_000, 0),
    ("hash runs", "####" * 25_000, 0),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,response,expected", ADVERSARIAL_SIZE, ids=[a[0] for a in ADVERSARIAL_SIZE])
def test_adversarial_sizes_are_linear(name, response, expected):
    assert int(verify("math", response, "36", {}).correct) == expected


@pytest.mark.parametrize(
    "response", ["\\boxed{36}, \\boxed{36}", "$\\boxed{36}$\n\n$\\boxed{36}$", "Answer: 36 (six times six)"]
)
def test_repeated_boxes_and_glosses_are_one_answer(response):
    assert verify("math", response, "36", {}).correct


def test_several_values_for_one_gold_are_flagged_as_hedging():
    for response in ("\\boxed{0} \\boxed{1}", "Answer: 35 or 36", "\\boxed{36, 37}"):
        v = verify("math", response, "36", {})
        assert v.hedged and not v.correct, v


def test_symbolic_timeout_is_a_timeout_status():
    # the status comes from the comparison's own result (the helper ran out of time), not a message
    v = verify("math", "\\boxed{9^{9^{9^{9}}}+x}", "x", {"symbolic_timeout_s": 1})
    assert (v.status, v.score, v.hedged) == ("timeout", 0.0, False), v
    v = verify("math", "\\boxed{x^{9^{9^{9}}}}", "x^2", {"symbolic_timeout_s": 1})
    assert v.status == "timeout", v
    assert verify("math", "Answer: 36", "36", {}).correct  # the helper restarts after a timeout


@pytest.mark.slow
def test_integers_are_exact_up_to_10_to_the_15():
    import random

    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randrange(1, 10**15)
        for near in (n - 1, n + 1):
            for written in (str(near), f"{near}.0", f"{near:,}"):
                v = verify("math", f"Answer: {written}", str(n), {})
                assert not v.correct, (n, written, v)
        assert verify("math", f"Answer: {n:,}", str(n), {}).correct
        assert verify("math", f"Answer: {n}.0", f"{n:,}", {}).correct


@pytest.mark.parametrize("written", ["1e6", "1,000,000", "100万", "1000000.00", "1 000 000", "$1,000,000", "1.0e6"])
def test_one_million_in_every_spelling(written):
    assert verify("math", f"Answer: {written}", "1000000", {}).correct


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "response,gold",
    [
        ("x", "|x|"),
        ("x", "\\sqrt{x^2}"),
        ("x", "\\max(x, 0)"),
        ("10^{100}+1", "10^{100}"),
        ("2e^{-200}", "e^{-200}"),
        ("\\frac{2\\pi}{10^{80}}", "\\frac{\\pi}{10^{80}}"),
        ("x^{100001}", "x^{100000}"),
        ("x + (x-\\frac{5772156649}{10^{10}})(x-\\frac{31415926535}{10^{10}})", "x"),
    ],
)
def test_symbolic_quick_check_never_calls_different_expressions_equal(response, gold):
    # the fast exact-expression check evaluates at fixed points: these differ off them, or only
    # by a relative hair, and must still be wrong (review findings)
    assert verify("math", f"\\boxed{{{response}}}", gold, {}).status == "wrong"
