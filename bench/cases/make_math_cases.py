"""Writes math_cases.jsonl: the project's own math regression table (response, gold, expected).

Shared by tests/verifiers/test_math_cases.py and bench/math_verdicts.py. Each case says what it
guards in `why`. Run `python bench/cases/make_math_cases.py` after editing the table below.
"""

import json
from pathlib import Path

C = []


def case(response, gold, expected, why, params=None):
    C.append(
        {"response": response, "gold": gold, "expected": expected, "why": why, **({"params": params} if params else {})}
    )


# --- extraction: where the final answer is -----------------------------------------------------
case("The answer is 36.", "36", 1, "english marker, trailing period")
case("So the final answer is 36", "36", 1, "final answer marker")
case("Final Answer: 36", "36", 1, "final answer colon")
case("答案是 36", "36", 1, "chinese marker 答案是")
case("最终答案：36", "36", 1, "chinese marker 最终答案")
case("计算得出。答：36元", "36", 1, "chinese 答： with yuan")
case("答案: 36", "36", 1, "答案: with ascii colon")
case("We add them. \\boxed{36}", "36", 1, "boxed")
case("So the final answer is $\\boxed{212}$.", "212", 1, "marker followed by inline-math boxed")
case("The answer is $\\boxed{\\frac{3}{4}}$", "0.75", 1, "marker, inline math, boxed fraction")
case("\\boxed{\\frac{3}{4}}", "3/4", 1, "boxed latex fraction vs slash fraction")
case("Answer: 36", "36", 1, "Answer: line")
case("**Answer:** 36", "36", 1, "markdown bold Answer:")
case("First 12, then 24.\nTotal: 36", "36", 1, "fallback: the one number on the last line")
case("36", "36", 1, "bare answer")
case("e: 9", "9", 1, "fallback: a labelled last line gives its one number")
case("x^2", "2", 0, "fallback: a short expression is taken whole, not its digit")
case("Some work: 3*12\n36", "36", 1, "bare answer on last line")
case("The answer is 35. Wait, no.", "36", 0, "wrong marker answer")
case("\\boxed{35}", "36", 0, "wrong boxed")
case("We get 12 then 24 and 36 total so 37", "36", 0, "fallback picks nothing from a word line with many numbers")
case("", "36", 0, "empty")
case("Answer:", "36", 0, "format only: empty Answer:")
case("\\boxed{}", "36", 0, "format only: empty boxed")
case("I am not sure.", "36", 0, "no answer")
# --- normalization ------------------------------------------------------------------------------
case("答案是 ３６", "36", 1, "full-width digits")
case("Answer: １２．５", "12.5", 1, "full-width decimal point")
case("Answer: $40", "¥40", 1, "currency dollar vs yen")
case("Answer: 40元", "40", 1, "currency yuan")
case("Answer: ￥40", "40", 1, "full-width yen")
case("Answer: 1,234,567", "1234567", 1, "thousands separators")
case("Answer: 1,234,567", "1234568", 0, "thousands separators, off by one")
case("Answer: 50%", "0.5", 1, "percent vs decimal")
case("Answer: 50\\%", "50%", 1, "latex percent")
case("Answer: 50%", "50", 1, "percent vs plain number")
case("Answer: 45%", "0.5", 0, "percent, wrong")
case("\\boxed{\\dfrac{1}{2}}", "0.5", 1, "dfrac")
case("\\boxed{\\frac12}", "1/2", 1, "frac shorthand")
case("\\boxed{90^\\circ}", "90", 1, "degrees")
case("\\boxed{\\text{36 apples}}", "36", 1, "text wrapper with unit word")
case("Answer: 36 apples", "36", 1, "unit word")
case("Answer: 3 cm", "3", 1, "unit abbreviation")
case("The answer is $\\frac{3}{4}$.", "0.75", 1, "inline math after marker")
case("Answer: \\(12.5\\)", "12.5", 1, "latex paren delimiters")
# --- numeric ------------------------------------------------------------------------------------
case("Answer: 36.0", "36", 1, "trailing zero decimal")
case("Answer: 36.00", "36", 1, "two trailing zeros")
case("Answer: 12345679", "12345678", 0, "large integers differ by one")
case("Answer: 12345678", "12345678", 1, "large integer equal")
case("Answer: 100.01", "100", 0, "tight tolerance: 100 != 100.01")
case("Answer: 0.75", "3/4", 1, "decimal vs fraction")
case("Answer: -0.5", "-\\frac{1}{2}", 1, "negative fraction")
case("Answer: 0.5", "-0.5", 0, "sign matters")
case("Answer: 1.2e5", "120000", 1, "scientific e notation")
case("Answer: 1.2\\times10^{5}", "120000", 1, "scientific latex")
case("Answer: 1.2 × 10^5", "120000", 1, "scientific unicode times")
case("Answer: 0.333333", "1/3", 0, "rounded repeating decimal is not exact")
case("Answer: 2/3", "0.6667", 0, "fraction vs rounded gold")
case("Answer: 7", "7.0", 1, "int vs float gold")
case("Answer: 0.1", "1/10", 1, "decimal vs fraction tenth")
# --- sets, tuples, intervals, multiple solutions ----------------------------------------------
case("x=2 or x=3", "{2,3}", 1, "multiple solutions vs set")
case("Answer: x = 3 or x = 2", "2, 3", 1, "order-insensitive solutions")
case("答案：2或3", "{3, 2}", 1, "chinese or")
case("答案：2、3", "2,3", 1, "chinese enumeration comma")
case("\\boxed{\\{1, 2, 3\\}}", "{3,2,1}", 1, "latex set braces")
case("\\boxed{(1, 2)}", "(1,2)", 1, "tuple")
case("\\boxed{(2, 1)}", "(1,2)", 0, "tuple order matters")
case("\\boxed{[1, 3)}", "[1,3)", 1, "half-open interval")
case("\\boxed{(1, 3)}", "[1,3)", 0, "interval bracket matters")
case("Answer: 2 or 3", "2", 0, "two answers for one gold")
case("Answer: 2", "2 or 3", 0, "one answer for two golds")
case("x = 2", "2", 1, "assignment vs value")
case("\\boxed{x \\in [1, 3)}", "[1,3)", 1, "membership prefix")
case("Answer: 2, 3, 4", "{2,3}", 0, "extra solution")
# --- symbolic -----------------------------------------------------------------------------------
case("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", 1, "radical simplification")
case("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", 1, "rationalized denominator")
case("\\boxed{2x+1}", "1+2x", 1, "commuted polynomial")
case("\\boxed{x^2-1}", "(x-1)(x+1)", 1, "factored polynomial")
case("\\boxed{x^2+1}", "(x-1)(x+1)", 0, "different polynomial")
case("\\boxed{\\pi/2}", "\\frac{\\pi}{2}", 1, "pi fraction")
case("\\boxed{3.14}", "\\pi", 0, "pi approximation is not pi")
case("\\boxed{2x}", "2", 0, "variable is not a unit")
case("\\boxed{\\sqrt[3]{8}}", "2", 0, "an unevaluated cube root for a number gold")
case("\\boxed{\\sqrt[3]{8}}", "2", 1, "cube root, expressions allowed", {"allow_expressions": True})
case("\\boxed{2^{10}}", "1024", 0, "an unevaluated power for a number gold")
case("\\boxed{2^{10}}", "1024", 1, "power, expressions allowed", {"allow_expressions": True})
# --- hedging and spam ---------------------------------------------------------------------------
case("\\boxed{35} or maybe \\boxed{36}", "36", 0, "hedging between boxed answers")
case("Answer: 35\nAnswer: 36", "36", 0, "hedging between Answer: lines")
case("The answer is 36. \\boxed{37}", "36", 0, "hedging marker vs boxed")
case("Answer: 36\n\\boxed{36.0}", "36", 1, "consistent repeats are not hedging")
case(
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36",
    "36",
    0,
    "number spam",
)
case("Answer: 1, 2, 3, 4, 5, 36", "36", 0, "answer list spam")
case("Answer: 36 Answer: 37 Answer: 38", "36", 0, "marker spam")
case("Answer: 36 or 37", "36", 0, "hedge inside one answer")
case("The answer is 36 apples.", "答案: 36", 1, "gold with chinese marker")

