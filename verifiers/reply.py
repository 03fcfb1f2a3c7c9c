"""The `reply` verifier: a short customer reply that does what this request needs, not one that shows a link.

Why not `keyword`: a keyword rule that requires the returns link pays for the link, and the prompt's
own format example carries it. A pretrained instruct model (SmolLM2-135M-Instruct, LoRA) found that
in 12 GRPO steps: it answered every reply request with the format example itself, or with the link
followed by junk, for full reward. A reply rule needs what each row's reply must contain (the
customer it answers, the item, what this request needs them told), which is per-row data, so it
lives in the reference, not in patterns shared by every row. When each row asked only for the
customer and one stock action, the format example with the customer's name put in still scored:
the action must differ by kind of request, and the prompt should show a placeholder.

reference (JSON object; attach rejects a row whose reference breaks these rules or whose `reply`
fails its own rule):
  link:    the one URL the reply must give, exactly once and whole (not the start of a longer URL);
           no other URL may appear
  mention: what the reply must name, a list whose items are a string or a list of alternatives
           (the customer's name, the item the request is about, the order id the ticket gives)
  action:  alternatives, one of which must appear: what this request needs the customer told
           ("download the return label", "within 30 days"); choose words the request itself does
           not use, so an echo of the request with the link pasted on scores 0, and words that
           differ between kinds of request, so one stock reply cannot answer them all
  reply:   the reference reply (the desk's own), which must pass this rule
params (all optional, from the rule):
  format_example: the prompt's format example; a response that contains it (less its final
                  punctuation: `...there, Sam Lee.` still copies `...there.`) scores 0
  forbidden: literal texts that must not appear (the prompt's section labels: an echo of the prompt)
  max_chars: longer responses score 0 (default 600: a reply is short)
  max_hits:  how often any mention or action may appear (default 3): repeating them is spam
  min_words: words the reply needs besides the link, mentions and action (default 3; a CJK
             character counts as one): a list of the required parts is not a reply

Junk scores 0 too: outside URLs a reply is prose, so a character that prose does not use (`&`, `=`,
`{`, `|`, `^`, `~`, `@`, a control character, any symbol but a currency sign) makes it wrong. Left
out: the required parts joined by filler words score ("Hi Sam Lee, the ceramic mug: 30 days,
thanks <link>"), and so does a fluent reply with a wrong claim in it. Matching is case-insensitive
literal text.
"""

from __future__ import annotations

import json
import re
import unicodedata

from . import verdict as V

DEFAULT_MAX_CHARS = 600
DEFAULT_MAX_HITS = 3
DEFAULT_MIN_WORDS = 3
# a URL is ASCII: the text after it starts at the first other character (`…/returns办理退货`)
_URL = re.compile(
    r"(?i:https?://|www\.)[^\s<>\"'()\[\]\u0080-\U0010ffff]+"
)  # no IGNORECASE on the class: 's', 'k' fold to ſ, K
_URL_TAIL = ".,;:!?-"  # sentence punctuation after a URL is not part of it
# prose punctuation, Latin and CJK; everything else that is not a letter, digit, space or currency sign is junk
# a word of prose: a run of letters or digits, or one CJK character (Chinese has no spaces)
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u9fff\uf900-\ufaff]+")
_END = ".!?。！？ "  # a format example's final punctuation, which a copy may drop
_PROSE = set(".,!?;:'\"()[]-–—…/%#*_<>") | set("，。！？；：、“”‘’（）《》「」【】·～")


def _alternatives(item) -> list[str]:
    items = [item] if isinstance(item, str) else item
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x.strip() for x in items):
        raise ValueError(f"each mention/action must be a non-empty string or a list of them, got {item!r}")
    return [x.strip() for x in items]


def parse_reference(reference: str) -> dict:
    """{link, mention: [[alternatives]], action: [alternatives], reply}; ValueError naming the key."""
    try:
        ref = json.loads(reference)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'reply reference is not JSON ({exc.msg}); write {{"link": ..., "mention": [...], '
            '"action": [...], "reply": ...}'
        ) from None
    if not isinstance(ref, dict):
        raise ValueError("reply reference must be a JSON object with link, mention, action and reply")
    unknown = sorted(set(ref) - {"link", "mention", "action", "reply"})
    if unknown:
        raise ValueError(f"reply reference has unknown keys {unknown}; known: link, mention, action, reply")
    link = ref.get("link")
    if not isinstance(link, str) or not _URL.fullmatch(link.strip()):
        raise ValueError(f"reply reference 'link' must be one URL (http://, https:// or www.), got {link!r}")
    mention = ref.get("mention", [])
    if not isinstance(mention, list):
        raise ValueError("reply reference 'mention' must be a list (of strings or lists of alternatives)")
    if not isinstance(ref.get("reply"), str) or not ref["reply"].strip():
        raise ValueError("reply reference needs 'reply': the reference reply, which must pass its own rule")
    if "action" not in ref:
        raise ValueError("reply reference needs 'action': what the reply tells the customer to do")
    return {
        "link": link.strip(),
        "mention": [_alternatives(m) for m in mention],
        "action": _alternatives(ref["action"]),
        "reply": ref["reply"],
    }


