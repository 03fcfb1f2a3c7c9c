"""Answer collapse: a model that gives one answer string to most of a set of held-out prompts (all of
them, or one category's) where that answer is mostly wrong, read from an eval's greedy answers.

    c = collapsed_answers(result["by_prompt"])   # training.eval's per-prompt answers and categories
    if c: print(collapse_line("step_000180", c))

The run doctor's `answer_collapse` rule (training/doctor_rules.py) and report.json's warnings
(flows/report.py) both call this, so they say the same thing. Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# One answer string on at least half of a set of held-out prompts (all of them, or one
# category's), wrong on most of them. A model that learned a category whose golds are skewed gives its
# frequent answer where it is right; one that gives it where it is mostly wrong answers regardless of
# the question. Sets of fewer prompts are not judged (a share of one string that chance can reach).
COLLAPSE_SHARE = 0.5
COLLAPSE_MIN_PROMPTS = 20  # all held-out prompts
COLLAPSE_MIN_CATEGORY = 10  # one category's
COLLAPSE_CRITICAL = 0.5  # collapsed sets that cover half the held-out prompts or more: the finding is critical


@dataclass(frozen=True)
class Collapsed:
    """One set of held-out prompts (`where`: "all prompts" or a category) answered with one string."""

    where: str
    answer: str
    count: int  # prompts given that answer
    prompts: int  # prompts in the set
    right: int  # ... of which the answer was right


@dataclass(frozen=True)
class Collapse:
    """What `collapsed_answers` found in one model's held-out greedy answers."""

    sets: tuple[Collapsed, ...]
    prompts: int  # held-out prompts
    covered: int  # prompts inside the collapsed sets
    hits: int  # prompts the model got right
    hits_from_constant: int  # ... inside a collapsed set, with its one answer
    distinct: dict[str, tuple[int, int]]  # category -> (distinct answers, prompts)

    @property
    def critical(self) -> bool:
        return self.covered >= COLLAPSE_CRITICAL * self.prompts


def _one_answer(where: str, said: list[str], right: list[int], minimum: int) -> Collapsed | None:
    """The set's most frequent non-empty answer when it is on COLLAPSE_SHARE of at least `minimum`
    prompts and wrong on most of them."""
    counts: dict[str, int] = {}
    for a in said:
        if a:
            counts[a] = counts.get(a, 0) + 1
    if len(said) < minimum or not counts:
        return None
    top, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    hit = sum(r for r, a in zip(right, said) if a == top)
    return Collapsed(where, top, n, len(said), hit) if n >= COLLAPSE_SHARE * len(said) and 2 * hit < n else None


def collapsed_answers(by_prompt: dict | None) -> Collapse | None:
    """One model's collapse to one answer, read from its eval's `by_prompt` (`answers`, `greedy`,
    `categories`): over all prompts, else per category; None when no set collapsed or without answers."""
    answers = (by_prompt or {}).get("answers")
    if not answers:
        return None
    said = [str(a).strip() for a in answers]
    right = [int(x) for x in by_prompt.get("greedy") or [0] * len(said)]
    cats = [str(c) for c in by_prompt.get("categories") or ["all"] * len(said)]
    by_cat: dict[str, list[int]] = {}
    for i, c in enumerate(cats):
        by_cat.setdefault(c, []).append(i)
    whole = _one_answer("all prompts", said, right, COLLAPSE_MIN_PROMPTS)
    if whole is not None:
        sets, inside = (whole,), range(len(said))
    else:
        sets = tuple(
            x
            for c, idx in sorted(by_cat.items())
            if (x := _one_answer(c, [said[i] for i in idx], [right[i] for i in idx], COLLAPSE_MIN_CATEGORY))
        )
        inside = [i for x in sets for i in by_cat[x.where]]
    if not sets:
        return None
    constant = {x.where: x.answer for x in sets}
    from_constant = sum(right[i] for i in inside if said[i] == constant.get("all prompts", constant.get(cats[i])))
    return Collapse(
        sets,
        len(said),
        len(inside),
        sum(right),
        from_constant,
        {c: (len({said[i] for i in idx}), len(idx)) for c, idx in sorted(by_cat.items())},
    )


def collapse_line(name: str, c: Collapse) -> str:
    """`step_000180 answers '2' on 25 of 25 gcd prompts (8 right), ...; 9 of its 12 right answers are those`."""
    parts = [
        f"{_clip(x.answer)!r} on {x.count} of {x.prompts} {'held-out' if x.where == 'all prompts' else x.where} "
        f"prompts ({x.right} right)"
        for x in c.sets
    ]
    return (
        f"{name} answers {', '.join(parts)}; {c.hits_from_constant} of its {c.hits} right answers on the "
        f"{c.prompts} held-out prompts are those"
    )


def _clip(text: str, limit: int = 40) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."
