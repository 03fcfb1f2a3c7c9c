"""How a final sentence without a marker introduces its answer: a table of phrases per language.

Support desks and chat models end with `应退款 88 元。`, `合计 2万元。`, `一共是 120 元，已为您登记。`,
`The refund is 88 yuan.`: a SUBJECT from the table, an optional VERB, then the amount with its
currency or unit. The rule (`phrase_answer`):
  1. The final sentence is the last sentence that holds a digit; up to MAX_TRAILING short
     sentences without one after it (`感谢您的耐心！`) are courtesy, not an answer.
  2. The LAST SUBJECT in it whose clause goes on with only VERBS, HEDGES or a currency sign before
     a number introduces the answer; numbers before it are the working (`运费12元，应退款88元`,
     `The total is 100 yuan, minus 12 yuan, so the refund is 88 yuan`). Subjects are tried at
     every position, the longest one ending at the amount wins (`共需支付 36 元`). When an earlier
     subject states a different amount, the last one must follow from the numbers before it by
     one operation (`总价100元，优惠12元，实付88元`: 100 - 12), else the sentence states two
     answers (`应退款88元，合计90元`: a hedge).
  3. Every quantity from there to the end of the sentence must restate one value (units.py:
     `2.5千克，即2500克`); two different ones (`应退款 1 2 3 4 5 元`, `1 m 1 g`) are a hedge. A
     trailing clause without numbers (`，已为您登记`) is fine.
  4. A HEDGE word before the amount (`约`, `至少`, `about`, `more than`), after it (`左右`, `多`,
     `以上`, `88+`, `or so`), a doubting word anywhere in the sentence (`可能`, `我猜`,
     `probably`, `I believe`), or a question (the sentence ends in `?` or `吗`) makes the answer
     hedged; so does a NEGATION in the subject's clause before it (`不应退款88元`, `是否`, `if`).
`答：退款金额是45元` reads the same way after its marker. The tables are data: add a phrase to
the language's row, not a regex to the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .units import Quantity, quantities, readings, same_value

MAX_TRAILING = 3
MAX_TRAILING_CHARS = 80
MAX_WORKING = 12  # numbers before the answer that _follows tries in pairs
MAX_SENTENCE_CHARS = 400  # a longer final sentence is not an ending; answer_hedge reads this much

# Subjects that introduce the answer amount, longest match first.
SUBJECTS = {
    "zh": (
        "应退款",
        "应退还",
        "应退",
        "退款金额",
        "退款",
        "应补",
        "总价",
        "总金额",
        "总额",
        "总计",
        "合计",
        "共计",
        "一共",
        "总共",
        "共需",
        "需要支付",
        "需支付",
        "应支付",
        "应付",
        "实付",
        "还需支付",
        "需付",
        "找零",
        "结果",
        "共需支付",
    ),
    "en": (
        "the refund",
        "the total",
        "in total",
        "altogether",
        "you need to pay",
        "you will pay",
        "you pay",
        "the result",
        "should refund",
        "need to refund",
        "will refund",
        "we refund",
        "should pay",
        "need to pay",
    ),
}
# Words that may stand between the subject and the amount.
VERBS = {
    "zh": ("是", "为", "等于", "有", "金额为", "金额是", "需要", ":"),
    "en": ("is", "are", "comes to", "will be", "equals", ":"),
}
# Hedges: right before the amount (or its verb), right after it, or anywhere in the sentence.
# Bounds and approximations are hedges too: `至少88元` and `100多元` do not say the amount.
# `≈`, `\approx` and `~` are not hedges: math writes a rounded result with them (`\frac{70}{9}
# \approx 7.78`, the math comparison decides those) and LaTeX writes `~` as a space.
HEDGES_BEFORE = {
    "zh": (
        "大约",
        "大概",
        "约",
        "差不多",
        "将近",
        "估计",
        "接近",
        "不到",
        "最多",
        "至少",
        "超过",
        "不超过",
        "不少于",
        "低于",
        "高于",
    ),
    "en": (
        "about",
        "approximately",
        "approx.",
        "roughly",
        "around",
        "nearly",
        "almost",
        "at least",
        "at most",
        "more than",
        "less than",
        "over",
        "under",
        "up to",
    ),
}
# after the number itself or its unit (`100多元`, `100元以上`): `来` and `多` only there
HEDGES_AFTER = {
    "zh": ("左右", "上下", "多", "余", "来", "以上", "以下", "以内", "出头"),
    "en": ("or so", "or more", "or less", "at most", "at least", "or thereabouts", "+"),
}
DOUBTS = {
    "zh": ("可能", "也许", "或许", "大概", "估计", "不确定", "我猜", "对吗", "是吗"),
    "en": (
        "probably",
        "maybe",
        "perhaps",
        "i think",
        "i guess",
        "not sure",
        "i believe",
        "unsure",
        "not certain",
        "give or take",
    ),
}
# A short sentence after the answer that takes it back: `应退款 88 元。不对。`, `... Just kidding.`
RETRACTIONS = {
    "zh": ("不对", "错了", "说错", "搞错"),
    "en": ("wrong", "incorrect", "kidding", "not really", "my mistake", "scratch that"),
}
# A subject with one of these before it in its clause is not stated: `我们无法确认应退款88元`,
# `If the refund is 88 yuan, fine`; NEGATIONS_ADJACENT only right before it (`不应退款`, `无需支付`:
# `不锈钢杯总价为36元` and `无线耳机合计88元` name goods, they negate nothing).
NEGATIONS = {
    "zh": ("无法", "是否", "不能", "不用", "不必", "没有", "不会", "并非"),
    "en": ("if", "not", "no need", "whether", "unless", "don't", "doesn't", "never"),
}
NEGATIONS_ADJACENT = {"zh": ("不", "无", "没", "未", "别"), "en": ()}


# a sign hedge (`88+ yuan`) ends the amount: `2+\\sqrt{5}` and `2 + 3` are sums, not bounds
_SIGN_END = r"(?![^\s,.;，。；])(?!\s*[\d\\(\[{$])"


def _alternation(table: dict[str, tuple[str, ...]], edge: bool) -> re.Pattern:
    words = sorted({w for row in table.values() for w in row}, key=len, reverse=True)
    parts = [
        re.escape(w)
        + (
            r"(?![A-Za-z])"
            if edge and w[-1].isascii() and w[-1].isalpha()
            else _SIGN_END
            if not w[-1].isalnum() and edge
            else ""
        )
        for w in words
    ]
    head = r"(?<![A-Za-z])" if edge else ""
    return re.compile(head + "(?:" + "|".join(parts) + ")", re.IGNORECASE)


_SUBJECT = _alternation(SUBJECTS, edge=True)
_FILLER = re.compile(
    r"(?:\s|[,:]|" + _alternation(VERBS, True).pattern + "|" + _alternation(HEDGES_BEFORE, True).pattern + ")*",
    re.IGNORECASE,
)
_BEFORE = _alternation(HEDGES_BEFORE, edge=True)
_AFTER = re.compile(r"^\s*(?:" + _alternation(HEDGES_AFTER, True).pattern + ")", re.IGNORECASE)
_AFTER_ANYWHERE = _alternation(HEDGES_AFTER, edge=True)
# a hedge right before a number: only a verb or a currency sign between (`about 88`, `约为88`)
_BEFORE_ADJACENT = re.compile("(?:" + _BEFORE.pattern + r")\s*(?:是|为|is|:)?\s*(?:¥|US\$|\\?\$)?\s*$", re.IGNORECASE)
_DOUBT = _alternation(DOUBTS, edge=True)
_NEGATION = _alternation(NEGATIONS, edge=True)
_NEGATION_ADJACENT = re.compile("(?:" + _alternation(NEGATIONS_ADJACENT, edge=True).pattern + r")\s*$")
_CLAUSE_END = re.compile(r"[,;:，；：、]")
_QUESTION = re.compile(r"(?:[?？]|吗|吧)\s*$")  # `吧` asks for agreement: `应退款88元吧`
_RETRACTION = _alternation(RETRACTIONS, edge=True)
# `应退款不是 88 元`, `The total is not 88`: the verb before the answer is negated
_NEGATED_VERB = re.compile(
    r"(?:不是|不为|不等于|并非|(?<![A-Za-z])(?:not|isn't|never))\s*[:：]?\s*(?:¥|US\$|\\?\$)?\s*$", re.IGNORECASE
)
# every position where a subject starts, overlapping ones too (`共需支付`: `共需`, `需支付`)
_SUBJECT_AT = re.compile("(?=(" + _SUBJECT.pattern + "))", re.IGNORECASE)
# sentence ends: a newline, CJK stops, `!?`, and a period not inside a number (`1,299.00`)
_SENTENCE_END = re.compile(r"\n|。|[!?！？](?!=)|\.(?!\d)")
_ABBREVIATION = re.compile(r"\b(i)\.(e)\.|\b(e)\.(g)\.|\b(approx|etc|vs|resp)\.", re.IGNORECASE)
_BEFORE_SUBJECT = re.compile("(?:" + _BEFORE.pattern + r")\s*$", re.IGNORECASE)
_ARITHMETIC = re.compile(r"\d\s*[-+*×÷]\s*[\d(]")


@dataclass(frozen=True)
class Ending:
    answer: str  # the amount as written (`88 元`, `¥1,299.00`)
    restated: tuple[str, ...]  # the same value written otherwise in the sentence (`2500 g`)
    values: tuple[str, ...]  # every different value, when there are several (a hedge)
    hedge: str  # the hedge word found, or ""


def retraction(text: str) -> str:
    """A retracting word in the short digit-free sentences after the final sentence, or ""."""
    text = text[-MAX_TRAILING * MAX_TRAILING_CHARS * 2 :]
    sentences = [x for x in _SENTENCE_END.split(text) if x.strip()]
    for sentence in reversed(sentences[-MAX_TRAILING - 1 :]):
        if re.search(r"\d", sentence):
            break
        if m := _RETRACTION.search(sentence):
            return m.group(0)
    return ""


def final_sentence(text: str) -> str:
    """The last sentence holding a digit, when only short digit-free sentences follow it."""
    text = _ABBREVIATION.sub(lambda m: "".join(g for g in m.groups() if g), text[-4000:])
    pieces, start = [], 0
    for end in _SENTENCE_END.finditer(text):  # a question keeps its mark: it is a hedge
        pieces.append(text[start : end.start()] + ("?" if end.group(0) in "?？" else ""))
        start = end.end()
    sentences = [s.strip() for s in pieces + [text[start:]] if s.strip()]
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
    stated = {}  # amount position -> (subject start, filler end): the longest subject ending there
    for at in _SUBJECT_AT.finditer(sentence):
        filler = _FILLER.match(sentence, at.start() + len(at.group(1)))
        rest = sentence[filler.end() :]
        found = quantities(rest)
        if not found or not rest.startswith(found[0].text):
            continue  # `合计有3种方法` or `the total of 3 and 4`: no amount right after the subject
        stated.setdefault(filler.end(), (at.start(), at.start() + len(at.group(1))))
    if not stated:
        return None
    amount_at = max(stated)
    start, subject_end = stated[amount_at]
    rest = sentence[amount_at:]
    if "=" in rest or "等于" in rest or _ARITHMETIC.search(rest):
        return None  # `应退款 100-12=88元` is working: the verb rule reads the value after `=`
    found = quantities(rest)
    before = sentence[:start]
    if took_back := retraction(text):
        return Ending(found[0].as_answer(), (), (), took_back)
    if m := _NEGATION.search(_CLAUSE_END.split(before)[-1]) or _NEGATION_ADJACENT.search(before):
        return Ending(found[0].as_answer(), (), (), m.group(0))
    earlier = [quantities(sentence[at:])[0] for at in sorted(stated)[:-1]]
    if earlier and any(not same_value(q, found[0]) for q in earlier) and not _follows(found[0], quantities(before)):
        return Ending(earlier[0].as_answer(), (), (earlier[0].text, found[0].text), "")
    return _ending(sentence, (before, sentence[subject_end:amount_at]), rest, found)


def _follows(amount: Quantity, working: list[Quantity]) -> bool:
    """Whether `amount` is one operation on two numbers of the working, or their sum."""
    values = [q.value for q in working[:MAX_WORKING]]
    target = amount.value
    if len(values) > 1 and sum(values) == target:
        return True
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            if target in (a + b, a - b, b - a, a * b) or (b and a / b == target) or (a and b / a == target):
                return True
    return False


def _ending(sentence: str, lead: tuple[str, str], rest: str, found: list) -> Ending:
    one = readings(found)
    if one is None:
        values = tuple(dict.fromkeys(q.shown() for q in found))
        return Ending(found[0].as_answer(), (), values, "")
    restated = tuple(q.as_answer() for q in one[1:]) + tuple(q.alt for q in one if q.alt)
    return Ending(one[0].as_answer(), restated, (), hedge_word(sentence, lead, rest, found[0].text))


def hedge_word(sentence: str, lead: tuple[str, str], rest: str, amount: str) -> str:
    """The hedge that makes the amount doubtful, or "": right before the subject or between it
    and the amount (`lead`: the text before the subject, the filler after it), right after the
    amount (`rest` starts with it), or a doubting word anywhere in the sentence."""
    before_subject, filler = lead
    if m := _BEFORE_SUBJECT.search(before_subject) or _BEFORE.search(filler):
        return _BEFORE.search(m.group(0)).group(0)
    if m := _AFTER.match(rest[len(amount) :]):
        return m.group(0).strip()
    if m := _DOUBT.search(sentence):
        return m.group(0)
    if m := _QUESTION.search(sentence):
        return f"a question ({m.group(0).strip()})"
    return ""


def answer_hedge(answer: str, sentence: str = "") -> str:
    """The hedge on an answer read some other way (after a marker, after `is`, on the last line):
    a hedge word right before its number or right after it, in the answer or where the answer
    stands in `sentence` (the final sentence it came from), or a doubting word in `sentence`, or
    `sentence` being a question. Reads at most MAX_SENTENCE_CHARS of each."""
    answer, sentence = answer[:MAX_SENTENCE_CHARS], sentence[-MAX_SENTENCE_CHARS:]
    if sentence and (at := sentence.rfind(answer.strip())) > 0 and (m := _NEGATED_VERB.search(sentence[:at])):
        return m.group(0).strip()
    for text in (answer, sentence):
        if not (_BEFORE.search(text) or _AFTER_ANYWHERE.search(text)):
            continue
        found = quantities(answer)
        at = text.rfind(found[0].text) if found else -1
        if at >= 0:
            if m := _BEFORE_ADJACENT.search(text[:at]):
                return _BEFORE.search(m.group(0)).group(0)
            if m := _AFTER.match(text[at + len(found[0].text) :]):
                return m.group(0).strip()
    if sentence and (m := _DOUBT.search(sentence)):
        return m.group(0)
    if sentence and (m := _QUESTION.search(sentence)):
        return f"a question ({m.group(0).strip()})"
    return ""
