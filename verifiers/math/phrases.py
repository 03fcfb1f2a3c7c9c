"""How a final sentence without a marker introduces its answer: a table of phrases per language.

Support desks and chat models end with `应退款 88 元。`, `合计 2万元。`, `一共是 120 元，已为您登记。`,
`The refund is 88 yuan.`: a SUBJECT from the table, an optional VERB, then the amount with its
currency or unit. The rule (`phrase_answer`):
  1. The final sentence is the last sentence that holds a digit; up to MAX_TRAILING short
     sentences without one after it (`感谢您的耐心！`) are courtesy, not an answer.
  2. The first SUBJECT in it whose clause goes on with only VERBS, HEDGES or a currency sign before
     a number introduces the answer; numbers before it are the working (`运费12元，应退款88元`).
  3. Every quantity from there to the end of the sentence must restate one value (units.py:
     `2.5千克，即2500克`); two different ones (`应退款88元，合计90元`, `应退款 1 2 3 4 5 元`) are a
     hedge. A trailing clause without numbers (`，已为您登记`) is fine.
  4. A HEDGE word before the amount (`约`, `大约`, `about`), after it (`左右`, `or so`), or a
     doubting word anywhere in the sentence (`可能`, `probably`) makes the answer hedged.
`答：退款金额是45元` reads the same way after its marker. The tables are data: add a phrase to
the language's row, not a regex to the code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .units import quantities, readings

MAX_TRAILING = 3
MAX_TRAILING_CHARS = 80
MAX_SENTENCE_CHARS = 400

# Subjects that introduce the answer amount, longest match first.
SUBJECTS = {
    "zh": ("应退款", "应退还", "应退", "退款金额", "退款", "应补", "总价", "总金额", "总额", "总计", "合计",
           "共计", "一共", "总共", "共需", "需要支付", "需支付", "应支付", "应付", "实付", "还需支付",
           "需付", "找零", "结果"),
    "en": ("the refund", "the total", "in total", "altogether", "you need to pay", "you will pay",
           "you pay", "the result", "should refund", "need to refund", "will refund", "we refund",
           "should pay", "need to pay"),
}
# Words that may stand between the subject and the amount.
VERBS = {
    "zh": ("是", "为", "等于", "有", "金额为", "金额是", ":"),
    "en": ("is", "are", "comes to", "will be", "equals", ":"),
}
# Hedges: right before the amount (or its verb), right after it, or anywhere in the sentence.
# `≈`, `\approx` and `~` are not hedges: math writes a rounded result with them (`\frac{70}{9}
# \approx 7.78`, the math comparison decides those) and LaTeX writes `~` as a space.
HEDGES_BEFORE = {
    "zh": ("大约", "大概", "约", "差不多", "将近", "估计", "接近"),
    "en": ("about", "approximately", "approx.", "roughly", "around", "nearly", "almost"),
}
HEDGES_AFTER = {"zh": ("左右", "上下"), "en": ("or so",)}
DOUBTS = {"zh": ("可能", "也许", "或许", "大概", "估计", "不确定"),
          "en": ("probably", "maybe", "perhaps", "i think", "i guess", "not sure")}


def _alternation(table: dict[str, tuple[str, ...]], edge: bool) -> re.Pattern:
    words = sorted({w for row in table.values() for w in row}, key=len, reverse=True)
    parts = [re.escape(w) + (r"(?![A-Za-z])" if edge and w[-1].isascii() and w[-1].isalpha() else "")
             for w in words]
    head = r"(?<![A-Za-z])" if edge else ""
    return re.compile(head + "(?:" + "|".join(parts) + ")", re.IGNORECASE)


_SUBJECT = _alternation(SUBJECTS, edge=True)
_FILLER = re.compile(r"(?:\s|[,:]|" + _alternation(VERBS, True).pattern + "|"
                     + _alternation(HEDGES_BEFORE, True).pattern + ")*", re.IGNORECASE)
_BEFORE = _alternation(HEDGES_BEFORE, edge=True)
_AFTER = re.compile(r"^\s*(?:" + _alternation(HEDGES_AFTER, True).pattern + ")", re.IGNORECASE)
_AFTER_ANYWHERE = _alternation(HEDGES_AFTER, edge=True)
# a hedge right before a number: only a verb or a currency sign between (`about 88`, `约为88`)
_BEFORE_ADJACENT = re.compile("(?:" + _BEFORE.pattern + r")\s*(?:是|为|is|:)?\s*(?:¥|US\$|\\?\$)?\s*$",
                              re.IGNORECASE)
_DOUBT = _alternation(DOUBTS, edge=True)
# sentence ends: a newline, CJK stops, `!?`, and a period not inside a number (`1,299.00`)
_SENTENCE_END = re.compile(r"\n|。|[!?！？]|\.(?!\d)")
_ABBREVIATION = re.compile(r"\b(i)\.(e)\.|\b(e)\.(g)\.|\b(approx|etc|vs|resp)\.", re.IGNORECASE)
_BEFORE_SUBJECT = re.compile("(?:" + _BEFORE.pattern + r")\s*$", re.IGNORECASE)
_ARITHMETIC = re.compile(r"\d\s*[-+*×÷]\s*[\d(]")


@dataclass(frozen=True)
class Ending:
    answer: str                  # the amount as written (`88 元`, `¥1,299.00`)
    restated: tuple[str, ...]    # the same value written otherwise in the sentence (`2500 g`)
    values: tuple[str, ...]      # every different value, when there are several (a hedge)
    hedge: str                   # the hedge word found, or ""


def final_sentence(text: str) -> str:
    """The last sentence holding a digit, when only short digit-free sentences follow it."""
    text = _ABBREVIATION.sub(lambda m: "".join(g for g in m.groups() if g), text[-4000:])
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    for skipped, sentence in enumerate(reversed(sentences)):
        if re.search(r"\d", sentence):
            return re.sub(r"\*\*|__|`", "", sentence)
        if skipped >= MAX_TRAILING or len(sentence) > MAX_TRAILING_CHARS:
            return ""
    return ""


def phrase_answer(text: str) -> Ending | None:
    """The answer a final sentence introduces with a SUBJECT (see the module docstring), or None."""
    sentence = final_sentence(text)
    if not sentence or len(sentence) > MAX_SENTENCE_CHARS:
        return None
    for subject in _SUBJECT.finditer(sentence):
        filler = _FILLER.match(sentence, subject.end())
        rest = sentence[filler.end():]
        found = quantities(rest)
        if not found or not rest.startswith(found[0].text):
            continue  # `合计有3种方法` or `the total of 3 and 4`: no amount right after the subject
        if "=" in rest or "等于" in rest or _ARITHMETIC.search(rest):
            return None  # `应退款 100-12=88元` is working: the verb rule reads the value after `=`
        lead = (sentence[:subject.start()], sentence[subject.end():filler.end()])
        return _ending(sentence, lead, rest, found)
    return None


def _ending(sentence: str, lead: tuple[str, str], rest: str, found: list) -> Ending:
    one = readings(found)
    if one is None:
        values = tuple(dict.fromkeys(q.text for q in found))
        return Ending(found[0].text, (), values, "")
    return Ending(one[0].text, tuple(q.text for q in one[1:]), (), hedge_word(sentence, lead, rest, found[0].text))


def hedge_word(sentence: str, lead: tuple[str, str], rest: str, amount: str) -> str:
    """The hedge that makes the amount doubtful, or "": right before the subject or between it
    and the amount (`lead`: the text before the subject, the filler after it), right after the
    amount (`rest` starts with it), or a doubting word anywhere in the sentence."""
    before_subject, filler = lead
    if m := _BEFORE_SUBJECT.search(before_subject) or _BEFORE.search(filler):
        return _BEFORE.search(m.group(0)).group(0)
    if m := _AFTER.match(rest[len(amount):]):
        return m.group(0).strip()
    if m := _DOUBT.search(sentence):
        return m.group(0)
    return ""


def answer_hedge(answer: str, sentence: str = "") -> str:
    """The hedge on an answer read some other way (after a marker, after `is`, on the last line):
    a hedge word right before its number or right after it, in the answer or where the answer
    stands in `sentence` (the final sentence it came from), or a doubting word in `sentence`."""
    for text in (answer, sentence):
        if not (_BEFORE.search(text) or _AFTER_ANYWHERE.search(text)):
            continue
        found = quantities(answer)
        at = text.rfind(found[0].text) if found else -1
        if at >= 0:
            if m := _BEFORE_ADJACENT.search(text[:at]):
                return _BEFORE.search(m.group(0)).group(0)
            if m := _AFTER.match(text[at + len(found[0].text):]):
                return m.group(0).strip()
    if sentence and (m := _DOUBT.search(sentence)):
        return m.group(0)
    return ""
