"""Reward canaries built from each row's own prompt and reference, for keyword-like rules.

A rule that pays for the presence of text (`keyword`, `regex`, `reply`) can be paid by the prompt
itself: the retail sample's reply prompt showed the format example
`https://shop.example.com/returns - start the return there.`, the keyword rule required the link,
and a pretrained model learned in 12 GRPO steps to answer every reply row with that example, or
with the link followed by junk. The fixed canaries in canary.py never saw that text, so they passed.

For each probed row these add (names as the canary report shows them):
  - the prompt's format example (the text after its last `Format:` line label, and the prompt's
    last line), alone, twice, padded with junk, after the prompt's question, and with the required
    keywords it lacks put in before its final stop (`...there, Sam Lee.`: what the model wrote next);
  - every URL in the prompt: alone, followed by junk (as the model wrote it), repeated;
  - the reference's required keywords (`keyword`'s `required`; `reply`'s link, mentions and
    action): repeated, and padded with junk. `regex` patterns are not text, so a regex rule gets
    only the prompt's canaries.
canary.probe scores them like every other canary: one that scores on more than max_share of a
rule's sampled rows stops attach, naming the rule and the canary.
"""

from __future__ import annotations

import json
import re

KEYWORD_LIKE = ("keyword", "regex", "reply")
# the tail SmolLM2-135M-Instruct wrote after the link, and more of the same
JUNK = "-startshesen-reti&#4227= qz%7B}}|~ 0x3f;;"
PROMPT_CANARY_FIX = (
    "a rule that pays for text the prompt itself shows (its format example, its link) or for its "
    "keywords spammed teaches the model to copy them: require what this row's answer must say "
    "(for a customer reply, the `reply` verifier: the link once, the customer, the action), "
    "forbid the format example, or change the template's format_example to a placeholder"
)
PROMPT_CANARY_NAMES = frozenset(
    {
        "the prompt's format example",
        "the prompt's format example twice",
        "the prompt's format example padded with junk",
        "the prompt's question and format example",
        "the prompt's format example with the required keywords",
        "a link from the prompt",
        "a link from the prompt followed by junk",
        "a link from the prompt repeated",
        "the required keywords repeated",
        "the required keywords padded with junk",
    }
)
_LABEL = re.compile(r"^[ \t]*(?:format|格式)[ \t]*[:：][ \t]*", re.IGNORECASE | re.MULTILINE)
_ANY_LABEL = re.compile(r"^[ \t]*[A-Za-z][A-Za-z ]{1,24}[:：]", re.MULTILINE)
# a URL is ASCII: the text after it starts at the first other character (`…/returns办理退货`)
_URL = re.compile(
    r"(?i:https?://|www\.)[^\s<>\"'()\[\]\u0080-\U0010ffff]+"
)  # no IGNORECASE on the class: 's', 'k' fold to ſ, K


def format_examples(prompt: str) -> list[str]:
    """What the prompt shows as the answer's form: the text after its last `Format:` label (to the
    end), and its last line; empty strings dropped, duplicates once."""
    found = []
    labels = list(_LABEL.finditer(prompt))
    if labels:
        found.append(prompt[labels[-1].end() :].strip())
    lines = [ln.strip() for ln in prompt.strip().splitlines() if ln.strip()]
    if lines:
        found.append(_LABEL.sub("", lines[-1]).strip())
    return list(dict.fromkeys(f for f in found if f))


def _question(prompt: str) -> str:
    """The prompt up to its first labelled line (`Requirements: ...`): the request as the user wrote it."""
    first = _ANY_LABEL.search(prompt)
    return (prompt[: first.start()] if first else prompt).strip()


def required_keywords(verifier: str, reference: str, params: dict) -> list[str]:
    """The literal texts a rule requires of this row; [] when it has none or the reference is unusable
    (attach's self-check reports that reference)."""
    try:
        if verifier == "reply":
            from .reply import required_terms

            return required_terms(reference)
        if verifier == "keyword":
            from .keyword import _spec

            required = _spec(reference, params).get("required") or []
            return [required] if isinstance(required, str) else [str(r) for r in required]
    except (ValueError, TypeError, json.JSONDecodeError):
        return []
    return []


def prompt_canaries(verifier: str, params: dict, reference: str, prompt: str) -> list[tuple[str, str]]:
    """(name, response) pairs built from this row's prompt and reference; [] for other verifiers."""
    if verifier not in KEYWORD_LIKE:
        return []
    out: list[tuple[str, str]] = []
    question = _question(prompt)
    terms = required_keywords(verifier, reference, params)
    for example in format_examples(prompt):
        out += [
            ("the prompt's format example", example),
            ("the prompt's format example twice", f"{example}\n{example}"),
            ("the prompt's format example padded with junk", f"{example} {JUNK}"),
            ("the prompt's question and format example", f"{question}\n{example}"),
        ]
        if missing := [t for t in terms if t.lower() not in example.lower()]:
            out.append(
                (
                    "the prompt's format example with the required keywords",
                    f"{example.rstrip('.!?。！？ ')}, {', '.join(missing)}.",
                )
            )
    for url in dict.fromkeys(u.rstrip(".,;:!?") for u in _URL.findall(prompt)):
        out += [
            ("a link from the prompt", url),
            ("a link from the prompt followed by junk", f"{url} - {url.rsplit('/', 1)[0]}/{JUNK}"),
            ("a link from the prompt repeated", " ".join([url] * 5)),
        ]
    if terms:
        out += [
            ("the required keywords repeated", " ".join(terms * 5)),
            ("the required keywords padded with junk", f"{JUNK} {' '.join(terms)} {JUNK}"),
        ]
    return out