# --- outside forms: how public datasets and real models write answers (issue 11) ---------------
case("$\\dfrac{5}{12}$", "\\dfrac{5}{12}", 1, "bare display fraction identical to its reference")
case("\\boxed{\\frac25}", "2/5", 1, "shorthand frac")
case("The answer is \\[ \\frac{7}{2} \\]", "3.5", 1, "display math after a marker")
case("Answer $$ 9 $$", "9", 1, "Answer without a colon, display dollars")
case("Answer \\[ \n 9 \n \\]", "9", 1, "Answer without a colon, display brackets over lines")
case("\\boxed{(-\\infty, 3]}", "(-\\infty, 3]", 1, "interval with infinity matches itself")
case("\\boxed{\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 1, "matrix")
case(
    "\\boxed{\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}}",
    "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
    0,
    "matrix, one entry off",
)
case("Answer: x = 1 \\pm 2", "{-1, 3}", 1, "plus-minus is two solutions")
case("Answer: \\pm 3", "3, -3", 1, "plus-minus alone")
case("\\boxed{5\\text{ cm}}", "5", 1, "text unit")
case("Le résultat est 2,74 €. Answer: 2,74", "2.74", 1, "decimal comma in European text")
case("Answer: 36元。", "36", 1, "yuan and a full stop")
case("答案：￥12,345", "12345", 1, "full-width yen with thousands separators")
case("答案：100万", "1000000", 1, "wan multiplier")
case("答案：1.5亿", "150000000", 1, "yi multiplier")
case("Answer: 1e6", "1,000,000", 1, "scientific integer vs separators")
case("**Answer: 36**", "36", 1, "markdown bold around the answer")
case("Answer: 36<|im_end|>", "36", 1, "trailing chat special token")
case("<think>maybe 35? no: 6*6 = 36</think>The answer is 36.", "36", 1, "think block before the answer")
case("<think>it is 35</think>The answer is 36.", "35", 0, "an answer inside the think block does not count")
case("<think>the answer is 36", "36", 0, "unclosed think block leaves no answer")
case("Answer: x = 3 or x = -2", "-2, 3", 1, "two solutions in another order with or")
case("答案：3或-2", "-2, 3", 1, "two solutions in another order with 或")
case("The GCD of 380 and 986 is 2.", "2", 1, "final sentence: the X of ... is N")
case("LCM(47, 75) = 3525", "3525", 1, "final equation")
case("First 1043 - 2043 = -1000\n-381 - 662 = -1043", "-1043", 1, "equation chain ending = N")
case("Answer: 4410023918.0", "4410023917", 0, "10-digit integer off by one is wrong (no relative tolerance)")
case("Answer: 4410023917.0", "4410023917", 1, "10-digit integer written as a decimal")
case("Answer: 3:45 pm", "15:45", 1, "clock time, 12-hour form")
case("Answer: 4:45 pm", "15:45", 0, "clock time, an hour off")
case("#### 106", "106", 1, "GSM8K's #### marker")
case("So she pays $\\$61.62$ in total.", "61.62", 1, "escaped dollar inside math")
case("Answer: 8.1", "8, 10", 0, "a decimal is not the two solutions 8 and 10")
case("\\boxed{6640/19420}", "332/971", 1, "unsimplified fraction equals in value")
case(
    "\\boxed{6640/19420}",
    "332/971",
    0,
    "unsimplified fraction when lowest terms are required",
    {"require_simplified": True},
)
case("\\boxed{332/971}", "332/971", 1, "lowest terms when required", {"require_simplified": True})
case("Answer: 36.0", "36", 0, "a decimal when an integer is required", {"require_integer": True})
case("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}", 1, "symbolic gold, same form")
case("\\boxed{\\infty}", "36", 0, "infinity is not every number")
case("Answer: 3*12", "36", 0, "restating the question's numbers is not computing")
case("Answer: 3*12", "36", 1, "restated product, expressions allowed", {"allow_expressions": True})

# --- the desk's own language, chat tokens, restatements (issue 37) ---------------------------
case("应退款 88 元。", "88", 1, "chinese subject without a marker")
case("经核实，应退款88元", "88", 1, "chinese subject after a lead clause")
case("答：退款金额是45元", "45", 1, "答： with a subject and 是")
case("一共是 120 元，已为您登记。", "120", 1, "chinese subject, trailing clause")
case("因此，需要支付 ￥1,299.00。", "1299", 1, "chinese subject, full-width yen")
case("合计 2万元。", "20000", 1, "chinese subject, 万")
case("应退款约 88 元。", "88", 0, "chinese hedge 约")
case("应退款 1 2 3 4 5 元", "3", 0, "a list of amounts after a subject")
case("应退款88元，合计90元。", "88", 0, "two subjects, different amounts")
case("<|im_start|>assistant\n答案是10<|im_end|>", "10", 1, "ChatML assistant header")
case("<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is 5<|eot_id|>", "5", 1, "Llama-3 assistant header")
case("The conversion gives 2.5 kg, i.e. 2500 g.", "2500", 1, "a value restated in another unit")
case("The conversion gives 2.5 kg, i.e. 2500 g.", "25", 0, "neither reading of a restatement")
case("It is 2.5, i.e. 2500.", "2500", 0, "two different values are a hedge")

Path(__file__).with_name("math_cases.jsonl").write_text(
    "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in C), encoding="utf-8"
)
print(f"wrote {len(C)} cases")
