"""The one result type every verifier returns, and the statuses it may carry.

A verdict blames the right side: bad model output gets `wrong`, `unparsed`, `error` or `timeout`
with score 0, never an exception. `extracted` is what the verifier read from the response (the
answer, the code, the SQL) so a human can see why it scored what it did.
"""

from __future__ import annotations

from dataclasses import dataclass

CORRECT = "correct"
WRONG = "wrong"
UNPARSED = "unparsed"
ERROR = "error"
TIMEOUT = "timeout"
STATUSES = (CORRECT, WRONG, UNPARSED, ERROR, TIMEOUT)


@dataclass(frozen=True)
class Verdict:
    """score in [0, 1]; status one of STATUSES; extracted and detail are short human text.
    `hedged` is set by the verifier when the response does not commit to one answer: several
    different final answers, or one answer hedged by a word next to it (`约`, `about`, `至少`,
    `100多`), a doubt or question in its sentence (`I believe`, `对吗？`), a negation (`不应退款`)
    or a retraction after it (`Just kidding.`); the score is 0. The reward's format layer reads
    it (never the detail text)."""

    score: float
    status: str
    extracted: str = ""
    detail: str = ""
    hedged: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Verdict.status {self.status!r} is not one of {STATUSES}")
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"Verdict.score {self.score!r} must lie in [0, 1]")

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def to_dict(self) -> dict:
        return {
            "score": self.score,
            "status": self.status,
            "extracted": self.extracted,
            "detail": self.detail,
            "hedged": self.hedged,
        }


def correct(extracted: str = "", detail: str = "") -> Verdict:
    return Verdict(1.0, CORRECT, extracted, detail)


def wrong(extracted: str = "", detail: str = "", score: float = 0.0, hedged: bool = False) -> Verdict:
    return Verdict(score, WRONG, extracted, detail, hedged)


def hedged(extracted: str, detail: str) -> Verdict:
    """Several different final answers: wrong with score 0 whatever the gold, and flagged."""
    return Verdict(0.0, WRONG, extracted, detail, True)


def unparsed(detail: str, extracted: str = "") -> Verdict:
    return Verdict(0.0, UNPARSED, extracted, detail)


def error(detail: str, extracted: str = "") -> Verdict:
    return Verdict(0.0, ERROR, extracted, detail)


def timeout(detail: str, extracted: str = "") -> Verdict:
    return Verdict(0.0, TIMEOUT, extracted, detail)


def clip(text: str, limit: int = 300) -> str:
    """Keep verdict text short: the head and the tail of long strings."""
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ...[{len(text) - limit} chars]... {text[-half:]}"
