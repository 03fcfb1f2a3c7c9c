"""The `math` verifier: extract the final answer, normalize it, let the voters compare it to gold.

Params (all optional): `rel_tol` (1e-9), `symbolic` (true: use the sympy voter),
`symbolic_timeout_s` (2.0). A response whose level 1-3 candidates disagree with each other (two
different boxed or `Answer:` values) is hedging and scores 0 whatever the gold is.
"""
from __future__ import annotations

from .. import verdict as V
from .compare import equal
from .extract import extract, extract_gold
from .normalize import normalize

_LEVEL = {"marker": "final-answer marker", "boxed": "\\boxed{}", "answer": "'Answer:'",
          "fallback": "last-line fallback"}


def _params(params: dict) -> tuple[float, float | None]:
    rel_tol = float(params.get("rel_tol", 1e-9))
    timeout = float(params.get("symbolic_timeout_s", 2.0))
    return rel_tol, (timeout if params.get("symbolic", True) else None)


def verify_math(response: str, reference: str, params: dict) -> V.Verdict:
    rel_tol, sym_timeout = _params(params)
    gold = normalize(extract_gold(reference))
    if not gold:
        return V.error(f"reference {V.clip(reference)!r} holds no answer after normalization")
    got = extract(response)
    if got.answer is None:
        return V.unparsed("no final answer found (no marker, \\boxed{}, Answer: or number)")
    pred = normalize(got.answer)
    if not pred:
        return V.unparsed(f"the answer from the {_LEVEL[got.level]} is empty after normalization", V.clip(got.answer))
    distinct = _distinct(got.candidates, rel_tol)
    if len(distinct) > 1:
        return V.wrong(V.clip(pred), f"hedged between {len(distinct)} different final answers: "
                                     f"{V.clip(' | '.join(distinct), 200)}")
    same, voter = equal(gold, pred, rel_tol, sym_timeout)
    if voter == "symbolic timed out":
        return V.timeout(f"the sympy comparison with gold {V.clip(gold, 80)!r} ran out of time",
                         V.clip(pred))
    if same:
        return V.correct(V.clip(pred), f"answer from the {_LEVEL[got.level]} matches gold ({voter} voter)")
    return V.wrong(V.clip(pred), f"answer from the {_LEVEL[got.level]} differs from gold {V.clip(gold, 80)!r} ({voter})")


def _distinct(candidates: tuple[str, ...], rel_tol: float) -> list[str]:
    """Candidates that are pairwise different under the cheap voters (no sympy: hedging is a
    format question and must stay fast)."""
    out: list[str] = []
    for cand in candidates:
        c = normalize(cand)
        if c and not any(equal(c, o, rel_tol, None)[0] for o in out):
            out.append(c)
    return out


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
    if not normalize(extract_gold(reference)):
        return f"math reference {V.clip(reference, 80)!r} holds no answer after normalization"
    return None
