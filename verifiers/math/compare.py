"""The voters that decide whether two normalized answers are equal.

Each voter says equal, different, or abstains. Before the vote, forms that name their values are
read as those values: a labelled tuple `(p,q)=(3,2)` is `(3,2)`; assignments grouped per solution
`p=5,q=2;p=7,q=2` are `(5,2),(7,2)`; an equality chain `z = 1 + 1 = 2` is its result `2` when only
the last side is a number, and so is a model's working with its value, `3 * 12 = 36` (or `36 = 3 * 12`),
when the arithmetic holds that value; a gold inequality `0<f(x)<1` is the interval `(0,1)` (not a reply's:
math-verify's default); a reply's exact value followed by its approximation `1/3 \\approx 0.33`
is `1/3` (an approximation alone stays one and differs from a number gold). A set that lists a
value twice holds it once. Two relations (`2x+4y-3=0` and `y=-\\frac{1}{2}x+\\frac{3}{4}`,
`x \\neq 5` and `x != 5`) go straight to the symbolic voter, which compares them after moving
terms; an assignment of a value (`x = 5`) is that value, not a relation.
The vote, cheapest first:
  1. text:       equal compact forms (spaces and braces ignored) -> equal, decisive. The only
                 way an infinity or an overflowing literal can match: a gold spelled the same.
  2. finiteness: the answer is or holds an infinity or NaN (`\\infty`, `oo`, `nan`, `∞`) and the
                 gold does not -> different, decisive.
  3. time:       the gold is a clock time (`15:45`, `3:45 pm`, `下午3点45分`) -> decisive: the
                 answer must name the same time of day.
  4. numeric:    the gold is one number (numbers.py) -> decisive. The answer must be a number
                 too, compared exactly (a tolerance only from params); an expression such as
                 `3*12` or `2^{10}` is different ("not evaluated") unless params say
                 `allow_expressions: true`, when the symbolic voter evaluates it exactly;
                 several values against one are different.
  5. collection: either side is a set `{..}`, a tuple or interval `(..]`, `a \\pm b`, or several
                 solutions (`x=2 or x=3`, `2或3`, `2、3`, `2, 3`) -> decisive: same kind, same size,
                 and the elements pair up under this same vote (in order for tuples and intervals,
                 in any order otherwise; a comma list without set brackets, or `{1,3}`,
                 answers a pair `(1,3)` in order). A single value never equals several.
  6. symbolic:   math-verify's LaTeX parser and comparison (sympy) in a timed helper process
                 (symbolic.py), after its own finiteness and magnitude guards -> equal,
                 different, timeout, or abstain.
All voters abstaining means the answer could not be read as math: the verifier says `unparsed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from .normalize import compact
from .numbers import Number, numbers_equal, read_number, read_time
from .symbolic import symbolic_equal

# `x =`, `x_1 =`, `\\alpha \\in`, `W(n) =`: a name (a function's value too) given its value.
_ASSIGN = re.compile(r"^\s*(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)(?:\(\s*[A-Za-z]\s*\))?\s*(?:=|\\in)\s*(?!=)")
# `x=2 or x=3`; `W(x)=1orW(x)=-1` glues the word between a value and the next assignment.
_SPLIT_WORDS = re.compile(
    r"\s+(?:or|and)\s+|(?<=\d)(?:or|and)(?=[A-Za-z](?:\(\w\))?=)|(?<=[)\]])\s*(?:or|and)\s*(?=[(\[])|或|、|\\text\{\s*or\s*\}|;|\\(?:quad|qquad)"
)
_INFINITE = re.compile(r"\\infty|∞|(?<![A-Za-z])(?:oo|inf|infinity|nan)(?![A-Za-z])|\\text\{\s*nan", re.IGNORECASE)
_PM = re.compile(r"\\pm|±|\\mp|∓")
MAX_ELEMENTS = 64
_VAR = r"(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)"
# `(p,q)=(3,2)`: a tuple of unknowns named before the tuple of their values.
_LABELLED_TUPLE = re.compile(r"^\s*\(\s*" + _VAR + r"(?:\s*,\s*" + _VAR + r")+\s*\)\s*=\s*(?=\()")
# `x = 1/3 \approx 0.33`: an exact value followed by its approximation.
_APPROX = re.compile(r"\\approx|≈")
_LESS = r"(<|\\+leq?(?![a-z])|≤|<=)"
# `0 < f(x) < 1`, `-2 \le x \le 7`: a bounded unknown, the interval it lies in.
_CHAIN = re.compile(
    r"^\s*([^<>=\\]+?|\S+?)\s*" + _LESS + r"\s*(" + _VAR + r"(?:\(\s*[A-Za-z]\s*\))?)\s*" + _LESS + r"\s*(.+?)\s*$"
)

# `2x+4y-3=0`, `x \\neq 5`, `y \\leq 2x`: the operator of a relation between two expressions.
_RELATION_OP = re.compile(r"(?<![<>!\\])=(?!=)|\\neq(?![A-Za-z])|\\[lg]eq(?![A-Za-z])|(?<!\\)[<>]")
_UNKNOWN = re.compile(r"(?<!\\)(?<![A-Za-z])[A-Za-z]")

EQUAL, DIFFERENT, ABSTAIN, TIMEOUT = "equal", "different", "abstain", "timeout"


@dataclass(frozen=True)
class Options:
    """Comparison settings from the rule's params."""

    rel_tol: float = 0.0
    abs_tol: float = 0.0
    percent_as_fraction: bool = True
    allow_expressions: bool = False
    symbolic_timeout_s: float | None = 2.0  # None: the symbolic voter is off
    float_digits: int = 6  # symbolic voter: decimals vs irrational golds


