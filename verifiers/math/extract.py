"""Find the final answer(s) in a response, by priority.

First the response is cleaned of what chat models wrap around answers: a leading assistant
header (`<|im_start|>assistant`, Llama-3's `<|start_header_id|>assistant<|end_header_id|>`,
`<|assistant|>`, `<start_of_turn>model`) is dropped, the turn ends at an end-of-turn token
(`<|im_end|>`, `</s>`, `<|eot_id|>`, ...) or a header the model writes for the next turn, other
chat special tokens (and the rule's own `special_tokens` param) are dropped, a price with a
decimal comma reads with a point (`2,74 $` is 2.74; `1,234 $` keeps its thousands), and a
`<think>...</think>` block is skipped (the answer is read after the last `</think>`; a `<think>`
never closed leaves no answer). Then the levels, highest first; the answer is the LAST candidate
of the highest level that has one:
  1. explicit markers: "final answer is/:", "the answer is", `答案是`, `答案:`, `最终答案`, `答:`
  2. `\\boxed{...}` / `\\fbox{...}` (balanced braces); a box ending a step of working
     (`... = \\boxed{200}`) before a later final-answer marker is working, no rival answer
  3. `Answer:` (also `**Answer:**`, and `Answer` without a colon at a line start when math
     follows: `Answer $9$`, `Answer \\[ 9 \\]`)
  4. the final sentence's answer phrase (phrases.py: a table of subjects per language):
     `应退款 88 元。`, `一共是 120 元，已为您登记。`, `合计 2万元`, `The refund is 88 yuan.`; a hedge word
     on an answer of any level (`Answer: about 88`) flags it
  5. the final sentence, when it states a result: "The GCD of 380 and 986 is 2.",
     "LCM(47, 75) = 3525", "... - 662 = -1043", "总价为36元" (the text after the last `is`,
     `equals`, `=`, `为`, `是`, `等于` of the last sentence, when it is short), with the relation
     it was cut from (`whole`: `$y=2x+3$`, `$p=-1,p=2$`) for a gold that is one
  6. fallback, on the last line only: the whole line when it is short and has no words or
     colon, else its number when it holds exactly one (several numbers there are a guess list,
     unless they restate one value: `2.5 kg, i.e. 2500 g`, units.py, or the final sentence
     concludes with one value, `Therefore, there are 12 ...`, or rejects all but one, `not 10
     it's 1,000.99`).
Levels 4-6 also report the values a final sentence restates (`restated`: any of them may match
the gold), several different values there (`candidates`: a hedge), and a hedge word next to the
answer (`hedge`: `约`, `左右`, `about`, `probably`; phrases.py).
Candidates of levels 1-3 are all returned too, so the verifier can spot hedging (two different
final answers). Text after a marker runs to the end of the line or sentence; a `\\boxed{}`,
`$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` right after a marker is taken whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .normalize import to_halfwidth
from .phrases import Ending, answer_hedge, final_sentence, phrase_answer, retraction
from .units import quantities, readings

MAX_RESPONSE_CHARS = 100_000
_MARKERS = re.compile(
    r"(?:final\s+answer\s*(?:is|[:：])|the\s+answer\s+is|^[ \t]*#{4}(?!#)|答案\s*是|最终答案\s*(?:是|为)?\s*[:：]?|"
    r"答案\s*(?:为|[:：])|(?<![\w答])答\s*[:：])",
    re.IGNORECASE | re.MULTILINE,
)
# line starts are `^[ \t]*` under MULTILINE: a `\s*` there rescans every blank line (quadratic)
_ANSWER = re.compile(
    r"(?<![A-Za-z])answer\s*\**\s*[:：]|^[ \t]*\**answer\**[ \t]+(?=\$|\\[(\[]|\\boxed)", re.IGNORECASE | re.MULTILINE
)
# The turn ends at an end-of-turn token, or where the model starts writing the next turn itself.
_TURN_END = re.compile(
    r"<\|(?:im_end|im_start|eot_id|endoftext|end|start_header_id|user|assistant|system)\|>|</s>|<eos>|"
    r"<end_of_turn>|<start_of_turn>|\[INST\]"
)
_SPECIAL_TOKENS = re.compile(r"<\|[A-Za-z0-9_:.\-]{1,40}\|>|<s>|<bos>|\[/INST\]")
# The header of the model's own turn, when a completion starts with it: it opens the answer, it
# does not end it. A completion opening with another role's header ends there (no answer).
_OWN_HEADER = re.compile(
    r"(?:\s*(?:<\|im_start\|>[ \t]*(?:assistant|model)?(?=\s)|"
    r"<\|start_header_id\|>[ \t]*(?:assistant|model)[ \t]*<\|end_header_id\|>|"
    r"<\|assistant\|>|<start_of_turn>[ \t]*model|<\|begin_of_text\|>|<s>|<bos>|\[/INST\]))*",
    re.IGNORECASE,
)
# `$...$` may hold an escaped dollar (`$\\$61.62$`): a `$` after a backslash does not close it
_MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$((?:\\\$|[^$])+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_RUN_JOINER = re.compile(r"(?:\s|,|;|\$|\\[()\[\]]|\\q?quad|\\text\{\s*and\s*\}|\band\b)*")
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
# "... is 2." / "... = -1043" / "总价为36元": the text after the last verb of being or `=`.
_STATES = re.compile(r"(?:\b(?:is|are|equals|was|be)\b|(?<![<>!=])=(?!=)|等于|为|是)\s*", re.IGNORECASE)
_LIST = re.compile(r"\s(?:or|and)\s|或|、|;")
MAX_STATED_CHARS = 40
# sentence ends; `... = 6$ So, the pair is $(7, 6)$`: a capitalised clause after math starts one
_SENTENCE_SPLIT = re.compile(r"(?<=[^\d\s])\.\s+|。|[!?！？](?!=)\s*|(?<=\$)\s+(?=[A-Z][a-z]*,)")
MAX_WHOLE_CHARS = 200
_CONCLUSION = re.compile(
    r"[\s$]*(?:therefore|thus|hence|so|in total|in conclusion|所以|因此|综上)(?![A-Za-z])", re.IGNORECASE
)
_RELATION = re.compile(r"(?<![<>!=])=(?!=)|!=|\\neq?(?![A-Za-z])|≠|[<>≤≥]|\\[lg]eq?(?![A-Za-z])")
MAX_LINE_SCAN = 2000
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_STEP_BOX = re.compile(r"(?<![<>!=])=\s*(\\boxed)\{")
_NUMBER = re.compile(
    r"-?\\frac\{[^{}]*\}\{[^{}]*\}|(?<![A-Za-z\d.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?%?(?![A-Za-z\d])"
)
# `2,74 $`, `12,50 €`: a price with a decimal comma (two places before the currency sign; a
# thousands separator is followed by three digits, `1,234 $` stays 1234; `$3,10$` closes math)
_PRICE_COMMA = re.compile(r"(?<![\d,.])(\d+),(\d{2})(?=[ \t]\$(?![\d$])|\s?(?:€|£|¥|EUR\b|euros?\b))")
_NEGATED = re.compile(r"\bnot\s+\$?(?:" + _NUMBER.pattern + r")")
_SENTENCE_END = re.compile(r"\n|。|(?<=[^\d\s])\.(?=\s|$)|\.(?=\s+[A-Z])|\.$|[!?！？](?!=)")


@dataclass(frozen=True)
class Extraction:
    answer: str | None  # the chosen final answer (raw text), None if nothing found
    level: str  # marker | boxed | answer | phrase | sentence | fallback | none
    candidates: tuple[str, ...]  # every level 1-3 candidate, in order of appearance; at levels
    #                              4-6 the final sentence's different values, when it has several
    restated: tuple[str, ...] = ()  # the same value written otherwise in the final sentence
    hedge: str = ""  # why the answer is hedged: a hedge word on it (`约`, `about`,
    #                              `probably`), or one number in two units (`2.5 kg vs 2.5 g`)
    whole: str = ""  # level 5: the relation or assignments the answer was cut from
    #                              (`y=-\\frac{1}{2}x+\\frac{3}{4}`, `p=-1,p=2`), for a gold that is one


def braced(text: str, start: int) -> tuple[str, int] | None:
    """Content of the balanced {...} group starting at text[start] == '{', and the end index."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def brace_pairs(text: str) -> dict[int, int]:
    """Index of each `{` -> index of its matching `}`, in one pass (unclosed ones are absent)."""
    pairs, stack = {}, []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def _boxed_at(text: str, pos: int, pairs: dict[int, int] | None = None) -> str | None:
    m = _BOXED.match(text, pos)
    if not m:
        return None
    end = m.end()
    if end < len(text) and text[end] == "{":
        if pairs is not None:  # one brace pass for many boxes: braced() per box is quadratic
            close = pairs.get(end)
            return text[end + 1 : close] if close is not None else None
        got = braced(text, end)
        return got[0] if got else None
    tok = re.match(r"\S+", text[end:])
    return tok.group(0) if tok else None


