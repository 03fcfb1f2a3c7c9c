"""The `math` verifier: extract the final answer, normalize it, let the voters compare it to gold.

Params (all optional):
  rel_tol, abs_tol      tolerance for numbers (default 0: exact; see numbers.py)
  percent_as_fraction   `25%` also matches `0.25` (default true; `25%` always matches `25`)
  allow_expressions     a number gold accepts an expression that evaluates to it exactly
                        (`3*12` for 36; default false: the policy must compute, not restate)
  require_integer       the answer must be written as an integer (`36`, not `36.0` or `72/2`)
  require_simplified    a fraction answer must be in lowest terms (`332/971`, not `6640/19420`)
  symbolic              use the symbolic voter (default true); symbolic_timeout_s (2.0)
  float_digits          places to which a decimal answer may match an irrational gold (6)
  special_tokens        a tokenizer's own special tokens to drop before extraction (a list of
                        strings; the usual chat tokens are dropped without it, see extract.py)
Statuses: `unparsed` when no answer could be extracted or read as math, `wrong` when an answer was
compared and differs (or hedges: several different final answers, several values where the
gold is one, a hedge, bound or doubt word on the answer such as `约`, `至少`, `100多`, `about`,
`I believe`, a question, or a negated answer phrase such as `不应退款`, flagged `hedged`), `timeout`
when the symbolic comparison ran out of time, `error` for an unusable reference.
"""

from __future__ import annotations

import re

from .. import verdict as V
from .compare import ABSTAIN, TIMEOUT, Options, collection, equal, holds_relation, strip_assignment
from .extract import extract
from .gold import extract_gold
from .normalize import normalize
from .numbers import read_number

_LEVEL = {
    "marker": "final-answer marker",
    "boxed": "\\boxed{}",
    "answer": "'Answer:'",
    "phrase": "final sentence's answer phrase",
    "sentence": "final sentence",
    "fallback": "last-line fallback",
}
# `\\\\frac`, `\\\\left(`: LaTeX escaped twice (JSON or a Python string written out once more).
_DOUBLED = re.compile(
    r"\\\\(?=(?:left|right|frac|dfrac|tfrac|sqrt|pi|boxed|le|leq|ge|geq|neq|in|infty|cdot|times|text)(?![A-Za-z]))"
)
# `14{,}916`: LaTeX's braced comma between digits reads as the plain comma (a thousands separator
# before three digits, as `14,916` is).
_BRACED_COMMA = re.compile(r"(?<=\d)\s*\{\s*,\s*\}\s*(?=\d)")
_FRACTION = re.compile(r"^[-+]?(?:\\frac\{\s*(\d+)\s*\}\{\s*(\d+)\s*\}|(\d+)\s*/\s*(\d+))$")


def options(params: dict) -> Options:
    timeout = float(params.get("symbolic_timeout_s", 2.0))
    return Options(
        rel_tol=float(params.get("rel_tol", 0.0) or 0.0),
        abs_tol=float(params.get("abs_tol", 0.0) or 0.0),
        percent_as_fraction=bool(params.get("percent_as_fraction", True)),
        allow_expressions=bool(params.get("allow_expressions", False)),
        symbolic_timeout_s=timeout if params.get("symbolic", True) else None,
        float_digits=int(params.get("float_digits", 6)),
    )


