"""PII scrubbing: a table of what is replaced and the near misses that must stay (order numbers,
amounts, math), the checksums against published examples, row-level math consistency, the
vectorized path against the per-row one, and the clean stage's counts."""

from __future__ import annotations

import random

import polars as pl
import pytest

from rlvrflow.cleaning import CleaningConfig, clean_stage
from rlvrflow.cleaning.pii import id_number_valid, luhn_valid, scrub_frame, scrub_row

SCRUBBED = [
    # phones: mainland mobiles, landlines, +86 and international forms
    ("手机13812345678，退款多少？", "手机<PHONE>，退款多少？"),
    ("电话 138-1234-5678 或 139 8765 4321", "电话 <PHONE> 或 <PHONE>"),
    ("call +86 138 1234 5678 or (+86)13912345678", "call <PHONE> or <PHONE>"),
    ("座机010-62345678，分机请拨(0755) 2345678 转 123", "座机<PHONE>，分机请拨<PHONE>"),
    ("office +86 10 6234 5678 / 021-87654321-8001", "office <PHONE> / <PHONE>"),
    ("US +1 415-555-2671, UK +44 20 7946 0958, HK 00852 2345 6789", "US <PHONE>, UK <PHONE>, HK <PHONE>"),
    ("联系电话：１３８１２３４５６７８。", "联系电话：<PHONE>。"),
    ("tel=13812345678", "tel=<PHONE>"),  # a word is no math operand
    ("电话13812345678/13987654321", "电话<PHONE>/<PHONE>"),  # two phones are no division
    # national forms (review: these were missed)
    ("call (555) 123-4567 or 555-123-4567", "call <PHONE> or <PHONE>"),
    ("fax 415.555.2671, toll-free 1-800-555-0199", "fax <PHONE>, toll-free <PHONE>"),
    ("UK mobile 07700 900123, AU 0412 345 678", "UK mobile <PHONE>, AU <PHONE>"),
    ("tel (555)123-4567.", "tel <PHONE>."),
    # math-word near misses that are still phones: no operand across the word, or no math word
    ("请加13812345678微信", "请加<PHONE>微信"),  # 加 is "add me", nothing before it
    ("Call 13812345678 and 13987654321", "Call <PHONE> and <PHONE>"),
    ("My phone 13812345678 is a prime contact", "My phone <PHONE> is a prime contact"),
    ("call 13812345678 three times", "call <PHONE> three times"),
    ("phone_no=13812345678, reorder later", "phone_no=<PHONE>, reorder later"),
    # e-mail, also typed full-width
    ("邮箱 lin.wei+shop@mail.example.com。谢谢", "邮箱 <EMAIL>。谢谢"),
    ("ｌｉｎ＠ｅｘａｍｐｌｅ．ｃｏｍ", "<EMAIL>"),
    # resident ID (GB 11643 examples) and cards (networks' published test numbers)
    ("身份证号11010519491231002X", "身份证号<ID_NUMBER>"),
    ("ID 440524188001010014 please", "ID <ID_NUMBER> please"),
    ("卡号6200000000000005，另一张 4111 1111 1111 1111", "卡号<BANK_CARD>，另一张 <BANK_CARD>"),
    ("Amex 3782 822463 10005, MC 5555-5555-5555-4444", "Amex <BANK_CARD>, MC <BANK_CARD>"),
    # IP addresses
    ("登录IP 192.168.1.10:8080", "登录IP <IP_ADDRESS>:8080"),
    ("from 2001:db8::8a2e:370:7334 today", "from <IP_ADDRESS> today"),
]