def _after_marker(text: str, pos: int) -> str:
    got = _marker_text(text, pos)
    boxed = _boxed_all(got)
    if boxed:
        return boxed[-1]
    if _CJK.search(got) and (said := _said_in_chinese(got)):
        return said
    if len(re.findall(r"[A-Za-z]{3,}", _LATEX_COMMAND.sub(" ", got))) >= 2:
        # "Final Answer: The largest $n$ is 34." states its value; "Final Answer: The final
        # answer is 7" is cut at the inner marker, leaving no value here.
        stated = _stated(got)
        if stated:
            return stated
        # "Answer: 36 (six times six)": the value with its gloss dropped, when one is left
        bare = re.sub(r"\s*\([^()]*\)\s*$", "", got).strip()
        if bare != got.strip() and len(re.findall(r"[A-Za-z]{3,}", bare)) < 2:
            return bare
        # "Final Answer: Jane started growing Sphere 3 hours ago.": the one number it states
        numbers = set(_NUMBER.findall(got))
        one = numbers.pop() if len(numbers) == 1 and "$" not in got and "\\" not in got else ""
        return one if one and not answer_hedge(one, got) else ""
    return got


def _marker_text(text: str, pos: int) -> str:
    rest = text[pos : pos + 2000].lstrip(" \t*:：\n")
    if rest.startswith("\\boxed") or rest.startswith("\\fbox"):
        boxed = _boxed_at(rest, 0)
        if boxed is not None:
            return boxed
    for opener, closer in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if rest.startswith(opener):
            close = _closing(rest, closer, len(opener))
            inner = rest[len(opener) : close] if close > 0 else ""
            if close > 0 and (opener in ("$$", "\\[") or "\n" not in inner.strip()):
                return inner.strip() + _alternative_after(rest[close + len(closer) :], opener, closer)
            break
    end = _SENTENCE_END.search(rest)
    rest = rest[: end.start()] if end else rest
    nxt = [m.start() for m in (_MARKERS.search(rest), _ANSWER.search(rest), _BOXED.search(rest)) if m]
    if not nxt:
        return rest
    head = rest[: min(nxt)]
    # "Final Answer: The final answer is 7": the words before the inner marker are no answer
    return head if re.search(r"[\d\\$]", head) else ""