def verify_math(response: str, reference: str, params: dict) -> V.Verdict:
    opts = options(params)
    response, reference = _DOUBLED.sub(r"\\", response), _DOUBLED.sub(r"\\", reference)
    response, reference = _BRACED_COMMA.sub(",", response), _BRACED_COMMA.sub(",", reference)
    # A form feed is the `\f` of `\frac` read as an escape by a string literal, never a page break.
    response, reference = response.replace("\f", "\\f"), reference.replace("\f", "\\f")
    gold = normalize(extract_gold(reference))
    if not gold:
        return V.error(f"reference {V.clip(reference)!r} holds no answer after normalization")
    tokens = params.get("special_tokens") or ()
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) and t for t in tokens):
        return V.error(
            f"params special_tokens must be a list of non-empty strings, got {V.clip(repr(tokens), 80)}; "
            f"e.g. special_tokens: ['<|end|>']"
        )
    got = extract(response, tuple(tokens))
    if got.answer is None:
        return V.unparsed("no final answer found (no marker, \\boxed{}, Answer:, final sentence or number)")
    pred = _unquoted(normalize(got.answer))
    where = f"the answer from the {_LEVEL[got.level]}"
    if not pred:
        return V.unparsed(f"{where} is empty after normalization", V.clip(got.answer))
    # a final sentence's values (levels 4-6) are already different under the unit table: `1 m 1 g`
    # and `3 yuan, i.e. 3 dollars` are two values though their numbers agree
    distinct = _distinct(got.candidates) if got.level in ("marker", "boxed", "answer") else list(got.candidates)
    if (
        len(distinct) > 1
        and got.level in ("marker", "boxed", "answer")
        and (joined := _parts_of_gold(gold, distinct, opts))
    ):
        return V.correct(V.clip(joined), "the final answers, read together, match the gold's parts (collection voter)")
    if len(distinct) > 1:
        return V.hedged(
            V.clip(pred), f"hedged between {len(distinct)} different final answers: {V.clip(' | '.join(distinct), 200)}"
        )
    if got.hedge:
        return V.hedged(V.clip(pred), f"{where} is hedged ({got.hedge})")
    if problem := _form_problem(pred, params):
        return V.wrong(V.clip(pred), f"{where} {problem}")
    if got.whole and holds_relation(gold) and equal(gold, whole := normalize(got.whole), opts).equal:
        return V.correct(V.clip(whole), f"{where}, read as the relation {V.clip(whole, 60)!r}, matches gold")
    vote = equal(gold, pred, opts)
    if vote.outcome == TIMEOUT:
        return V.timeout(f"the symbolic comparison with gold {V.clip(gold, 80)!r} ran out of time", V.clip(pred))
    if vote.outcome == ABSTAIN:
        return V.unparsed(f"{where} could not be read as math to compare with gold {V.clip(gold, 80)!r}", V.clip(pred))
    if vote.equal:
        return V.correct(V.clip(pred), f"{where} matches gold ({vote.voter} voter)")
    if restated := _restatement_equal(gold, got.restated, opts):
        return V.correct(V.clip(restated), f"{where}, restated as {V.clip(restated, 60)!r}, matches gold")
    why = f": {vote.why}" if vote.why else ""
    if vote.hedge:
        return V.hedged(V.clip(pred), f"{where} hedges against gold {V.clip(gold, 80)!r} ({vote.voter} voter){why}")
    return V.wrong(V.clip(pred), f"{where} differs from gold {V.clip(gold, 80)!r} ({vote.voter} voter){why}")


def _form_problem(pred: str, params: dict) -> str | None:
    """Form constraints a task may ask for; None when the answer's form is acceptable."""
    value = strip_assignment(pred)
    if params.get("require_integer") and not re.fullmatch(r"[-+]?\d+", value):
        return f"is {V.clip(value, 60)!r}, not written as an integer (require_integer)"
    if params.get("require_simplified") and (m := _FRACTION.match(value)):
        num, den = (int(m.group(1)), int(m.group(2))) if m.group(1) else (int(m.group(3)), int(m.group(4)))
        from math import gcd

        if den == 0 or gcd(num, den) != 1 or den == 1:
            return f"is {V.clip(value, 60)!r}, not a fraction in lowest terms (require_simplified)"
    return None


def _restatement_equal(gold: str, restated: tuple[str, ...], opts: Options) -> str | None:
    """The restatement of the answer (`2500 g` for `2.5 kg`) that equals gold, if one does; the
    extraction only offers values equal to the answer under its unit table (units.py)."""
    for alt in restated:
        pred = normalize(alt)
        if pred and equal(gold, pred, opts).equal:
            return pred
    return None


def _parts_of_gold(gold: str, distinct: list[str], opts: Options) -> str | None:
    """Several boxed parts (`\\boxed{(3,3)} for part (a) and \\boxed{(1,1)}`) answer a gold of as
    many parts when, read together, they are exactly its parts; against a single-value gold they
    stay a hedge."""
    parts = collection(gold)
    if parts is None or parts[0] != "set" or len(parts[1]) != len(distinct):
        return None
    joined = ", ".join(distinct)
    return joined if equal(gold, joined, opts).equal else None


def _distinct(candidates: tuple[str, ...]) -> list[str]:
    """Candidates that are pairwise different under the cheap voters (no sympy: hedging is a
    format question and must stay fast)."""
    cheap = Options(symbolic_timeout_s=None)
    out: list[str] = []
    for cand in candidates:
        c = _unquoted(normalize(cand))
        if c and not any(equal(c, o, cheap).equal for o in out):
            out.append(c)
    return out


def _unquoted(s: str) -> str:
    """`"12 and 13"`, `\\"12 and 13 \\"`: an answer in quotes is the answer."""
    m = re.fullmatch(r'\s*\\?"(.+?)\\?"\s*', s)
    return m.group(1).strip() if m else s


def solution_from_reference(reference: str, prompt: str) -> str:
    """An accepted response built from the gold, in the format the row's prompt asks for."""
    answer = extract_gold(reference)
    if "\\boxed" in prompt:
        return f"\\boxed{{{answer}}}"
    if "答案" in prompt:
        return f"答案：{answer}"
    return f"Answer: {answer}"


def check_reference(reference: str, params: dict) -> str | None:
    """None when the gold is usable, else why not."""
    gold = normalize(extract_gold(reference))
    if not gold:
        return f"math reference {V.clip(reference, 80)!r} holds no answer after normalization"
    number = read_number(strip_assignment(gold))
    if number is not None and not number.finite and not params.get("allow_infinite_gold", False):
        return (
            f"math reference {V.clip(reference, 80)!r} is {number.value}; set params "
            f"allow_infinite_gold: true if that is really the answer"
        )
    return None
