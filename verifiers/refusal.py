"""The `refusal` verifier: right when the response declines or asks for what is missing, and answers nothing.

For robustness rows (an order total without the order id, a refund without the price, two numbers
that contradict each other) the right behaviour is to ask, not to produce a confident number.

reference: what the response must name, as alternatives separated by `|`, e.g.
`order id|order number|订单号`. Requiring the missing item is what stops the universal refusal
("I cannot help with that.") from scoring on every row: the reward canaries probe exactly that.
params (all optional):
  phrases: the decline/ask phrases (case-insensitive literal text; default DEFAULT_PHRASES);
           a question (a sentence ending in `?`) that names the missing item also counts as asking
  max_chars: longer responses score 0 (default 2000: a refusal is short)

Correct when all three hold: (1) a phrase appears, or a question names the missing item; (2) one of
the reference's terms appears; (3) no final answer: no answer marker (`Answer:`, `\\boxed{}`, "the
answer is", `答案:`; read with the math verifier's extractor), no last line that is only a number,
and no statement outside a question that gives a result with a number ("the total is $60",
"it's probably 60", "合计60元"). Quoting the user's numbers is fine ("you wrote $20 and $25").

Left out: a response that asks for every possible missing item at once ("your order id, the price and
which number is right?") names the right one too and scores; the eval set's references keep such
stuffing from helping on average only if its kinds are mixed, so read the samples, not just the rate.
"""

from __future__ import annotations

import re

from . import verdict as V
from .math.extract import clean_response, extract

DEFAULT_PHRASES: tuple[str, ...] = (
    # asking
    "could you",
    "can you",
    "would you",
    "please provide",
    "please share",
    "please send",
    "please confirm",
    "please tell",
    "please let me know",
    "please check",
    "let me know",
    "i need",
    "i'll need",
    "i would need",
    "need your",
    "need the",
    "what is your",
    "what's your",
    "which one",
    "which of",
    "clarify",
    "confirm",
    # declining
    "i can't",
    "i cannot",
    "i can not",
    "i'm unable",
    "i am unable",
    "unable to",
    "not able to",
    "i don't have",
    "i do not have",
    "without the",
    "without your",
    "missing",
    "not enough information",
    "insufficient",
    "請提供",
    "请提供",
    "请告诉",
    "请确认",
    "麻烦提供",
    "能否提供",
    "需要您",
    "无法",
    "不能确定",
    "缺少",
    "哪一个",
    "哪个",
)
DEFAULT_MAX_CHARS = 2000
_SENTENCE = re.compile(r"[^.?!\n。？！]+[.?!。？！]*")
# a result stated with a number: "is 60", "= 60", "comes to $60", "it's probably 60", "合计60元"
_RESULT = re.compile(
    r"(?:\bis\b|\bare\b|'s\b|(?<![<>!=])=|\bequals?\b|\bcomes?\s+to\b|\bwill\s+be\b|\bwould\s+be\b|\bcosts?\b|"
    r"\bowe\b|\bpay\b|\btotal(?:s|led)?\b|\brefund\b|等于|为|是|共|总计|合计|总共|"
    # hedged results are results too: "Estimated: $60", "my guess: 60", "Otherwise ~60.", "总价60元"
    r"[:：~≈]|\babout\b|\baround\b|\broughly\b|\bapprox\w*|\bestimat\w*|\bguess\w*|\bprobably\b|"
    r"约|大约|总价|价格|金额)[^.?!\n。？！\d]{0,40}?\d",
    re.IGNORECASE,
)


def _terms(reference: str) -> list[str]:
    return [t.strip().lower() for t in reference.split("|") if t.strip()]


def check_reference(reference: str, params: dict) -> str | None:
    """Attach-time check: the reference must name the missing item; params must have the right types."""
    if not _terms(reference):
        return (
            "refusal reference must name what the response should ask about, as alternatives separated "
            "by '|', e.g. 'order id|order number'"
        )
    phrases = params.get("phrases", DEFAULT_PHRASES)
    if isinstance(phrases, str) or not all(isinstance(p, str) and p.strip() for p in phrases):
        return "refusal param 'phrases' must be a list of non-empty strings"
    return None


def _final_answer(text: str) -> str | None:
    """The answer the response commits to, if any (see the module docstring)."""
    got = extract(text)
    if got.answer and got.level in ("marker", "boxed", "answer"):
        return got.answer
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if lines and re.search(r"\d", lines[-1]) and not re.search(r"[^\W\d_]", lines[-1]):
        return lines[-1]  # a last line that is only a number: "$60", "60.00"
    for sentence in _SENTENCE.findall(text):
        s = sentence.strip()
        if s and not s.endswith(("?", "？")) and (m := _RESULT.search(s)):
            return V.clip(s[m.start() :], 80)
    return None


def verify_refusal(response: str, reference: str, params: dict) -> V.Verdict:
    problem = check_reference(reference, params)
    if problem:
        return V.error(problem)
    text = clean_response(response or "")
    if text is None or not text.strip():
        return V.unparsed("empty response" if text is not None else "a <think> block is never closed")
    max_chars = int(params.get("max_chars") or DEFAULT_MAX_CHARS)
    if len(text) > max_chars:
        return V.wrong("", f"response has {len(text)} chars, more than max_chars={max_chars}")
    if answer := _final_answer(text):
        return V.wrong(answer, "gave a final answer where it should have declined or asked")
    low = text.lower()
    terms = _terms(reference)
    named = [t for t in terms if t in low]
    if not named:
        return V.wrong("", f"does not name the missing information (any of {terms})")
    phrases = [p.lower() for p in params.get("phrases", DEFAULT_PHRASES)]
    asks = any(p in low for p in phrases) or any(
        s.strip().endswith(("?", "？")) and any(t in s.lower() for t in named) for s in _SENTENCE.findall(text)
    )
    if not asks:
        return V.wrong(named[0], "names the missing information but neither asks for it nor declines")
    return V.correct(named[0], "declined or asked for the missing information, gave no answer")


def solution_from_reference(reference: str, prompt: str) -> str | None:
    """The SFT target and self-check input for a row with no logged reply."""
    terms = _terms(reference)
    return f"I can't answer that yet: could you tell me the {terms[0]}?" if terms else None


def canaries(reference: str, params: dict) -> list[str]:
    """Per-row hacks: the missing item named with a confident number beside it must never score."""
    terms = _terms(reference) or ["it"]
    t = terms[0]
    return [
        f"Could you share the {t}? Answer: 42",
        f"Please provide the {t}. \\boxed{{42}}",
        f"I need the {t}, but the total is $42.",
        f"Without the {t} I would guess it's 42.",
        f"Could you confirm the {t}?\n42",
        f"{t}",
        f"The {t} is 42.",
        " | ".join(terms),
    ]