def _alternative_after(tail: str, opener: str, closer: str) -> str:
    """ "The answer is $3$ or $4$.": a second value offered after the first math block is kept,
    so the answer reads `3 or 4` and hedges instead of passing as `3`."""
    m = re.match(r"\s*,?\s*(?:or|或者?|还是)\s*" + re.escape(opener), tail)
    if not m:
        return ""
    close = _closing(tail, closer, m.end())
    return f" or {tail[m.end() : close].strip()}" if close > 0 else ""


def _closing(text: str, closer: str, start: int) -> int:
    """Index of `closer` at or after `start`, skipping an escaped dollar (`\\$`); -1 if none."""
    pos = text.find(closer, start)
    while closer.startswith("$") and pos > 0 and text[pos - 1] == "\\":
        pos = text.find(closer, pos + 1)
    return pos


def _boxed_all(text: str, join_runs: bool = False) -> list[str]:
    """Every boxed answer; with join_runs, boxes joined only by `and`, commas or spacing
    (`\\boxed{1} and \\boxed{2}`, how models list several solutions) become one set answer,
    while `\\boxed{35} or maybe \\boxed{36}` stays two answers (hedging)."""
    found = []
    pairs = brace_pairs(text) if "\\boxed" in text or "\\fbox" in text else {}
    for m in _BOXED.finditer(text):
        got = _boxed_at(text, m.start(), pairs)
        if got is not None:
            end = m.end() + len(got) + 2 if text[m.end() : m.end() + 1] == "{" else m.end() + len(got)
            found.append((m.start(), end, got))
    if not join_runs:
        return [g for _, _, g in found]
    runs: list[list[str]] = []
    for i, (start, _, got) in enumerate(found):
        if runs and _RUN_JOINER.fullmatch(text[found[i - 1][1] : start]):
            runs[-1].append(got)
        else:
            runs.append([got])
    runs = [list(dict.fromkeys(b.strip() for b in run)) for run in runs]  # `\\boxed{36}, \\boxed{36}` is one 36
    return [run[0] if len(run) == 1 else "\\{" + ", ".join(run) + "\\}" for run in runs]