KEPT = [
    # order numbers: a letter prefix, inside a longer token, after an order label
    "Order SO13812345678 was shipped",
    "SO-13812345678",
    "单号ERP13812345678",
    "x13812345678",
    "订单号13812345678",
    "订单号：13812345678",
    "order no. 13812345678",
    "Order #13812345678",
    "运单号 6200000000000005",
    "20260315001 was paid",
    "12345678901",
    "订单12345678901234567890",
    # amounts with separators or currency
    "总价 1,234,567.89 元",
    "¥12,345",
    "¥13812345678",
    "13812345678元",
    "$13812345678",
    "12345678.90",
    "0.13812345678",
    "13,812,345,678",
    # checksums that fail, numbers without a card network, first-generation 15-digit IDs
    "身份证号110105194912310021",
    "卡号6200000000000006",
    "卡号1234567812345670",
    "110105491231002",
    "身份证号110105194902300028",  # 30 February: no such birth date
    # math: operands, math spans, variables
    "计算 13800138000 + 1 等于多少？",
    "x = 13800138000",
    "$13812345678 \\times 2$",
    "\\(6200000000000005 - 5\\)",
    "5 +14155552671",
    "13812345678*2",
    # things shaped a little like IPs or e-mails
    "version 1.2.3.4",
    "版本1.2.3.4",
    "v1.2.3.4",
    "12:30:45",
    "std::vector<int>",
    "x[::2]",
    "3.14",
    "user@localhost",
    "@everyone",
    "2026-03-15 14:05",
    # order numbers as keys (review: scrubbed in tool-call references)
    'cancel_order(order_id="13812345678")',
    '{"order_id": "13812345678"}',
    "lookup_order(order_id=13812345678)",
    "{'orderId': '13812345678'}",
    '"order_no":"13812345678"',
    "order_number: 6200000000000005",
    "tracking_no=13912345678",
    '{"sku": 4111111111111111}',
    "?order_id=13812345678&x=1",
    # math in words (review: scrubbed)
    "Is 13812345678 prime?",
    "What is 13812345678 divided by 2?",
    "Find 13812345678 mod 7",
    "Sum of 13812345678 and 13987654321",
    "The product of 4111111111111111 and 3",
    "Is 13812345678 a prime number?",
    "Is 13812345678 divisible by 3?",
    "2 times 13812345678",
    "13812345678 plus 13987654321",
    "the gcd of 13812345678 and 42",
    "Factorize 13812345678.",
    "13812345678除以2等于多少？",
    "13812345678乘以3",
    "3加13812345678",
    "13812345678减去1",
    "13812345678与13987654321的和是多少？",
    "13812345678和3的积",
    "13812345678是质数吗？",
    "求13812345678的因数",
    "13812345678能被7整除吗？",
    # national-phone near misses: dates, versions, longer chains, bare runs, spaced math
    "2024-05-01",
    "version 415.555.2671",
    "v555.123.4567",
    "555-123",
    "555-123-4567-89",
    "SO-555-123-4567",
    "order 555-123-4567",
    "12.345.6789",
    "555.123.45678",
    "ISBN 978-0-306-40615-7",
    "555 - 123 - 4567",
    "$555-123-4567$",
    "0412345678",
    "07700900123",
    "5551234567",
    "1.234.5678",
    "2023.10.12.1234",
    "(055) 123-4567",
    "155-123-4567",
]


@pytest.mark.parametrize("raw, expected", SCRUBBED)
def test_pii_is_replaced_by_typed_placeholders(raw, expected):
    assert scrub_row({"question": raw})[0]["question"] == expected


@pytest.mark.parametrize("raw", KEPT)
def test_near_misses_are_kept(raw):
    out, counts = scrub_row({"question": raw})
    assert out["question"] == raw and not counts


def test_checksums_against_published_examples():
    assert id_number_valid("11010519491231002X") and id_number_valid("11010519491231002x")
    assert id_number_valid("440524188001010014")
    assert not id_number_valid("110105194912310021") and not id_number_valid("11010519491231002")
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")
    for card in (
        "4111111111111111",
        "5555555555554444",
        "378282246310005",
        "6200000000000005",
        "3530111333300000",
        "6011111111111117",
    ):
        assert luhn_valid(card), card


