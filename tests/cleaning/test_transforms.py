"""The text transforms: a table of (field, category, raw, expected) cases, then seeded fuzz checks
that the vectorized cleaner equals the per-value one and that cleaning twice changes nothing."""

from __future__ import annotations

import polars as pl
import pytest

from rlvrflow.cleaning import CleaningConfig, clean_frame, clean_value, to_half_width
from rlvrflow.cleaning.transforms import TEXT_FIELDS
from rlvrflow.cleaning.width import _HAS_FORMULA, convert_spans

from .fuzz import messy_rows

CFG = CleaningConfig(width={"categories_all_fields": ["arith_all"]})

CASES = [
    # mojibake, only where needed; legit accents and curly quotes survive
    ("question", "x", "cafÃ© costs â‚¬5 â€” ok?", "café costs €5 — ok?"),
    ("question", "x", "naïve “quoted” text", "naïve “quoted” text"),
    ("question", "x", "è®¡ç®—ä¸€ä¸‹", "计算一下"),
    # full-width: CJK prose punctuation stays, numbers / math / code spans convert
    ("question", "x", "计算３＋４等于多少？请回答，谢谢。", "计算3+4等于多少？请回答，谢谢。"),
    ("question", "x", "用`ｘ＝１`和$ａ＋ｂ$，好吗？", "用`x=1`和$a+b$，好吗？"),
    ("question", "x", "价格是１２．５％吗？", "价格是12.5%吗？"),
    ("question", "x", "ＡＢＣ公司，你好", "ＡＢＣ公司，你好"),
    ("question", "arith_all", "ＡＢＣ公司，你好？", "ABC公司,你好?"),
    # bare formulas in CJK prose: letters, digits and operators convert, the punctuation stays,
    # and a lone variable follows its formula; without a formula lone letters stay
    ("question", "x", "已知ｘ＋１＝３，求ｘ的值。", "已知x+1=3，求x的值。"),
    ("question", "x", "已知 ｘ＋ｙ＝１０，ｘ－ｙ＝２，求ｘ。", "已知 x+y=10，x-y=2，求x。"),
    ("question", "x", "设函数ｆ（ｘ）＝２ｘ＋１，求ｆ（３）。", "设函数f(x)=2x+1，求f(3)。"),
    ("question", "x", "计算（３＋４）×２等于多少？", "计算(3+4)×2等于多少？"),
    ("question", "x", "若ａ×ｂ＝１２，面积Ｓ＝ａ＾２，则ｂ＝？", "若a×b=12，面积S=a^2，则b＝？"),
    ("question", "x", "（１）ｘ＋１＝２，价格（元）是多少？", "（1）x+1=2，价格（元）是多少？"),
    ("question", "x", "ＶＩＰ会员的Ｘ型号，好吗？", "ＶＩＰ会员的Ｘ型号，好吗？"),
    ("reference", "x", "４２", "42"),
    ("solution", "x", "Ａｎｓｗｅｒ：　７", "Answer: 7"),
    # LaTeX
    ("question", "x", "What is $\\dfrac{1}{2}$ of \\left(4\\right)?", "What is $\\frac{1}{2}$ of (4)?"),
    ("question", "x", "arrows \\leftarrow \\rightarrow stay", "arrows \\leftarrow \\rightarrow stay"),
    # a plain numeric fraction reference has one form, a/b, however the log wrote it
    ("reference", "x", "$\\tfrac{3}{4}$", "3/4"),
    ("reference", "x", "\\frac{ 3 }{ 4 }", "3/4"),
    ("reference", "x", "-\\dfrac{3}{4}", "-3/4"),
    ("reference", "x", "\\frac{-3}{4}", "-3/4"),
    ("reference", "x", "\\(\\frac12\\)", "1/2"),
    ("reference", "x", "3/4", "3/4"),
    ("reference", "x", "\\frac{x}{2}", "\\frac{x}{2}"),
    ("reference", "x", "1\\frac{1}{2}", "1\\frac{1}{2}"),
    ("reference", "x", "\\frac{3}{4}+1", "\\frac{3}{4}+1"),
    ("question", "x", "Is $\\frac{3}{4}$ more?", "Is $\\frac{3}{4}$ more?"),
    ("reference", "x", "$$42$$", "42"),
    ("reference", "x", "\\(7\\)", "7"),
    ("reference", "x", "42$", "42"),
    ("reference", "x", "$42", "$42"),
    ("reference", "x", "90^\\circ", "90"),
    ("reference", "x", "90^{\\circ}", "90"),
    ("reference", "x", "1\\,000", "1000"),
    ("reference", "x", "5\\text{ cm}", "5 cm"),
    ("reference", "x", "50\\%", "50%"),
    ("reference", "x", "\\left.\\frac{x}{2}\\right|", "\\frac{x}{2}|"),
    # special tokens and role tags
    ("question", "x", "<|im_start|>user\nWhat is 2+2?<|im_end|>", "What is 2+2?"),
    ("question", "x", "<s>[INST] hi [/INST]</s>", "hi"),
    ("solution", "x", "Answer: 4<|endoftext|><pad><pad>", "Answer: 4"),
    ("question", "x", "### Human: refund policy?", "refund policy?"),
    ("question", "x", "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>", "hello"),
    ("question", "x", "12<unk>34", "12 34"),
    # invisible characters, controls and whitespace
    ("question", "x", "\ufeffzero\u200bwidth\u200d here\u00ad", "zerowidth here"),
    ("question", "x", "bell\x07 and \x1b[31mred\x1b[0m", "bell and red"),
    ("question", "x", "a\u00a0\u00a0b\u3000c\t\td  ", "a b c d"),
    ("question", "x", "line one\r\nline two\r\n\r\n\r\n\r\nline three", "line one\nline two\n\nline three"),
    ("question", "x", "code:\n    indented  line", "code:\n    indented line"),
]


