"""The `choice` verifier: a multiple-choice letter.

reference: the gold letter (`B`, `(B)`, `答案：B` all work). params: `options` (letters allowed,
default "ABCDEFGH").
Extraction by priority: an explicit marker (`answer is (B)`, `Answer: B`, `答案：B`, `答案是B`,
`选B`, `选择B`, `\\boxed{B}`), else a response that is only a letter (`B`, `(B)`, `B.`), else a
single parenthesized letter `(B)` in the text. Hedging, i.e. two different letters at the
chosen level (`A or B`, `(A)(C)`, `Answer: AB`), scores 0.
"""

from __future__ import annotations

import re

from . import verdict as V
from .math.normalize import to_halfwidth

_MARKER = re.compile(
    r"(?:answer\s*(?:is)?\s*[:：]?|答案\s*(?:是|为)?\s*[:：]?|选择?|option|\\boxed\{)[ \t]*\(?[ \t]*"
    r"([A-Z]{2,8}(?![A-Za-z])|[A-Za-z](?![A-Za-z])\)?"
    r"(?:[ \t]*(?:,|、|和|and|or|或|/)[ \t]*\(?[A-Za-z]\)?(?![A-Za-z])|[ \t]+\(?(?-i:[A-Z])\)?(?![A-Za-z]))*)",
    re.IGNORECASE,
)  # `A B C D`: capital letters separated by spaces are a list too (hedging)
_ALONE = re.compile(r"^\s*\(?\s*([A-Za-z])\s*\)?\s*[.:)]?\s*$")
_PAREN = re.compile(r"\(([A-Za-z])\)")


def _letters(text: str, options: str) -> list[str]:
    return [c.upper() for c in re.findall(r"[A-Za-z]", text) if c.upper() in options]


def extract_choice(response: str, options: str) -> tuple[str | None, str]:
    """(letter or None, why)."""
    text = to_halfwidth(response)
    found = []
    for m in _MARKER.finditer(text):
        raw = m.group(1)
        if re.fullmatch(r"[A-Za-z]{2,}", raw) and not raw.isupper():
            continue  # "answer is because": a word, not letters
        letters = _letters(re.sub(r"\b(?:and|or)\b", " ", raw), options)
        if letters:
            found.append(letters)
    if found:
        chosen = found[-1]
        everything = {x for letters in found for x in letters}
        if len(set(chosen)) > 1 or len(everything) > 1:
            return None, f"hedged between {', '.join(sorted(everything))}"
        return chosen[0], "marker"
    if len(text.strip()) <= 12 and (m := _ALONE.match(text.strip())):  # whitespace runs made it quadratic
        letter = m.group(1).upper()
        return (letter, "alone") if letter in options else (None, f"{letter} is not an option")
    parens = {x.upper() for x in _PAREN.findall(text) if x.upper() in options}
    if len(parens) == 1:
        return parens.pop(), "parenthesized"
    if len(parens) > 1:
        return None, f"hedged between {', '.join(sorted(parens))}"
    return None, "no option letter found"


def _gold(reference: str, options: str) -> str | None:
    letter, _ = extract_choice(reference, options)
    return letter


def verify_choice(response: str, reference: str, params: dict) -> V.Verdict:
    options = str(params.get("options", "ABCDEFGH")).upper()
    gold = _gold(reference, options)
    if gold is None:
        return V.error(f"choice reference {V.clip(reference, 40)!r} is not one option letter of {options}")
    letter, why = extract_choice(response, options)
    if letter is None:
        if why.startswith("hedged"):  # extract_choice's own reason slug, not a verdict's detail
            return V.hedged("", why)
        return V.unparsed(why)
    if letter == gold:
        return V.correct(letter, f"{why}: {letter}")
    return V.wrong(letter, f"{why}: {letter}, gold {gold}")


def check_reference(reference: str, params: dict) -> str | None:
    options = str(params.get("options", "ABCDEFGH")).upper()
    if _gold(reference, options) is None:
        return f"choice reference {V.clip(reference, 40)!r} is not one option letter of {options}"
    return None


def solution_from_reference(reference: str, prompt: str) -> str:
    letter = _gold(reference, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") or reference.strip()
    return f"答案：{letter}" if "答案" in prompt else f"Answer: {letter}"
