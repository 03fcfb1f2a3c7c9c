"""Answer forms read since Math-Verify's public cases showed them, each with a near miss that must
stay wrong: equations compared after moving terms, `!=`, assignments listed in one span, a gold's
unclosed last box, matrix sums and products, prices with a decimal comma, a value the final
sentence rejects, concluding sentences, boxed steps before a final-answer marker, a gold's
retracted box, a repeating decimal printed to double precision, a pair written without brackets."""

from __future__ import annotations

import pytest

from rlvrflow.verifiers import verify

SUM = "The sum is $\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix} + \\begin{pmatrix}5 & 6 \\\\ 7 & %s\\end{pmatrix}$"
GOLD_SUM = "$\\begin{pmatrix}6 & 8 \\\\ 10 & 12\\end{pmatrix}$"
ID = "\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}"
TWO = "\\begin{pmatrix}2 & 0 \\\\ 0 & 2\\end{pmatrix}"
CHAT = (
    "The divisors of 90 are 1, 2, 3, 5, 6, 9, 10, 15, 18, 30, 45, and 90. Therefore, there are 12 distinct "
    "arithmetic sequences that meet the three given conditions. I hope it is correct. <|im_start|>user"
)

CASES = [
    # (gold, response, correct)
    # an equation: the relation the answer was cut from, compared after moving terms
    ("$2x+4y-3=0$", "$y=-\\frac{1}{2}x+\\frac{3}{4}$", True),
    ("$2x+4y-3=0$", "$y=-\\frac{1}{2}x-\\frac{3}{4}$", False),
    ("$x^2/4 + y^2/3 = 1$", "$x^2/16 + y^2/12 = 1/4$", True),
    ("$x^2/4 + y^2/3 = 1$", "$x^2/16 + y^2/12 = 1$", False),
    ("$34x+45y-20z+100=0$", "$-34x-45y+20z-100=0$", True),
    ("$34x+45y-20z+100=0$", "$-34x-45y+20z+100=0$", False),
    ("$x=5$", "So $2x = 10$", False),  # a value gold wants the value, not an unsolved equation
    ("$x \\neq 5$", "The solution is $x != 5$", True),
    ("$x \\neq 5$", "The solution is $x != 6$", False),
    ("$x \\neq 5$", "The solution is $x = 5$", False),
    # assignments in one span; a gold whose last box is never closed
    ("\\[ \\boxed{p = -1 \\text{ and } p = \\dfrac{15}{8}} \\]", "$p=-1,p=\\frac{15}{8}$", True),
    ("\\[ \\boxed{p = -1 \\text{ and } p = \\dfrac{15}{8}} \\]", "$p=-1,p=\\frac{15}{7}$", False),
    ("\\[ \\boxed{p = -1 \\text{ and } p = \\dfrac{15}{8}} \\]", "$p=\\frac{15}{8}$", False),
    ("\\boxed{W(n) = 1 \\text{ and } W(n) = -1", "W(x)=1orW(x)=-1", True),
    ("\\boxed{W(n) = 1 \\text{ and } W(n) = -1", "W(x)=1orW(x)=2", False),
    ("12", "so \\boxed{12", False),  # a response cut off inside a box may have been \boxed{125}
    # a sum or product of explicit matrices is the matrix it makes
    (GOLD_SUM, SUM % "8", True),
    (GOLD_SUM, SUM % "9", False),
    (
        GOLD_SUM,
        "The sum is $\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix} + \\begin{pmatrix}1 & 2 & 3\\end{pmatrix}$",
        False,
    ),
    (f"${ID}$", f"When multiplying by identity: ${ID} {ID}$", True),
    (f"${ID}$", f"When multiplying: ${ID} {TWO}$", False),
    # a price with a decimal comma; a thousands separator stays one
    ("2.74", "Soucis : 2,74 $ a..", True),
    ("274", "Soucis : 2,74 $ a..", False),
    ("1234", "Total: 1,234 $", True),
    ("12.34", "Total: 1,234 $", False),
    # a value the final sentence rejects is no rival; two values it offers are
    ("1000.99", "not it's not 10 it's 1,000.99m²", True),
    ("10", "not it's not 10 it's 1,000.99m²", False),
    ("1000.99", "it's 10 or 1,000.99m²", False),
    # one value in a concluding final sentence; one number in a final-answer sentence
    ("12", CHAT, True),
    ("13", CHAT, False),
    ("12", CHAT.replace("Therefore, there", "There"), False),  # no conclusion: the numbers are working
    ("3", "Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", True),
    ("3", "Final Answer: Jane started growing Sphere about 3 hours ago.", False),
    # a box ending a step of working before a final-answer marker is no hedge; a bare box is
    ("7", "$2+3 = \\boxed{5}$ so the total is 7. The final answer is 7.", True),
    ("7", "\\boxed{5} so the total is 7. The final answer is 7.", False),
    ("5", "$2+3 = \\boxed{5}$ so the total is 7. The final answer is 7.", False),
    # a gold's box taken back by a later one
    ("\\boxed{1} no no no no no \\boxed{2}", "$\\boxed{2}$", True),
    ("\\boxed{1} no no no no no \\boxed{2}", "$\\boxed{1,2}$", False),
    ("\\boxed{1} papers and \\boxed{2} bins", "$\\boxed{1,2}$", True),
    # a gold with no finite decimal, printed to a double's 15 significant digits
    ("$\\frac{1}{12}$", "$0.0833333333333333$", True),
    ("$\\frac{2}{3}$", "$0.666666666666667$", True),
    ("$\\frac{1}{12}$", "$0.0833333333333334$", False),
    ("$\\frac{1}{12}$", "$0.083333$", False),
    ("$0.0833$", "$0.0833333333333333$", False),
    # a pair written without brackets, or in braces LaTeX only groups by: in order
    ("$(1,3)$", "${1,3}$", True),
    ("$(1,3)$", "$1, 3$", True),
    ("$(3,1)$", "${1,3}$", False),
    ("$(1,3)$", "$\\{1,3\\}$", False),
    ("$(1,3)$", "$x=1$ or $x=3$", False),
    ("$[1,3]$", "$1, 3$", False),
]


@pytest.mark.parametrize("gold,response,correct", CASES)
def test_moved_form(gold, response, correct):
    v = verify("math", response, gold, {})
    assert v.correct == correct, v