@pytest.mark.parametrize("field, category, raw, expected", CASES)
def test_clean_value_table(field, category, raw, expected):
    assert clean_value(raw, field, category, CFG) == expected


@pytest.mark.parametrize("field, category, raw, expected", CASES)
def test_clean_frame_matches_the_table(field, category, raw, expected):
    df = pl.DataFrame({"question": ["q"], "reference": ["r"], "solution": [""], "category": [category]})
    out = clean_frame(df.with_columns(pl.lit(raw).alias(field)), CFG)
    assert out[field][0] == expected


def test_verbatim_categories_keep_gold_code_and_sql_intact():
    sql = "SELECT name,  '，' FROM t WHERE x = '<s>'\r\n"
    tests = '{"input": "a  b", "output": "\\\\left("}'
    cfg = CleaningConfig(verbatim_categories=["sql", "code"])
    assert clean_value(sql, "reference", "sql", cfg) == "SELECT name,  '，' FROM t WHERE x = '<s>'"
    assert clean_value(tests, "reference", "code", cfg) == tests
    # the question of a verbatim row is still prose and gets the full treatment
    assert clean_value("<s>Ｔｏｔａｌ  sales?", "question", "sql", cfg) == "Ｔｏｔａｌ sales?"


def test_switches_turn_rules_off():
    cfg = CleaningConfig(fix_mojibake=False, latex=False, special_tokens={"enabled": False}, width={"scope": []})
    raw = "cafÃ© <s> \\dfrac12 ４２"
    assert clean_value(raw, "reference", "x", cfg) == raw


def test_extra_special_tokens_are_stripped():
    cfg = CleaningConfig(special_tokens={"extra": ["<|ticket|>"]})
    assert clean_value("<|ticket|>Where is my order?", "question", "x", cfg) == "Where is my order?"


def test_bare_formula_out_of_scope_keeps_letters_but_numbers_still_convert():
    numbers_only = CleaningConfig(width={"scope": ["numbers"]})
    assert clean_value("已知ｘ＋１＝３，求ｘ。", "question", "x", numbers_only) == "已知ｘ＋1=3，求ｘ。"
    assert (
        clean_value("已知ｘ＋１＝３，求ｘ。", "question", "x", CleaningConfig(width={"scope": []}))
        == "已知ｘ＋１＝３，求ｘ。"
    )


def test_to_half_width_covers_the_ascii_block_and_ideographic_space():
    full = "".join(chr(c) for c in range(0xFF01, 0xFF5F)) + "\u3000"
    assert to_half_width(full) == "".join(chr(c) for c in range(0x21, 0x7F)) + " "
    assert to_half_width("。、「」") == "。、「」"  # CJK punctuation outside the block is untouched


CONFIGS = [
    CleaningConfig(),
    CleaningConfig(width={"categories_all_fields": ["arithmetic"]}, verbatim_categories=["sql", "code"]),
    CleaningConfig(width={"scope": ["question"]}, latex=False, special_tokens={"enabled": False}),
]


