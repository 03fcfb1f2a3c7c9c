"""Universal answers: no response may score against every gold. The fuzz behind the reward canaries.

Candidates are the canary lists of verifiers/canary.py (garbage, infinities in every spelling,
overflowing literals and powers, NaN, empty and whitespace, every option letter, Yes/True,
number spam, huge LaTeX, text wrappers, each family's own hacks) plus the question echoed; golds are
a few hundred random references of every kind the verifier supports. None may score.
"""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from rlvrflow.verifiers import canary, verify

ISSUE_18 = [
    "Answer: \\infty",
    "\\boxed{\\infty}",
    "Answer: -\\infty",
    "Answer: oo",
    "Answer: 1e999",
    "答案是1e400",
    "Answer: 10^{1000}",
    "Answer: 2^{10000}",
    "Answer: 1e308*10",
    "Answer: 3*12",
    "Answer: 36.0000000001",
]


def math_golds(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    kinds = [
        lambda: str(rng.randrange(-(10**6), 10**6)),
        lambda: str(rng.randrange(10**14, 10**15)),
        lambda: f"{rng.randrange(-999, 999) / 8:g}",
        lambda: f"{rng.randrange(1, 99)}/{rng.randrange(100, 200)}",
        lambda: f"\\frac{{{rng.randrange(1, 50)}}}{{{rng.randrange(51, 99)}}}",
        lambda: f"{rng.randrange(1, 100)}%",
        lambda: f"¥{rng.randrange(1, 10**6):,}",
        lambda: f"{rng.randrange(1, 9)}\\sqrt{{{rng.choice([2, 3, 5, 7])}}}",
        lambda: f"{rng.randrange(1, 9)}x^2+{rng.randrange(1, 9)}",
        lambda: f"[{rng.randrange(0, 5)},{rng.randrange(6, 9)})",
        lambda: f"\\{{{rng.randrange(0, 5)}, {rng.randrange(6, 9)}\\}}",
        lambda: f"({rng.randrange(0, 5)}, {rng.randrange(6, 9)})",
        lambda: f"x={rng.randrange(1, 5)} or x={rng.randrange(6, 9)}",
        lambda: "0",
        lambda: "7",
        lambda: "36",
        lambda: "0.75",
        lambda: "\\frac{1}{3}",
        lambda: "-12",
        lambda: "1234.5",
        lambda: "\\pi",
        lambda: f"{rng.randrange(1, 9)}\\pi",
    ]
    return [rng.choice(kinds)() for _ in range(n)]


def candidates(family: str) -> list[str]:
    out = [r for _, r in canary.GARBAGE] + [r for _, r in canary.FAMILY.get(family, [])]
    return out + (ISSUE_18 if family == "math" else [])


def test_candidate_lists_are_long_enough():
    assert len(candidates("math")) >= 50
    for family in ("choice", "keyword", "json", "sql", "function_call", "code"):
        assert len(candidates(family)) >= 45, family


def test_issue_18_responses_score_nothing_against_any_gold():
    golds = ["7", "0.75", "3/4", "-12", "1234.5", "0", "\\frac{1}{3}", "36"] + math_golds(60, seed=1)
    for response in ISSUE_18 + ["Answer: \\infty", "Answer: Infinity", "Answer: ∞", "Answer: nan"]:
        hits = [g for g in golds if verify("math", response, g, {}).score > 0]
        assert not hits, (response, hits)


def test_expressions_are_not_numbers_unless_allowed():
    v = verify("math", "Answer: 3*12", "36", {})
    assert v.status == "wrong" and "not a number" in v.detail
    assert verify("math", "Answer: 3*12", "36", {"allow_expressions": True}).correct
    assert verify("math", "Answer: 36 + 0*x", "36", {"allow_expressions": True}).status == "wrong"
    assert verify("math", "Answer: 2^{10000}", "36", {"allow_expressions": True}).status == "wrong"


def test_an_infinite_gold_is_matched_only_by_infinity():
    assert verify("math", "Answer: \\infty", "\\infty", {}).correct
    assert not verify("math", "Answer: 1e999", "\\infty", {}).correct
    assert not verify("math", "Answer: 10", "\\infty", {}).correct


@pytest.mark.slow
def test_math_fuzz():
    golds = math_golds(400, seed=0)
    for response in candidates("math"):
        for gold in golds:
            v = verify("math", response, gold, {"symbolic_timeout_s": 2})
            assert v.score == 0.0, (response[:80], gold, v)


def test_math_fuzz_echo_of_the_question():
    for gold in math_golds(100, seed=3):
        question = (
            f"A shop sells 3 boxes of 12 pens. Compute the value {gold} is not given here.\nFormat: Answer: <number>"
        )
        assert verify("math", question, "999983", {}).score == 0.0


def test_choice_fuzz():
    rng = random.Random(0)
    for options in ("ABCD", "ABCDE", "ABCDEFGH"):
        for _ in range(100):
            gold = rng.choice(options)
            for response in candidates("choice"):
                v = verify("choice", response, gold, {"options": options})
                assert v.score == 0.0, (response[:60], gold, v)


def test_keyword_fuzz():
    rng = random.Random(0)
    words = ["refund", "return policy", "https://shop.example.com/returns", "7 days", "receipt", "订单号", "退款"]
    for _ in range(200):
        ref = json.dumps({"required": rng.sample(words, rng.randrange(1, 3)), "forbidden": ["Requirements:"]})
        for response in candidates("keyword"):
            v = verify("keyword", response, ref, {})
            assert v.score == 0.0, (response[:60], ref, v)


def test_reply_fuzz():
    """Garbage, keyword stuffing, and the prompt-built canaries of a reply row against random reply refs."""
    from rlvrflow.verifiers.prompt_canaries import prompt_canaries

    rng = random.Random(0)
    link = "https://shop.example.com/returns"
    names = ["Sam Lee", "Grace Ho", "王芳", "Ivan Petrov", "李娜"]
    for _ in range(100):
        name, action = rng.choice(names), rng.choice(["start the return", "办理退货", "print the label"])
        ref = json.dumps(
            {"link": link, "mention": [name], "action": action, "reply": f"{link} {name}, {action} there."}
        )
        prompt = (
            f"Draft a reply to {name} about a scratched kettle.\nRequirements: include {link}\n"
            f"Format: {link} - start the return there."
        )
        params = {"format_example": f"{link} - start the return there.", "forbidden": ["Requirements:", "Format:"]}
        responses = candidates("keyword") + [r for _, r in prompt_canaries("reply", params, ref, prompt)]
        for response in responses:
            v = verify("reply", response, ref, params)
            assert v.score == 0.0, (response[:60], ref, v)


@pytest.mark.slow
def test_json_fuzz():
    rng = random.Random(0)
    for _ in range(200):
        ref = json.dumps(
            {
                "schema": {
                    "type": "object",
                    "required": ["order_id", "amount"],
                    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                },
                "fields": {"order_id": f"SO{rng.randrange(10**5, 10**6)}", "amount": rng.randrange(1, 500)},
            }
        )
        for response in candidates("json"):
            v = verify("json", response, ref, {})
            assert v.score == 0.0, (response[:60], ref, v)


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, store TEXT, total REAL)")
    rng = random.Random(0)
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?)",
        [(i, rng.choice(["north", "south", "east"]), rng.randrange(5, 500)) for i in range(1, 300)],
    )
    conn.commit()
    conn.close()
    return path


def test_sql_fuzz(shop_db):
    golds = (
        [f"SELECT COUNT(*) FROM orders WHERE total > {t}" for t in range(10, 400, 7)]
        + [f"SELECT SUM(total) FROM orders WHERE store = '{s}'" for s in ("north", "south", "east")]
        + ["SELECT store, COUNT(*) FROM orders GROUP BY store ORDER BY store"]
    )
    for gold in golds:
        for response in candidates("sql"):
            v = verify("sql", response, gold, {"database": str(shop_db)})
            assert v.score == 0.0, (response[:60], gold, v)


def test_function_call_fuzz():
    tools = {
        "issue_refund": {
            "type": "object",
            "required": ["order_id", "amount"],
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
        },
        "escalate": {"type": "object", "required": ["reason"], "properties": {"reason": {"type": "string"}}},
    }
    rng = random.Random(0)
    for _ in range(200):
        ref = json.dumps(
            {
                "name": "issue_refund",
                "arguments": {"order_id": f"SO{rng.randrange(10**5, 10**6)}", "amount": rng.randrange(1, 500)},
            }
        )
        for response in candidates("function_call"):
            v = verify("function_call", response, ref, {"tools": tools})
            assert v.score == 0.0, (response[:60], ref, v)