def _step_boxes(text: str) -> set[str]:
    """Boxes that end a step of working (`$0.04 \\cdot 10,000 \\cdot \\frac{1}{2} = \\boxed{200}$`)
    before a later final-answer marker: the marker states the final answer, they are no rival."""
    if "\\boxed" not in text:
        return set()
    return {got.strip() for m in _STEP_BOX.finditer(text) if (got := _boxed_at(text, m.start(1))) is not None}


def _after_think(text: str) -> int:
    closes = list(_THINK_CLOSE.finditer(text))
    return closes[-1].end() if closes else 0


def clean_response(response: str, special_tokens: tuple[str, ...] = ()) -> str | None:
    """The part of a response that may hold the answer (see the module docstring); None when a
    `<think>` block is never closed. `special_tokens`: a tokenizer's own specials, dropped too."""
    text = to_halfwidth(response[:MAX_RESPONSE_CHARS])
    text = text[_OWN_HEADER.match(text).end() :]
    if end := _TURN_END.search(text, _after_think(text)):
        text = text[: end.start()]
    text = _SPECIAL_TOKENS.sub(" ", text)
    text = _PRICE_COMMA.sub(r"\1.\2", text)
    for token in special_tokens:
        text = text.replace(token, " ")
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        return text[closes[-1].end() :]
    if _THINK_OPEN.search(text):
        return None
    return text


def extract(response: str, special_tokens: tuple[str, ...] = (), final_sentence_levels: bool = True) -> Extraction:
    """See the module docstring for the priority order; without final_sentence_levels, levels
    1-3 only (a gold's own marker: the rest of a gold is the gold)."""
    text = clean_response(response, special_tokens)
    if text is None:
        return Extraction(None, "none", ())
    markers = list(_MARKERS.finditer(text))
    marker = [_after_marker(text, m.end()) for m in markers]
    boxed = _boxed_all(text, join_runs=True)
    if markers and (steps := _step_boxes(text[: markers[-1].start()])):
        boxed = [b for b in boxed if b.strip() not in steps]
    answer = [_after_marker(text, m.end()) for m in _ANSWER.finditer(text)]
    candidates = tuple(c.strip() for c in marker + boxed + answer)
    for level, found in (("marker", marker), ("boxed", boxed), ("answer", answer)):
        found = [c.strip() for c in found if c.strip()]
        if found:
            return Extraction(found[-1], level, tuple(c for c in candidates if c), hedge=answer_hedge(found[-1]))
    if candidates or not final_sentence_levels:  # a marker with nothing after it: format without content
        return Extraction(None, "none", ())
    if ending := phrase_answer(text):
        return _from_ending(ending, "phrase")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    last = re.sub(r"\*\*|__|`", "", lines[-1]) if lines else ""
    if stated := _stated(last):
        got = _restated(stated, "sentence", last)
        return replace(got, whole=_whole(last)) if got.answer == stated else got
    spans = (
        [next(g for g in m.groups() if g is not None) for m in _MATH_SPAN.finditer(last)]
        if len(last) <= MAX_LINE_SCAN
        else []
    )  # an unclosed `\\(` makes the span search quadratic
    if len(spans) == 1 and spans[0].strip():  # "Therefore $x \geq 5$ is the solution."
        return Extraction(spans[0].strip(), "fallback", ())
    several = len(last) <= MAX_LINE_SCAN and len(set(_NUMBER.findall(last))) > 1
    if several and len(readings(quantities(last)) or ()) > 1:
        return _several_on_last_line(last)  # `1 kg, i.e. 1000 g`: one value in two units
    words = [w for w in re.findall(r"[A-Za-z]{3,}", _LATEX_COMMAND.sub(" ", last)) if w.lower() != "and"]
    if last and len(last) <= 60 and not words and ":" not in last:  # "Total: 36" is a label
        return Extraction(last, "fallback", (), hedge=answer_hedge(last))
    numbers = set(_NUMBER.findall(last))
    if len(numbers) == 1:  # several numbers on the last line is a guess list, not an answer
        return _restated(numbers.pop(), "fallback", last)
    if len(numbers) > 1 and len(last) <= MAX_LINE_SCAN:
        return _several_on_last_line(last)
    return Extraction(None, "none", ())


def _stated(line: str) -> str | None:
    """What the last sentence of `line` says the result is, when it ends in a short value."""
    sentences = [s for s in _SENTENCE_SPLIT.split(line) if s.strip()]
    if not sentences:
        return None
    last = sentences[-1].strip()
    states = list(_STATES.finditer(last))
    if not states or _LIST.search(last[states[0].end() :]):
        return None  # "x=2 or x=3" lists solutions: the whole line is the answer
    value = last[states[-1].end() :].strip().rstrip(".。").strip()
    if span := _MATH_SPAN.fullmatch(value):
        return next(g for g in span.groups() if g is not None).strip() or None
    if not value or len(value) > MAX_STATED_CHARS or not re.search(r"\d", value):
        return None
    if len(re.findall(r"[A-Za-z]{3,}", value)) > 2:  # "is 3 more than the number of cats"
        return None
    return value


