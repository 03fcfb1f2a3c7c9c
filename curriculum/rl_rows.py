"""Which train rows tiering and GRPO draw from (`curriculum.rl_rows`, `curriculum.max_rows`).

SFT trains on the rows with a solution. Tiering those same rows measures memory, not skill: the SFT
model reproduces their gold, tiering calls them learnable or too easy, and GRPO's training reward then
rises on prompts it has memorized while held-out pass@1 stays put. So by default GRPO learns from the
rows SFT never saw, the outcome-only rows (a gold answer, no worked reply):

    unseen   rows with an empty solution; an error when there are none
    all      every train row; `sft_rows_in_pool` says how many SFT trained on too
    auto     unseen when at least MIN_UNSEEN_SHARE of the train rows are outcome only, else all

`max_rows` then keeps a seeded sample (the lowest hashes of seed and id, so the same rows for any
chunking or runner).
"""

from __future__ import annotations

import hashlib

MIN_UNSEEN_SHARE = 0.1


def _has_solution(df):
    """Whether SFT trains on each row: the same test as training.sft's (a solution that is not blank)."""
    import polars as pl

    if "solution" not in df.columns:
        return pl.Series([False] * df.height)
    return pl.Series([bool(s is not None and str(s).strip()) for s in df["solution"].to_list()], dtype=pl.Boolean)


def rl_pool(train_df, mode: str, max_rows: int | None, seed: int):
    """(rows, info): the train rows tiering and GRPO use under `mode`, and what was chosen and why."""
    seen = _has_solution(train_df)
    n, n_seen = train_df.height, int(seen.sum())
    unseen = n - n_seen
    chosen = mode
    if mode == "auto":
        chosen = "unseen" if unseen and unseen >= MIN_UNSEEN_SHARE * n else "all"
    if chosen == "unseen" and unseen == 0:
        raise ValueError(
            f"curriculum.rl_rows=unseen, but all {n} train rows have a solution (SFT trains on "
            "every one): log rows with only their outcome, or set curriculum.rl_rows: all"
        )
    pool = train_df.filter(~seen) if chosen == "unseen" else train_df
    capped_from = None
    if max_rows is not None and pool.height > max_rows:
        keys = [hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in pool["id"].to_list()]
        order = sorted(range(pool.height), key=keys.__getitem__)[:max_rows]
        capped_from, pool = pool.height, pool[sorted(order)]
    overlap = int(_has_solution(pool).sum())
    info = {
        "rl_rows": chosen,
        "requested": mode,
        "train_rows": n,
        "outcome_only_rows": unseen,
        "pool_rows": pool.height,
        "sft_rows_in_pool": overlap,
        "capped_from": capped_from,
    }
    return pool, info


def describe(info: dict) -> str:
    """One line for the console: where GRPO's prompts come from, and any overlap with SFT said plainly."""
    cap = f", a sample of {info['capped_from']} (curriculum.max_rows)" if info["capped_from"] else ""
    left = info.get("episode_rows_left_out")
    episodes = f"; {left} episode rows left out (DPO pairs single replies; GRPO plays episodes)" if left else ""
    if info["sft_rows_in_pool"]:
        return (
            f"tiering and GRPO use {info['pool_rows']} train rows{cap}; {info['sft_rows_in_pool']} of them are "
            f"rows SFT trained on (curriculum.rl_rows={info['requested']}: {info['rl_rows']}), so their "
            f"tiers partly measure memory{episodes}"
        )
    return (
        f"tiering and GRPO use {info['pool_rows']} outcome-only train rows{cap}, none of which SFT trained on "
        f"({info['train_rows'] - info['outcome_only_rows']} rows with a solution are SFT's){episodes}"
    )
