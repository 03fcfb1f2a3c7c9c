"""The held-out split: a deterministic train/eval assignment by a hash of (seed, id), per category.

Within each category, rows are ordered by `sha256(f"{seed}:{id}")`; the first round(fraction * size)
become `eval` (at least one when the category has two or more rows and fraction > 0, and never the
whole category), the rest `train`. The same ids and seed always give the same split, and adding rows
moves few existing ones.
"""

from __future__ import annotations

import hashlib


def _unit_hash(seed: int, row_id: str) -> float:
    digest = hashlib.sha256(f"{seed}:{row_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def eval_count(size: int, fraction: float) -> int:
    """How many of a category's `size` rows are held out."""
    if size < 2 or fraction <= 0:
        return 0
    return min(size - 1, max(1, round(fraction * size)))


def assign_split(df, eval_fraction: float, seed: int):
    """Add `split` in {train, eval} to a polars frame with `id` and `category` (ids must be unique)."""
    import polars as pl

    if not 0 <= eval_fraction < 1:
        raise ValueError(f"assign_split: eval_fraction={eval_fraction} must be in [0, 1), e.g. 0.15")
    for col in ("id", "category"):
        if col not in df.columns:
            raise ValueError(
                f"assign_split: the frame has no '{col}' column; it needs the row schema's id and category"
            )
    dup = df["id"].is_duplicated()
    if dup.any():
        first = df.filter(dup)["id"][0]
        raise ValueError(f"assign_split: id '{first}' appears more than once; dedup rows before splitting")
    keyed = df.with_columns(
        pl.Series("_h", [_unit_hash(seed, str(i)) for i in df["id"]], dtype=pl.Float64),
        pl.int_range(pl.len()).alias("_row"),
    )
    ranked = keyed.with_columns(
        pl.col("_h").rank("ordinal").over("category").alias("_rank"),
        pl.len().over("category").alias("_size"),
    )
    sizes = ranked["_size"].to_list()
    ranks = ranked["_rank"].to_list()
    split = ["eval" if r <= eval_count(s, eval_fraction) else "train" for r, s in zip(ranks, sizes)]
    return ranked.with_columns(pl.Series("split", split)).sort("_row").drop("_h", "_row", "_rank", "_size")
