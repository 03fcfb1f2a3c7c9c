"""Writes math_cases.jsonl: the project's own math regression table (response, gold, expected).

Shared by tests/verifiers/test_math_cases.py and bench/math_verdicts.py. Each case says what it
guards in `why`. Run `python bench/cases/make_math_cases.py` after editing the table below.
"""
import json
from pathlib import Path

C = []


def case(response, gold, expected, why):
    C.append({"response": response, "gold": gold, "expected": expected, "why": why})


# --- extraction: where the final answer is -----------------------------------------------------
case("The answer is 36.", "36", 1, "english marker, trailing period")
case("So the final answer is 36", "36", 1, "final answer marker")
case("Final Answer: 36", "36", 1, "final answer colon")
case("答案是 36", "36", 1, "chinese marker 答案是")
case("最终答案：36", "36", 1, "chinese marker 最终答案")
case("计算得出。答：36元", "36", 1, "chinese 答： with yuan")
case("答案: 36", "36", 1, "答案: with ascii colon")
case("We add them. \\boxed{36}", "36", 1, "boxed")
case("\\boxed{\\frac{3}{4}}", "3/4", 1, "boxed latex fraction vs slash fraction")
case("Answer: 36", "36", 1, "Answer: line")
case("**Answer:** 36", "36", 1, "markdown bold Answer:")
case("First 12, then 24.\nTotal: 36", "36", 1, "fallback: the one number on the last line")
case("36", "36", 1, "bare answer")
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
case("\\boxed{\\sqrt[3]{8}}", "2", 1, "cube root")
case("\\boxed{2^{10}}", "1024", 1, "power")
# --- hedging and spam ---------------------------------------------------------------------------
case("\\boxed{35} or maybe \\boxed{36}", "36", 0, "hedging between boxed answers")
case("Answer: 35\nAnswer: 36", "36", 0, "hedging between Answer: lines")
case("The answer is 36. \\boxed{37}", "36", 0, "hedging marker vs boxed")
case("Answer: 36\n\\boxed{36.0}", "36", 1, "consistent repeats are not hedging")
case("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36", "36", 0, "number spam")
case("Answer: 1, 2, 3, 4, 5, 36", "36", 0, "answer list spam")
case("Answer: 36 Answer: 37 Answer: 38", "36", 0, "marker spam")
case("Answer: 36 or 37", "36", 0, "hedge inside one answer")
case("The answer is 36 apples.", "答案: 36", 1, "gold with chinese marker")

Path(__file__).with_name("math_cases.jsonl").write_text(
    "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in C), encoding="utf-8")
print(f"wrote {len(C)} cases")