def _whole(line: str) -> str:
    """The relation or assignments a stated value was cut from: the last math span of the last
    sentence (`$y=-\\frac{1}{2}x+\\frac{3}{4}$`, `$x != 5$`), else the sentence after its last
    verb of being (`W(x)=1 or W(x)=-1`); "" when that holds no relation."""
    sentences = [s for s in _SENTENCE_SPLIT.split(line) if s.strip()]
    if not sentences:
        return ""
    last = sentences[-1].strip().rstrip(".。")
    spans = list(_MATH_SPAN.finditer(last))
    if spans:
        text = next(g for g in spans[-1].groups() if g is not None)
    else:
        verbs = list(re.finditer(r"\b(?:is|are|equals)\b|等于|为|是", last, re.IGNORECASE))
        text = last[verbs[-1].end() :] if verbs else last
    return text.strip() if len(text) <= MAX_WHOLE_CHARS and _RELATION.search(text) else ""


# --- the final sentence: answer phrases, restatements, hedges (phrases.py, units.py) ------------
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _said_in_chinese(got: str) -> str | None:
    """`答：退款金额是45元` -> `45元`: the amount a Chinese marker's text states with a subject
    from the phrase table or a verb (`是`, `为`); None when it states none plainly (a hedge or
    several values leave the text as it is, which then reads as no number)."""
    ending = phrase_answer(got)
    if ending is not None:
        return ending.answer if not (ending.hedge or ending.values or ending.restated) else None
    stated = _stated(got)
    return stated if stated and len(quantities(stated)) == 1 and not answer_hedge(stated, got) else None


def _from_ending(ending: Ending, level: str) -> Extraction:
    return Extraction(ending.answer, level, ending.values, ending.restated, ending.hedge)


def _restated(answer: str, level: str, line: str) -> Extraction:
    """A level-5/6 answer with its hedge word, and its restatements when it holds several
    quantities that are one value (`2.5 kg (2500 g)`)."""
    sentence = final_sentence(line)
    hedge = answer_hedge(answer, sentence) or retraction(line)
    in_line = quantities(sentence) if len(_NUMBER.findall(sentence)) > 1 else []
    if len(in_line) > 1 and readings(in_line) is None and len({q.value for q in in_line}) == 1:
        hedge = hedge or " vs ".join(dict.fromkeys(q.text for q in in_line))  # `2.5 kg, i.e. 2.5 g`
    found = quantities(answer) if len(_NUMBER.findall(answer)) > 1 else []
    if len(found) > 1 and (one := readings(found)):
        return Extraction(one[0].as_answer(), level, (), _readings(one), hedge)
    return Extraction(answer, level, (), (), hedge)


def _several_on_last_line(last: str) -> Extraction:
    """Several numbers on the last line: one value restated (`The conversion gives 2.5 kg, i.e.
    2500 g.`) is the answer; several different values in its final sentence are a hedge (a value
    it rejects, `not 10, it's 1,000.99`, is none of them); one
    value in a concluding final sentence (`Therefore, ...`) is the answer; else (numbers only in
    the working before it) there is no answer."""
    found = quantities(last)
    if one := readings(found):
        return Extraction(
            one[0].as_answer(), "fallback", (), _readings(one), answer_hedge(one[0].text, final_sentence(last))
        )
    sentence = final_sentence(last)
    corrected = len(_NUMBER.findall(sentence)) > len(_NEGATED.findall(sentence)) > 0
    if corrected:  # "not 10, it's 1,000.99"
        sentence = _NEGATED.sub(" ", sentence)
    values = tuple(dict.fromkeys(q.shown() for q in quantities(sentence)))
    if len(values) > 1:
        return Extraction(values[0], "fallback", values)
    if len(values) == 1 and (corrected or _CONCLUSION.match(sentence)):  # "Therefore, there are 12 ..."
        return Extraction(values[0], "fallback", (), hedge=answer_hedge(values[0], sentence))
    return Extraction(None, "none", ())


def _readings(one: list) -> tuple[str, ...]:
    """The other readings of one value: its restatements, and a compound amount's last unit."""
    return tuple(q.as_answer() for q in one[1:]) + tuple(q.alt for q in one if q.alt)
