"""Scoring completions with the rows' verifiers, in parallel processes, for GRPO rewards and eval.

A `Task` is what a completion is judged against: the row's verifier name, reference and parsed
`verifier_params`. `score_groups` flattens groups of completions into `verifiers.score_many` items
(one process pool call per batch, order preserved) and folds the verdicts back into groups.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One prompt and how to check an answer to it (from a DESIGN.md row)."""

    id: str
    category: str
    prompt: str
    verifier: str
    reference: str
    params: dict

    @classmethod
    def from_row(cls, row: dict) -> "Task":
        raw = row.get("verifier_params") or "{}"
        try:
            params = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"row {row.get('id')!r}: verifier_params is not valid JSON ({exc}); "
                "it must be a JSON object string as written by verifiers.attach"
            ) from exc
        return cls(
            id=str(row["id"]),
            category=str(row.get("category") or ""),
            prompt=str(row["prompt"]),
            verifier=str(row["verifier"]),
            reference=str(row["reference"]),
            params=params,
        )


def tasks_from_df(df) -> list[Task]:
    """Tasks of every row of a polars frame with the DESIGN.md columns."""
    missing = [c for c in ("id", "prompt", "verifier", "reference") if c not in df.columns]
    if missing:
        raise ValueError(
            f"rows lack column(s) {missing}; training needs rows that went through verifiers.attach "
            "(id, prompt, reference, verifier, verifier_params)"
        )
    return [Task.from_row(r) for r in df.iter_rows(named=True)]


def score_groups(
    tasks: list[Task], groups: list[list[str]], workers: int | None, timeout_s: float = 30.0
) -> list[list]:
    """Verdicts for groups[i][j] (a response text) against tasks[i], via `verifiers.score_many` with
    `workers` processes (None: every core; 0: in this process) and a `timeout_s` deadline per item
    (the spec's verifiers.timeout_s)."""
    from rlvrflow.verifiers import score_many

    items = [(t.verifier, text, t.reference, t.params) for t, g in zip(tasks, groups) for text in g]
    flat = score_many(items, workers=workers, timeout_s=timeout_s) if items else []
    out, at = [], 0
    for g in groups:
        out.append(list(flat[at : at + len(g)]))
        at += len(g)
    return out


def rewards_for(verdicts: list[list], texts: list[list[str]], n_tokens: list[list[int]], reward_cfg) -> list[list]:
    """`verifiers.reward` parts for every completion, grouped like the input."""
    from rlvrflow.verifiers.shaping import reward

    return [
        [reward(v, t, n, reward_cfg) for v, t, n in zip(vg, tg, ng)] for vg, tg, ng in zip(verdicts, texts, n_tokens)
    ]
