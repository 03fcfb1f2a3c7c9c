"""The `keyword` and `regex` verifiers: required and forbidden patterns in the response.

reference (JSON object, params may carry the same keys; a reference key wins):
  required: list of patterns that must all appear (e.g. the return-policy link)
  forbidden: list of patterns that must not appear
  case_sensitive: false by default
  max_chars: optional length limit (answer spam scores 0)
  max_hits: optional limit on how often any required pattern may appear (default 3), so a
            response that repeats the keywords to farm reward scores 0
`keyword` treats patterns as literal text; `regex` as Python regular expressions (each search
runs on at most max_chars characters; patterns come from the data owner, not the model).
A reference that is a plain string (not JSON) is one required pattern.
"""

from __future__ import annotations

import json
import re

from . import verdict as V

DEFAULT_MAX_CHARS = 20_000


def _spec(reference: str, params: dict) -> dict:
    try:
        ref = json.loads(reference)
    except json.JSONDecodeError:
        ref = {"required": [reference]} if reference.strip() else {}
    if isinstance(ref, str):
        ref = {"required": [ref]}
    if not isinstance(ref, dict):
        raise ValueError("keyword reference must be a JSON object or a plain string")
    spec = {**params, **ref}
    if not spec.get("required") and not spec.get("forbidden"):
        raise ValueError("keyword reference has neither 'required' nor 'forbidden' patterns")
    return spec


def _compile(patterns, literal: bool, flags: int) -> list[re.Pattern]:
    if isinstance(patterns, str):
        patterns = [patterns]
    return [re.compile(re.escape(p) if literal else p, flags) for p in patterns or []]


def _check(response: str, reference: str, params: dict, literal: bool) -> V.Verdict:
    try:
        spec = _spec(reference, params)
        flags = 0 if spec.get("case_sensitive") else re.IGNORECASE
        required = _compile(spec.get("required"), literal, flags)
        forbidden = _compile(spec.get("forbidden"), literal, flags)
    except (ValueError, re.error) as exc:
        return V.error(f"keyword reference unusable: {exc}")
    max_chars = int(spec.get("max_chars") or DEFAULT_MAX_CHARS)
    max_hits = int(spec.get("max_hits", 3))
    if not response.strip():
        return V.unparsed("empty response")
    if len(response) > max_chars:
        return V.wrong("", f"response has {len(response)} chars, more than max_chars={max_chars}")
    for pat in forbidden:
        if m := pat.search(response):
            return V.wrong(V.clip(m.group(0), 80), f"forbidden pattern {pat.pattern!r} found")
    for pat in required:
        hits = len(pat.findall(response))
        if hits == 0:
            return V.wrong("", f"required pattern {pat.pattern!r} missing")
        if max_hits and hits > max_hits:
            return V.wrong(
                "", f"required pattern {pat.pattern!r} appears {hits} times (max_hits={max_hits}): keyword spam"
            )
    return V.correct("", f"all {len(required)} required patterns present, none forbidden")


def verify_keyword(response: str, reference: str, params: dict) -> V.Verdict:
    return _check(response, reference, params, literal=True)


def verify_regex(response: str, reference: str, params: dict) -> V.Verdict:
    return _check(response, reference, params, literal=False)


def check_reference(reference: str, params: dict) -> str | None:
    try:
        spec = _spec(reference, params)
        _compile(spec.get("required"), False, 0)
        _compile(spec.get("forbidden"), False, 0)
    except (ValueError, re.error) as exc:
        return f"keyword reference unusable: {exc}"
    return None


def solution_from_reference(reference: str, prompt: str) -> str | None:
    return None