@dataclass(frozen=True)
class Vote:
    outcome: str  # EQUAL, DIFFERENT, ABSTAIN or TIMEOUT
    voter: str  # which voter decided
    why: str = ""  # for DIFFERENT: what differs, in words
    hedge: bool = False  # several values given where the gold is one: hedging, whatever they are

    @property
    def equal(self) -> bool:
        return self.outcome == EQUAL


def strip_assignment(s: str) -> str:
    return _ASSIGN.sub("", s, count=1).strip()


def _unlabel(s: str) -> str:
    """`(p,q)=(3,2)` is the tuple `(3,2)`; `p=5,q=2;p=7,q=2` is the tuples `(5,2),(7,2)`."""
    s = _LABELLED_TUPLE.sub("", s, count=1)
    groups = _top_level_split(s, re.compile(r";"))
    if len(groups) < 2:  # `x=-5, p=14/3` alone stays a list of named values
        return s
    tuples = []
    for group in groups:
        parts = _top_level_split(group, re.compile(r","))
        names = [m.group(0) for p in parts if (m := _ASSIGN.match(p))]
        if len(parts) < 2 or len(names) != len(parts) or len({n.replace(" ", "") for n in names}) != len(names):
            return s
        tuples.append("(" + ",".join(strip_assignment(p) for p in parts) + ")")
    return ",".join(tuples)


def _last_side(s: str) -> str:
    """`z = 1 + 1 = 2` is its result `2`: the last side of an equality chain when that is a number
    and no other side is a number (so `1/2 = 10/9` stays as written and differs). Without a name,
    `3 * 12 = 36` and `36 = 3 * 12` state `36` when the arithmetic side holds it (a model's own
    answer form: the working, then the value), as a reader grades them; `3 * 12 = 35` states two
    values and stays as written, and `x + 1 = 5` is no arithmetic and stays a relation."""
    if len(_top_level_split(s, re.compile(r"[,;]|" + _SPLIT_WORDS.pattern))) > 1:
        return s  # several named values, not one chain
    sides = _top_level_split(s, re.compile(r"(?<![<>!\\])=(?!=)"))
    if len(sides) == 2 and not _ASSIGN.match(s):
        return _worked_value(s, sides)
    if len(sides) < 3 and not (len(sides) == 2 and _ASSIGN.match(s)):
        return s
    sides = sides[1:] if _ASSIGN.match(s) else sides
    if len(sides) < 2 or read_number(sides[-1]) is None or any(read_number(x) is not None for x in sides[:-1]):
        return s
    last = _arithmetic(sides[-1])
    if any((v := _arithmetic(x)) is not None and v != last for x in sides[:-1]):
        return s  # `48+50+4 = 15`: a false step states another number, and the chain is no answer
    return sides[-1]


