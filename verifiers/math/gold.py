"""The gold's own answer: a reference may carry a marker or boxes like a response does.

A reference with several different boxed answers (`\\boxed{1} and \\boxed{-2}`) means all of
them, a set, except boxes a later one takes back (`\\boxed{1} no no \\boxed{2}` is 2, while
`\\boxed{1} papers and \\boxed{2} bins` is both). A last `\\boxed{` never closed runs to the end
of the gold (a typo in the data; a response cut off inside a box is not read so: its answer may be
incomplete, `\\boxed{12` of `\\boxed{125}`).
"""

from __future__ import annotations

import re

from .extract import _BOXED, _boxed_at, brace_pairs, braced, extract

_GOLD_RETRACTION = re.compile(
    r"(?<![A-Za-z])(?:no|not|wrong|incorrect|actually)(?![A-Za-z])|不对|错了|不是", re.IGNORECASE
)


def extract_gold(reference: str) -> str:
    """The answer `reference` holds (see the module docstring): what its marker or boxes give
    (`答案: 36`, `\\boxed{36}`), else the whole reference."""
    opened = [m.end() for m in _BOXED.finditer(reference) if reference[m.end() : m.end() + 1] == "{"]
    if opened and braced(reference, opened[-1]) is None:
        reference += "}"  # a gold's last box never closed is a typo: it runs to the end
    got = extract(reference, final_sentence_levels=False)
    if got.level in ("marker", "boxed", "answer") and got.answer:
        boxed = [b.strip() for b in _boxes_kept(reference) if b.strip()]
        if got.level == "boxed" and len(set(boxed)) > 1:
            return "\\{" + ", ".join(dict.fromkeys(boxed)) + "\\}"
        return boxed[-1] if got.level == "boxed" and boxed else got.answer
    return reference.strip()


def _boxes_kept(reference: str) -> list[str]:
    """A gold's boxes, less those a later retraction takes back: `\\boxed{1} no no \\boxed{2}`
    is 2, while `\\boxed{1} papers and \\boxed{2} bins` is both."""
    pairs = brace_pairs(reference)
    boxes = []  # (start, end, content)
    for m in _BOXED.finditer(reference):
        if (got := _boxed_at(reference, m.start(), pairs)) is not None:
            boxes.append((m.start(), pairs.get(m.end(), m.end() + len(got)) + 1, got))
    kept = boxes
    for (_, end, _), nxt in zip(boxes, boxes[1:]):
        if _GOLD_RETRACTION.search(reference[end : nxt[0]]):
            kept = [b for b in boxes if b[0] >= nxt[0]]
    return [got for _, _, got in kept]