def test_a_number_that_is_math_somewhere_in_the_row_is_kept_everywhere():
    row = {
        "question": "计算 13800138000 + 1 等于多少？",
        "reference": "13800138001",
        "solution": "13800138000+1=13800138001\n答案: 13800138001",
    }
    assert scrub_row(row) == (row, {})
    row = {"question": "What is 13800138000 + 1?", "reference": "13800138001", "solution": "Answer: 13800138001"}
    assert scrub_row(row)[0] == row  # the bare reference is an answer, so the solution's copy stays too
    row = {
        "question": "Call 13812345678: refund for 3 mugs at 12 each?",
        "reference": "36",
        "solution": "I called 13812345678.\n3*12=36\nAnswer: 36",
    }
    out, counts = scrub_row(row)
    assert out == {
        "question": "Call <PHONE>: refund for 3 mugs at 12 each?",
        "reference": "36",
        "solution": "I called <PHONE>.\n3*12=36\nAnswer: 36",
    }
    assert counts == {"phone": 2}


# review: an order number the question keeps was scrubbed in the tool-call reference, making the
# reference disagree with the question (or, unquoted, fail to parse)
ORDER_ROWS = [
    ("Please cancel order 13812345678", 'cancel_order(order_id="13812345678")'),
    ("Please cancel order 13812345678", '{"name": "cancel_order", "arguments": {"order_id": "13812345678"}}'),
    ("Where is order 13812345678?", "lookup_order(order_id=13812345678)"),
    ("订单号：13812345678 发错货了", 'escalate(order_id="13812345678", reason="wrong_item")'),
    ("Refund order 6200000000000005", 'issue_refund(orderId="6200000000000005", amount=36)'),
]


@pytest.mark.parametrize("question, reference", ORDER_ROWS)
def test_an_order_number_is_kept_in_question_reference_and_solution(question, reference):
    row = {"question": question, "reference": reference, "solution": f"<tool_call>\n{reference}\n</tool_call>"}
    assert scrub_row(row) == (row, {})
    # labelled in one field only, it is still kept in the others
    row = {
        "question": "Cancel 13812345678 please",
        "reference": '{"order_id": "13812345678"}',
        "solution": "Cancelled 13812345678.",
    }
    assert scrub_row(row) == (row, {})


def test_a_phone_beside_a_kept_order_number_is_still_scrubbed():
    row = {
        "question": "Cancel order 13812345678, call me on 13987654321",
        "reference": 'cancel_order(order_id="13812345678")',
        "solution": "",
    }
    out, counts = scrub_row(row)
    assert out["question"] == "Cancel order 13812345678, call me on <PHONE>"
    assert out["reference"] == row["reference"] and counts == {"phone": 1}


def test_math_words_keep_the_number_in_every_field():
    row = {
        "question": "What is 13812345678 divided by 2?",
        "reference": "6906172839",
        "solution": "13812345678 / 2 = 6906172839",
    }
    assert scrub_row(row) == (row, {})
    row = {"question": "13812345678是质数吗？我的电话13987654321", "reference": "否", "solution": ""}
    assert scrub_row(row)[0]["question"] == "13812345678是质数吗？我的电话<PHONE>"


@pytest.mark.timeout(20)
def test_long_adversarial_values_scrub_in_linear_time():
    n = 20_000
    assert scrub_row({"question": "\\(" * n + " 13812345678"})[0]["question"] == "\\(" * n + " <PHONE>"
    chain = "1." * n + "，电话13812345678"
    assert scrub_row({"question": chain})[0]["question"] == "1." * n + "，电话<PHONE>"
    words = "plus " * n + "13812345678"  # a word operator with no operand across it
    assert scrub_row({"question": words})[0]["question"] == "plus " * n + "<PHONE>"