def _worked_value(s: str, sides: list[str]) -> str:
    """`3 * 12 = 36` (or `36 = 3 * 12`) is `36`: one side a number, the other plain arithmetic of
    the same value; anything else stays as written."""
    numbers = [x for x in sides if read_number(x) is not None]
    if len(numbers) != 1:
        return s
    other = sides[1] if numbers[0] is sides[0] else sides[0]
    worked = _arithmetic(other)
    stated = _arithmetic(numbers[0])
    return numbers[0].strip() if worked is not None and stated is not None and worked == stated else s


_PLAIN_ARITHMETIC = re.compile(r"[\d\s.+\-*/×÷()]{1,80}")


def _arithmetic(side: str):
    """The exact value of a side written in plain arithmetic (`48+50+4`, `3 × 12`), else None."""
    import ast
    from fractions import Fraction

    text = side.strip()
    for op, plain in (("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("×", "*"), ("÷", "/")):
        text = text.replace(op, plain)
    if not _PLAIN_ARITHMETIC.fullmatch(text) or "**" in text or not re.search(r"\d", text):
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            v = value(node.operand)
            return v if isinstance(node.op, ast.UAdd) else -v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.Div):
                if b == 0:
                    raise ZeroDivisionError
                return a / b
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
        raise ValueError("not plain arithmetic")

    try:
        return value(tree)
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def _exact_part(s: str) -> str:
    """`1/3 \\approx 0.33` is the exact value `1/3`; an answer that is only an approximation
    (`x \\approx 11`) is left as it is, and differs from a number gold."""
    m = _APPROX.search(s)
    if not m:
        return s
    head = strip_assignment(s[: m.start()]).strip()
    return head if head and read_number(head) is not None else s


def _as_interval(s: str) -> str:
    """A gold `a < x < b` (or with \\le) is the interval `(a,b)` (`[a,b]`); a reply's inequality
    is left as it is (math-verify's default: a set answer matches an inequality gold, not the
    reverse)."""
    m = _CHAIN.match(s)
    if not m:
        return s
    low, op1, _, op2, high = m.groups()
    left = "(" if op1 == "<" else "["
    right = ")" if op2 == "<" else "]"
    return f"{left}{low.strip()},{high.strip()}{right}"


def is_relation(s: str) -> bool:
    """An equation or inequality between expressions (`2x+4y-3=0`, `x \\neq 5`, `y=2x+3`): not
    a value named by an assignment (`x = 5`, `p = \\frac{15}{8}`), nor a list or a chain."""
    if len(_top_level_split(s, re.compile(r",|;|" + _SPLIT_WORDS.pattern))) > 1:
        return False
    sides = _top_level_split(s, _RELATION_OP)
    if len(sides) != 2 or not all(sides):
        return False
    return not (_ASSIGN.match(s) and not _UNKNOWN.search(re.sub(r"\\[A-Za-z]+", " ", sides[1])))


def has_infinity(s: str) -> bool:
    return bool(_INFINITE.search(s))


def equal(gold: str, pred: str, opts: Options) -> Vote:
    """The vote on two normalized answers; see the module docstring."""
    gold, pred = _as_interval(_last_side(_unlabel(gold))), _last_side(_exact_part(_unlabel(pred)))
    gold, pred = gold.replace("!=", "\\neq"), pred.replace("!=", "\\neq")
    if is_relation(gold) and is_relation(pred) and opts.symbolic_timeout_s is not None:
        if compact(gold) == compact(pred):
            return Vote(EQUAL, "text")
        return _symbolic(gold, pred, opts)  # `2x+4y-3=0` is `y=-\\frac{1}{2}x+\\frac{3}{4}`: moved terms
    gold, pred = strip_assignment(gold), strip_assignment(pred)
    if compact(gold) == compact(pred):
        return Vote(EQUAL, "text")
    if has_infinity(pred) and not has_infinity(gold):
        return Vote(DIFFERENT, "finiteness", "the answer is not finite and the gold is")
    if (gt := read_time(gold)) is not None:
        pt = read_time(pred)
        if pt is None:
            return Vote(DIFFERENT, "time", "the gold is a clock time and the answer is not")
        return Vote(EQUAL if gt & pt else DIFFERENT, "time")
    g = read_number(gold)
    if g is not None:
        return _against_number(g, gold, pred, opts)
    gc, pc = collection(gold), collection(pred)
    if gc or pc:
        if gc and pc and gc[0] == "()" and pc[0] == "set" and _unbracketed_list(pred):
            pc = ("()", pc[1])  # `1,3` (or `{1,3}`, which LaTeX prints so) for the pair `(1,3)`: in order
        return _collections(gc, pc, opts)
    if opts.symbolic_timeout_s is None:
        return Vote(ABSTAIN, "none")
    return _symbolic(gold, pred, opts)


def _symbolic(gold: str, pred: str, opts: Options) -> Vote:
    got = symbolic_equal(gold, pred, opts.float_digits, opts.symbolic_timeout_s)
    if got == "timeout":
        return Vote(TIMEOUT, "symbolic")
    if got is None:
        return Vote(ABSTAIN, "symbolic")
    return Vote(EQUAL if got else DIFFERENT, "symbolic")


def _against_number(g: Number, gold: str, pred: str, opts: Options) -> Vote:
    p = read_number(pred)
    if p is not None:
        if not p.finite:
            return Vote(DIFFERENT, "numeric", f"the answer is {p.value}, the gold is a finite number")
        same = numbers_equal(g, p, opts.rel_tol, opts.abs_tol, opts.percent_as_fraction)
        return Vote(EQUAL if same else DIFFERENT, "numeric")
    if collection(pred):
        return Vote(DIFFERENT, "numeric", "several values given for one number", hedge=True)
    if opts.allow_expressions and opts.symbolic_timeout_s is not None:
        got = symbolic_equal(gold, pred, opts.float_digits, opts.symbolic_timeout_s, exact=True)
        if got == "timeout":
            return Vote(TIMEOUT, "symbolic")
        if got is not None:
            return Vote(EQUAL if got else DIFFERENT, "symbolic")
    return Vote(
        DIFFERENT,
        "numeric",
        "the gold is a number and the answer is not a number (an "
        "unevaluated expression or text; params allow_expressions: "
        "true accepts equal expressions)",
    )


def collection(s: str) -> tuple[str, list[str]] | None:
    """(kind, elements) where kind is 'set' (unordered) or the bracket pair like '()' or '[)'
    (ordered); None for a single value."""
    s = strip_assignment(s)
    if pm := _plus_minus(s):
        return "set", pm
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", _top_level_split(s[2:-2], re.compile(r","))
    if s.startswith("{") and s.endswith("}") and "," in s:
        return "set", _top_level_split(s[1:-1], re.compile(r","))
    if s[:1] in "([" and s[-1:] in ")]" and _matching(s):
        inner = _top_level_split(s[1:-1], re.compile(r"," if "," in s else r";"))
        if len(inner) > 1:
            return s[0] + s[-1], inner
    parts = _top_level_split(s, re.compile(r",|" + _SPLIT_WORDS.pattern))
    parts = [strip_assignment(p) for p in parts if p]
    return ("set", parts) if len(parts) > 1 else None


def _plus_minus(s: str) -> list[str] | None:
    """`a \\pm b` is the two values a+b and a-b (`\\pm 3` is 3 and -3)."""
    found = list(_PM.finditer(s))
    if len(found) != 1 or any(ch in s for ch in ",;"):
        return None
    head, tail = s[: found[0].start()].strip(), s[found[0].end() :].strip()
    if not tail:
        return None
    a, b = read_number(head) if head else Number(Fraction(0)), read_number(tail)
    if a is not None and b is not None and a.finite and b.finite and not (a.percent or b.percent):
        return [_fraction_text(a.value + b.value), _fraction_text(a.value - b.value)]  # `1 \pm 2` is 3 and -1
    return [f"{head}+{tail}" if head else tail, f"{head}-{tail}" if head else f"-{tail}"]


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _top_level_split(s: str, seps: re.Pattern) -> list[str]:
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            m = seps.match(s, i)
            if m and m.end() > i:
                parts.append(s[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _matching(s: str) -> bool:
    depth = 0
    for i, ch in enumerate(s):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


def _unbracketed_list(s: str) -> bool:
    """Values listed with commas and no set brackets: `1,3`, `x=1, y=3`, and `{1,3}`, whose braces
    LaTeX only groups by (it prints `1,3`); not `\\{1,3\\}`, `1 \\pm 2` nor `1 or 3` (alternatives)."""
    s = strip_assignment(s)
    if s.startswith("{") and s.endswith("}") and _matching(s):
        s = s[1:-1]
    return (
        "," in s
        and not s.startswith("\\{")
        and not _PM.search(s)
        and len(_top_level_split(s, _SPLIT_WORDS)) == 1
        and len(_top_level_split(s, re.compile(","))) > 1
    )


def _collections(gc, pc, opts: Options) -> Vote:
    if gc is None:
        return Vote(DIFFERENT, "collection", "several values given for one", hedge=True)
    if pc is None:
        return Vote(DIFFERENT, "collection", "one value against several")
    if gc[0] != pc[0]:
        return Vote(DIFFERENT, "collection", f"a {gc[0]} against a {pc[0]}")
    if gc[0] == "set":  # a value listed twice is one element of a set
        gc, pc = ("set", _distinct_texts(gc[1])), ("set", _distinct_texts(pc[1]))
    if len(gc[1]) != len(pc[1]) or len(gc[1]) > MAX_ELEMENTS:
        return Vote(DIFFERENT, "collection", f"{len(pc[1])} values against {len(gc[1])}")
    if gc[0] != "set":
        for g, p in zip(gc[1], pc[1]):
            vote = equal(g, p, opts)
            if not vote.equal:
                return _element_vote(vote)
        return Vote(EQUAL, "collection")
    remaining = list(pc[1])
    for g in gc[1]:
        hit = None
        for i, p in enumerate(remaining):
            vote = equal(g, p, opts)
            if vote.outcome == TIMEOUT:
                return Vote(TIMEOUT, "collection")
            if vote.equal:
                hit = i
                break
        if hit is None:
            return Vote(DIFFERENT, "collection", f"no answer matches the gold value {g!r}")
        remaining.pop(hit)
    return Vote(EQUAL, "collection")


def _distinct_texts(items: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(compact(item), item)
    return list(seen.values())


def _element_vote(vote: Vote) -> Vote:
    if vote.outcome in (TIMEOUT, ABSTAIN):
        return Vote(vote.outcome, "collection")
    return Vote(DIFFERENT, "collection", vote.why)


def holds_relation(s: str) -> bool:
    """A gold with a relation operator anywhere: an equation, or values named by assignments
    (`p = -1 and p = \\frac{15}{8}`), to be compared with the relation an answer was cut from."""
    return bool(_RELATION_OP.search(s))