@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_vectorized_equals_per_value_and_is_idempotent(ci):
    cfg = CONFIGS[ci]
    rows = messy_rows(1500, seed=ci)
    df = pl.DataFrame(rows)
    out = clean_frame(df, cfg)
    expected = {f: [clean_value(r[f], f, r["category"], cfg) for r in rows] for f in TEXT_FIELDS}
    for f in TEXT_FIELDS:
        assert out[f].to_list() == expected[f], f
    assert clean_frame(out, cfg).equals(out)
    changed = sum(a != b for a, b in zip(out["question"].to_list(), df["question"].to_list()))
    assert changed > 500  # the fuzz really is messy, so the checks above mean something


def test_ftfy_leaves_fast_path_text_alone():
    """The fast path skips ftfy on values made only of SAFE_CHARS; ftfy must be the identity there."""
    import random

    import ftfy

    from rlvrflow.cleaning.rules import FTFY_CONFIG, SUSPECT

    rng = random.Random(7)
    pools = [
        "\t\n",
        "".join(chr(c) for c in range(0x20, 0x7F)),
        "".join(chr(c) for c in range(0x3000, 0x302A)),
        "".join(chr(c) for c in range(0x4E00, 0x9FFF, 37)),
        "".join(chr(c) for c in range(0xFF01, 0xFF5F)),
        "&amp; &lt;b&gt; \\x1b[31m <s> A~e \\u00e9",
    ]
    samples = ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 60))) for _ in range(3000)]
    samples += ["1st&2nd; a&amp;b", "Dear Sir,\n\tthanks", "价格（元）：１２．５，对吗？", "ＡＢＣ＂ｘ＂"]
    safe = pl.Series(samples).str.contains(SUSPECT).not_()
    assert safe.all()
    assert [s for s in samples if ftfy.fix_text(s, FTFY_CONFIG) != s] == []


# Values that made the width regexes backtrack quadratically (the number atom retried from every
# digit of `１．１．…` with every shorter prefix; an unclosed `\(` scanned to the end from each
# opener): 40,000 characters each, (value, scopes, expected convert_spans output).
N = 20_000
ADVERSARIAL = [
    ("１．" * N, ["numbers", "math_spans"], "1." * N),
    ("１．" * N, ["math_spans"], "１．" * N),  # no operator: no formula
    ("１．" * N + "＋", ["math_spans"], "１．" * N + "＋"),  # an operator, no operand after it
    ("１．" * (N - 2) + "１＋１", ["math_spans"], "1." * (N - 2) + "1+1"),  # one formula, the whole value
    ("ａ．" * N + "＋", ["math_spans"], "ａ．" * N + "＋"),
    ("（１＋" * (2 * N // 3), ["math_spans"], "（１＋" * (2 * N // 3)),  # unclosed groups: no formula
    ("\\(" * N, ["math_spans"], "\\(" * N),
    ("\\(" * (N - 4) + "ｘ＋１\\)", ["math_spans"], "\\(" * (N - 5) + "\\(x+1\\)"),
    ("\\[" * N + "ｘ", ["math_spans"], "\\[" * N + "ｘ"),
    ("1" + "　" * (2 * N) + "＋", ["numbers", "math_spans"], "1" + "　" * (2 * N) + "＋"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("i", range(len(ADVERSARIAL)))
def test_width_spans_are_linear_on_adversarial_values(i):
    value, scopes, expected = ADVERSARIAL[i]
    assert convert_spans(value, scopes) == expected


@pytest.mark.timeout(20)
def test_a_long_full_width_row_with_an_operator_cleans_and_has_no_formula_where_none_is():
    assert _HAS_FORMULA.search("1." * N + "，") is None
    assert _HAS_FORMULA.search("１．" * N + "１＋１").span() == (0, 2 * N + 3)
    question = "计算" + "１．" * (N - 2) + "１＋１"
    expected = "计算" + "1." * (N - 2) + "1+1"
    assert clean_value(question, "question", "arithmetic", CleaningConfig()) == expected
    df = pl.DataFrame({"question": [question], "reference": ["2"], "solution": [""], "category": ["arithmetic"]})
    assert clean_frame(df, CleaningConfig())["question"].to_list() == [expected]


def test_a_line_break_inside_display_math_is_not_an_opener():
    assert convert_spans("\\[ａ\\\\[2pt]ｂ\\]", ["math_spans"]) == "\\[a\\\\[2pt]b\\]"
    assert (
        convert_spans("\\(１２ \\(ｂ＋１\\)", ["math_spans"]) == "\\(１２ \\(b+1\\)"
    )  # an unclosed opener: the inner span
