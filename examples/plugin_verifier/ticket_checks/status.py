"""`ticket_status`: does a support reply tell the customer the right status of the right ticket?

reference: JSON `{"ticket": "TCK-10442", "status": "resolved"}`. params: `statuses`, the allowed
statuses (default: the keys of STATUSES). The reply must name the ticket and state one status in
a form like "status: resolved", "is now on hold", "has been closed" or "marked as escalated";
the synonyms in STATUSES count ("solved" is resolved). Another ticket's ID, or two different
statuses, score 0. `check_reference` and `solution_from_reference` join rlvrflow's attach step.
"""

from __future__ import annotations

import json
import re

from rlvrflow.verifiers import Verdict

STATUSES = {
    "open": ["open", "reopened"],
    "pending": ["pending", "on hold"],
    "escalated": ["escalated"],
    "resolved": ["resolved", "solved", "fixed"],
    "closed": ["closed"],
}
_TICKET = re.compile(r"\bTCK-\d{4,}\b", re.IGNORECASE)
_WORDS = "|".join(sorted({w for words in STATUSES.values() for w in words}, key=len, reverse=True))
_STATED = re.compile(
    rf"\b(?:status(?:\s+is)?\s*:?|is\s+now|has\s+been|was|marked(?:\s+as)?)\s+({_WORDS})\b", re.IGNORECASE
)
_CANONICAL = {w: status for status, words in STATUSES.items() for w in words}


def _reference(reference: str, params: dict) -> tuple[str, str]:
    ref = json.loads(reference)
    if not isinstance(ref, dict):
        raise ValueError('the reference must be a JSON object {"ticket": ..., "status": ...}')
    ticket, status = ref.get("ticket"), ref.get("status")
    allowed = params.get("statuses", list(STATUSES))
    if not isinstance(ticket, str) or not _TICKET.fullmatch(ticket):
        raise ValueError(f"ticket {ticket!r} is not an ID like TCK-10442")
    if status not in allowed or status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {allowed}")
    return ticket.upper(), status


def verify_ticket_status(response: str, reference: str, params: dict) -> Verdict:
    try:
        ticket, status = _reference(reference, params)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return Verdict(0.0, "error", "", f"ticket_status reference unusable: {exc}")
    tickets = {t.upper() for t in _TICKET.findall(response)}
    stated = {_CANONICAL[m.lower()] for m in _STATED.findall(response)}
    shown = f"tickets {sorted(tickets)}, status {sorted(stated)}"
    if not stated:
        return Verdict(0.0, "unparsed", shown, "no status stated (e.g. 'is now resolved')")
    if tickets != {ticket}:
        return Verdict(0.0, "wrong", shown, f"the reply must name ticket {ticket} and no other")
    if len(stated) > 1:
        return Verdict(0.0, "wrong", shown, f"several statuses: {', '.join(sorted(stated))}")
    if stated != {status}:
        return Verdict(0.0, "wrong", shown, f"status {stated.pop()}, expected {status}")
    return Verdict(1.0, "correct", shown, f"{ticket} is {status}")


def check_reference(reference: str, params: dict) -> str | None:
    try:
        _reference(reference, params)
    except ValueError as exc:
        return f"ticket_status reference unusable: {exc}"
    return None


def solution_from_reference(reference: str, prompt: str) -> str | None:
    try:
        ticket, status = _reference(reference, {})
    except ValueError:
        return None
    return f"Your ticket {ticket} is now {status}."
