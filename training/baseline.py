"""The constant baseline: the best constant answer per category, scored on the held-out prompts.

A policy that writes one answer to everything can show a "gain" over a weak start: when a third of
the gcd golds are `2`, `Answer: 2` is right on a third of the gcd prompts. So the eval matrix gets a
row that does exactly that, honestly: each category's constant is picked on the TRAINING split (the
top `candidates` most frequent golds, the one right on most training rows of the category), then
scored with the same verifiers on the same held-out tasks the models were evaluated on.

    result = constant_baseline(train_rows, select_eval_tasks(eval_df, cfg), workers=4)

The result has the fields of a `training.evaluate` result that make sense for a constant (pass@1,
pass@k and format rate, `by_prompt` for paired intervals, `per_category`) plus `constants`
({category: the response}); lengths and stability are None. A category whose verifier cannot write
its gold as an answer (keyword, regex, json, code: a rubric, verifiers.canary.render_constant) gets
no constant and scores 0 there. Bad golds never raise: a constant
that no verifier reads just scores 0.
"""

from __future__ import annotations

import random
from typing import Sequence

NAME = "constant"


def pick_constants(
    train_rows: Sequence[dict],
    candidates: int = 3,
    max_rows: int = 200,
    seed: int = 0,
    workers: int | None = None,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """{category: response}: per category, among the `candidates` most frequent training golds, the
    rendered constant right on most of (a seeded sample of up to `max_rows`) training rows."""
    from rlvrflow.training.scoring import Task
    from rlvrflow.verifiers.canary import render_constant, top_golds
    from rlvrflow.verifiers.pool import score_many

    by_cat: dict[str, list[Task]] = {}
    for row in train_rows:
        task = row if isinstance(row, Task) else Task.from_row(row)
        by_cat.setdefault(task.category, []).append(task)
    out = {}
    for cat, tasks in sorted(by_cat.items()):
        sample = sorted(tasks, key=lambda t: t.id)
        random.Random(f"{seed}:{cat}").shuffle(sample)
        sample = sample[:max_rows]
        options = [
            render_constant(tasks[0].verifier, g) for g, _ in top_golds([t.reference for t in tasks], candidates)
        ]
        options = [o for o in options if o.strip()]  # a rubric (keyword, json, code) is no answer to repeat
        if not options:
            continue
        verdicts = score_many(
            [(t.verifier, o, t.reference, t.params) for o in options for t in sample],
            workers=workers,
            timeout_s=timeout_s,
        )
        hits = [
            sum(v.score > 0 for v in verdicts[i * len(sample) : (i + 1) * len(sample)]) for i in range(len(options))
        ]
        out[cat] = options[max(range(len(options)), key=lambda i: (hits[i], -i))]
    return out


def constant_baseline(
    train_rows: Sequence[dict],
    eval_tasks: Sequence,
    candidates: int = 3,
    seed: int = 0,
    workers: int | None = None,
    timeout_s: float = 30.0,
) -> dict:
    """The constant baseline's eval result on `eval_tasks` (see the module docstring)."""
    from rlvrflow.verifiers.pool import score_many

    constants = pick_constants(train_rows, candidates, seed=seed, workers=workers, timeout_s=timeout_s)
    verdicts = score_many(
        [(t.verifier, constants.get(t.category, ""), t.reference, t.params) for t in eval_tasks],
        workers=workers,
        timeout_s=timeout_s,
    )
    return score_constants(eval_tasks, constants, [v.status for v in verdicts])


def score_constants(eval_tasks: Sequence, constants: dict[str, str], statuses: Sequence[str]) -> dict:
    """The result dict from each task's verdict status (pure; `constant_baseline` scores them)."""
    n = len(eval_tasks)
    if n == 0:
        raise ValueError("constant_baseline: no eval prompts; check that the split produced rows with split == 'eval'")
    ok = [s == "correct" for s in statuses]
    per_cat: dict[str, list[int]] = {}
    for t, good in zip(eval_tasks, ok):
        per_cat.setdefault(t.category, []).append(int(good))
    rate = sum(ok) / n
    return {
        "name": NAME,
        "model": None,
        "constants": dict(constants),
        "n_prompts": n,
        "k": None,
        "pass_at_1_greedy": rate,
        "pass_at_1_sampled": rate,
        "pass_at_k": rate,
        "format_rate": sum(s in ("correct", "wrong") for s in statuses) / n,
        "length_mean": None,
        "length_p90": None,
        "per_prompt_variance": 0.0,
        "zero_variance_prompts": 1.0,
        "per_category": {
            c: {"n": len(v), "pass_at_1_greedy": sum(v) / len(v), "pass_at_1_sampled": sum(v) / len(v)}
            for c, v in sorted(per_cat.items())
        },
        "by_prompt": {
            "ids": [t.id for t in eval_tasks],
            "greedy": [int(g) for g in ok],
            "sampled": [float(g) for g in ok],
        },
    }