def test_reference_and_solution_are_scrubbed_and_kinds_can_be_chosen():
    row = {
        "question": "Reply to the customer",
        "reference": '{"required": ["lin@example.com"]}',
        "solution": "Sent to lin@example.com from 10.0.0.7, phone 13812345678",
    }
    out, counts = scrub_row(row)
    assert out["reference"] == '{"required": ["<EMAIL>"]}'
    assert out["solution"] == "Sent to <EMAIL> from <IP_ADDRESS>, phone <PHONE>"
    assert counts == {"email": 2, "ip_address": 1, "phone": 1}
    only = scrub_row(row, kinds=["phone"])[0]
    assert only["solution"] == "Sent to lin@example.com from 10.0.0.7, phone <PHONE>"


def test_scrubbing_twice_changes_nothing_more():
    for raw, _ in SCRUBBED:
        once = scrub_row({"question": raw})[0]
        assert scrub_row(once) == (once, {})


FRAGMENTS = (
    [raw for raw, _ in SCRUBBED]
    + KEPT
    + [
        "What is 12 + 7?",
        "退款多少元？",
        " ",
        "，",
        "。",
        "+",
        "00",
        "-",
        "=",
        "1",
        "5",
        "13",
        "86",
        ":",
        "@",
        "example.com",
        "\n",
        "（",
        "）",
        "１２３",
        "￥",
    ]
)


def _rows(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    pick = lambda k: "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, k)))  # noqa: E731
    return [{"question": pick(4), "reference": pick(2), "solution": pick(3)} for _ in range(n)]


def test_vectorized_equals_per_row_and_the_hint_misses_nothing():
    """scrub_frame sends only the rows PII_HINT flags through Python: equal output means the hint
    missed no row the per-row scrubber changes."""
    rows = _rows(1500, seed=3)
    df = pl.DataFrame(rows)
    out, by_kind, changed = scrub_frame(df)
    expected = [scrub_row(r) for r in rows]
    for f in ("question", "reference", "solution"):
        assert out[f].to_list() == [e[0][f] for e in expected], f
    total = {}
    for _, counts in expected:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    assert {k: v for k, v in by_kind.items() if v} == total
    assert changed == sum(bool(c) for _, c in expected) > 300


def test_clean_stage_counts_by_kind_and_keeps_every_row():
    df = pl.DataFrame(
        {
            "id": ["1", "2", "3"],
            "domain": ["d"] * 3,
            "category": ["arithmetic", "reply", "arithmetic"],
            "question": [
                "我的手机13812345678，3件12元的商品退款多少？",
                "Email lin@example.com please",
                "What is 13800138000 + 1?",
            ],
            "reference": ["36", '{"required": ["lin@example.com"]}', "13800138001"],
            "solution": ["", "", ""],
            "source": ["a:1", "a:2", "a:3"],
        }
    )
    result = clean_stage(df, CleaningConfig(pii=True), "d")
    assert result.stats["pii"] == {"email": 2, "phone": 1, "id_number": 0, "bank_card": 0, "ip_address": 0}
    assert result.stats["pii_rows"] == 2
    assert result.stats["rows_in"] == result.stats["rows_kept"] == 3
    assert result.kept["question"].to_list()[0] == "我的手机<PHONE>，3件12元的商品退款多少？"
    assert "<PHONE>" in result.kept["prompt"].to_list()[0]  # the prompt is built from the scrubbed question
    off = clean_stage(df, CleaningConfig(), "d")
    assert "pii" not in off.stats and off.kept["question"].to_list()[0].startswith("我的手机13812345678")


def test_pii_config_switch():
    assert CleaningConfig(pii=True).pii.enabled and not CleaningConfig().pii.enabled
    assert CleaningConfig(pii={"enabled": True, "kinds": ["email"]}).pii.kinds == ["email"]
    with pytest.raises(ValueError, match="kinds"):
        CleaningConfig(pii={"enabled": True, "kinds": ["address"]})