def required_terms(reference: str) -> list[str]:
    """The link, then the first alternative of each mention and of the action (the canaries repeat them)."""
    ref = parse_reference(reference)
    return [ref["link"]] + [m[0] for m in ref["mention"]] + [ref["action"][0]]


def _urls(text: str) -> list[str]:
    return [m.group(0).rstrip(_URL_TAIL) for m in _URL.finditer(text)]


def _junk(text: str) -> str:
    """The characters of `text` (URLs removed) that prose does not use."""
    bad = []
    for ch in _URL.sub(" ", text):
        if ch.isalnum() or ch.isspace() or ch in _PROSE:
            continue
        if unicodedata.category(ch) == "Sc":  # $, ¥, €
            continue
        bad.append(ch)
    return "".join(bad)


def _other_words(text: str, ref: dict) -> int:
    """How many words `text` has besides its URLs, mentions and action."""
    rest = _URL.sub(" ", text.lower())
    for alternatives in ref["mention"] + [ref["action"]]:
        for a in sorted(alternatives, key=len, reverse=True):
            rest = rest.replace(a.lower(), " ")
    return len(_WORD.findall(rest))


def _check(response: str, ref: dict, params: dict) -> V.Verdict:
    text = response or ""
    if not text.strip():
        return V.unparsed("empty response")
    max_chars = int(params.get("max_chars") or DEFAULT_MAX_CHARS)
    if len(text) > max_chars:
        return V.wrong("", f"response has {len(text)} chars, more than max_chars={max_chars}")
    low = text.lower()
    example = str(params.get("format_example") or "").strip().rstrip(_END)
    if example and example.lower() in low:
        return V.wrong(V.clip(example, 80), "copies the prompt's format example")
    for label in params.get("forbidden") or []:
        if str(label).lower() in low:
            return V.wrong(V.clip(str(label), 80), f"forbidden text {label!r} found (an echo of the prompt)")
    if junk := _junk(text):
        return V.wrong(V.clip(junk, 40), f"junk characters {V.clip(junk, 20)!r}: a reply is prose")
    urls, link = _urls(text), ref["link"]
    exact = [u for u in urls if u.lower().rstrip("/") == link.lower().rstrip("/")]
    if not exact:
        return V.wrong(
            V.clip(urls[0], 80) if urls else "",
            f"the link {link} is missing" + (f" (found {urls[0]!r} instead)" if urls else ""),
        )
    if len(urls) > 1:
        return V.wrong(link, f"{len(urls)} URLs where the reply should give one ({link}): link spam")
    max_hits = int(params.get("max_hits", DEFAULT_MAX_HITS) or 0)
    for alternatives in ref["mention"] + [ref["action"]]:
        hits = sum(low.count(a.lower()) for a in alternatives)
        if hits == 0:
            return V.wrong(link, f"does not name {' or '.join(repr(a) for a in alternatives)}")
        if max_hits and hits > max_hits:
            return V.wrong(link, f"{alternatives[0]!r} appears {hits} times (max_hits={max_hits}): keyword spam")
    min_words = int(params.get("min_words", DEFAULT_MIN_WORDS) or 0)
    if (words := _other_words(text, ref)) < min_words:
        return V.wrong(
            link,
            f"only {words} words besides the link and the required parts (min_words={min_words}): "
            "a list of keywords, not a reply",
        )
    return V.correct(link, f"gives the link once, names all {len(ref['mention'])} required items and the action")


def _param_problem(params: dict) -> str | None:
    for key in ("max_chars", "max_hits", "min_words"):
        if key in params and (type(params[key]) is not int or params[key] < 0):
            return f"reply param {key!r} must be a non-negative integer, got {params[key]!r}"
    if not isinstance(params.get("format_example", ""), str):
        return "reply param 'format_example' must be a string (the prompt's format example)"
    forbidden = params.get("forbidden", [])
    if not isinstance(forbidden, list) or not all(isinstance(f, str) and f for f in forbidden):
        return "reply param 'forbidden' must be a list of non-empty strings"
    return None


def verify_reply(response: str, reference: str, params: dict) -> V.Verdict:
    try:
        ref = parse_reference(reference)
    except ValueError as exc:
        return V.error(str(exc))
    if problem := _param_problem(params):
        return V.error(problem)
    return _check(response, ref, params)


def check_reference(reference: str, params: dict) -> str | None:
    """Attach-time: the reference is well formed and its own reply passes the rule."""
    try:
        ref = parse_reference(reference)
    except ValueError as exc:
        return str(exc)
    if problem := _param_problem(params):
        return problem
    v = _check(ref["reply"], ref, params)
    if not v.correct:
        return f"the reference's own reply fails the reply rule ({v.detail}); fix the reply or the rule"
    return None


def solution_from_reference(reference: str, prompt: str) -> str | None:
    return None  # the reference reply is a check, not an SFT target: rows without a logged reply stay outcome-only
