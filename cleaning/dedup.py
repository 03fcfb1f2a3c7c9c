"""Duplicate removal on the cleaned question: exact, then near-duplicates. The first row is kept.

Exact: the key is the question lowercased, without whitespace and trailing sentence punctuation,
so "What is 1+1?" and "what is 1 + 1" collide; other punctuation and symbols stay (1+1 != 1-1).

Near: MinHash LSH from `datasketch` on character 5-grams of that key. Why datasketch: it is a
small, mature, pure-Python/numpy library (already a dependency) whose LSH index finds candidate
pairs in about linear time, where pairwise fuzzy matching (rapidfuzz) is quadratic; character
shingles work for Chinese text without a word segmenter; text-dedup or Data-Juicer would bring a
whole framework for one step. LSH only proposes candidates: a pair is a duplicate when the exact
Jaccard similarity of the two shingle sets reaches `threshold` AND both questions contain the
same numbers, because templated questions that differ in one number ("12 apples" / "13 apples")
are different problems with different references.
"""
from __future__ import annotations

import re
import time

import polars as pl

from .config import DedupConfig
from .stage import StageResult, make_stats, reject_frame

__all__ = ["dedup", "dedup_key", "SHINGLE"]

SHINGLE = 5
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def dedup_key(question: pl.Expr) -> pl.Expr:
    """The normalized text exact duplicates are found on."""
    return (question.str.to_lowercase()
            .str.replace_all("[ \\t\\n\\u00A0\\u3000]+", "")
            .str.replace_all("[.?!。？！]+$", ""))


def _shingles(key: str) -> set[str]:
    if len(key) <= SHINGLE:
        return {key}
    return {key[i:i + SHINGLE] for i in range(len(key) - SHINGLE + 1)}


def _near_duplicates(keys: list[str], cfg: DedupConfig) -> dict[int, tuple[int, float]]:
    """Row index -> (index of the kept row it duplicates, Jaccard similarity)."""
    from datasketch import MinHash, MinHashLSH

    shingles = [_shingles(k) for k in keys]
    numbers = [_NUMBER.findall(k) for k in keys]
    hashes = MinHash.bulk([[s.encode("utf-8") for s in sh] for sh in shingles],
                          num_perm=cfg.num_perm, seed=cfg.seed)
    lsh = MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm)
    found: dict[int, tuple[int, float]] = {}
    for i, mh in enumerate(hashes):
        best: tuple[int, float] | None = None
        for cand in lsh.query(mh):
            j = int(cand)
            if numbers[j] != numbers[i]:
                continue
            sim = len(shingles[i] & shingles[j]) / len(shingles[i] | shingles[j])
            if sim >= cfg.threshold and (best is None or sim > best[1] or (sim == best[1] and j < best[0])):
                best = (j, sim)
        if best is None:
            lsh.insert(str(i), mh)
        else:
            found[i] = best
    return found


def dedup(df: pl.DataFrame, cfg: DedupConfig) -> StageResult:
    """Remove exact and near duplicate questions (rows need `id`, `question`, `source`)."""
    start = time.perf_counter()
    work = df.with_row_index("_row").with_columns(dedup_key(pl.col("question")).alias("_key"))
    rejects = []
    if cfg.exact and work.height:
        work = work.with_columns(pl.col("id").first().over("_key").alias("_first_id"),
                                 pl.col("source").first().over("_key").alias("_first_src"))
        dup = pl.col("_key").is_first_distinct().not_()
        detail = pl.format("same normalized question as row {} ({})", pl.col("_first_id"), pl.col("_first_src"))
        rejects.append(reject_frame(work.filter(dup), "dedup", "duplicate_exact", detail))
        work = work.filter(~dup)
    if cfg.near and work.height > 1:
        found = _near_duplicates(work["_key"].to_list(), cfg)
        if found:
            idx = sorted(found)
            ids, srcs = work["id"].to_list(), work["source"].to_list()
            details = [f"{found[i][1]:.2f} similar to row {ids[found[i][0]]} ({srcs[found[i][0]]})" for i in idx]
            near = work[idx]
            rejects.append(reject_frame(near, "dedup", "duplicate_near", pl.Series(details, dtype=pl.String)))
            mask = pl.repeat(False, work.height, dtype=pl.Boolean, eager=True).scatter(idx, True)
            work = work.filter(~mask)
    helper = ["_row", "_key", "_first_id", "_first_src"]
    kept = work.drop([c for c in helper if c in work.columns])
    rej = pl.concat(rejects, how="diagonal_relaxed") if rejects else reject_frame(df.clear(), "dedup", "", "")
    rej = rej.sort("_row").drop([c for c in helper if c in rej.columns]) if rej.height else rej.drop(
        [c for c in helper if c in rej.columns])
    return StageResult(kept, rej, make_stats(df.height, kept, rej, time.perf_counter() - start))
