"""Duplicate removal on the cleaned question: exact, then near-duplicates. The first row is kept.

Exact: the key is the question lowercased, without whitespace and trailing sentence punctuation,
so "What is 1+1?" and "what is 1 + 1" collide; other punctuation and symbols stay (1+1 != 1-1).

Near: MinHash LSH from `datasketch` on character 5-grams of that key. Why datasketch: it is a
small, mature, pure-Python/numpy library (already a dependency) whose LSH index finds candidate
pairs in about linear time, where pairwise fuzzy matching (rapidfuzz) is quadratic; character
shingles work for Chinese text without a word segmenter; text-dedup or Data-Juicer would bring a
whole framework for one step. LSH only proposes candidates: a pair is a duplicate when the exact
Jaccard similarity of the two shingle sets reaches `threshold` AND both questions contain the
same numbers AND both rows have the same (normalized) reference: templated questions that differ
in one number ("12 apples" / "13 apples") or one name that changes the answer ("the Hangzhou
store" / "the Guangzhou store", different gold SQL) are different problems.
"""

from __future__ import annotations

import re
import time
import zlib

import polars as pl

from .config import DedupConfig
from .stage import StageResult, make_stats, reject_frame

__all__ = ["dedup", "dedup_key", "SHINGLE"]

SHINGLE = 5
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def dedup_key(question: pl.Expr) -> pl.Expr:
    """The normalized text exact duplicates are found on."""
    return (
        question.str.to_lowercase().str.replace_all("[ \\t\\n\\u00A0\\u3000]+", "").str.replace_all("[.?!。？！]+$", "")
    )


def _shingles(key: str) -> set[str]:
    if len(key) <= SHINGLE:
        return {key}
    return {key[i : i + SHINGLE] for i in range(len(key) - SHINGLE + 1)}


def _near_duplicates(keys: list[str], answers: list[str], cfg: DedupConfig) -> dict[int, tuple[int, float]]:
    """Row index -> (index of the kept row it duplicates, Jaccard similarity)."""
    from datasketch import MinHash, MinHashLSH

    shingles = [_shingles(k) for k in keys]
    numbers = [_NUMBER.findall(k) for k in keys]
    # crc32 instead of datasketch's default sha1: ~10x cheaper per shingle, and 32 bits either way
    hashes = MinHash.bulk(
        [[s.encode("utf-8") for s in sh] for sh in shingles], num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=zlib.crc32
    )
    lsh = MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm)
    found: dict[int, tuple[int, float]] = {}
    for i, mh in enumerate(hashes):
        best: tuple[int, float] | None = None
        for cand in lsh.query(mh):
            j = int(cand)
            if numbers[j] != numbers[i] or answers[j] != answers[i]:
                continue  # another number or another answer: another problem
            sim = len(shingles[i] & shingles[j]) / len(shingles[i] | shingles[j])
            if sim >= cfg.threshold and (best is None or sim > best[1] or (sim == best[1] and j < best[0])):
                best = (j, sim)
        if best is None:
            lsh.insert(str(i), mh)
        else:
            found[i] = best
    return found


def _exact(work: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows whose key is new, rejected repeats)."""
    work = work.with_columns(
        pl.col("id").first().over("_key").alias("_first_id"), pl.col("source").first().over("_key").alias("_first_src")
    )
    dup = pl.col("_key").is_first_distinct().not_()
    detail = pl.format("same normalized question as row {} ({})", pl.col("_first_id"), pl.col("_first_src"))
    return work.filter(~dup), reject_frame(work.filter(dup), "dedup", "duplicate_exact", detail)


def _near(work: pl.DataFrame, cfg: DedupConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows kept, rejected near-duplicates, each naming the kept row it resembles)."""
    found = _near_duplicates(work["_key"].to_list(), work["_answer"].to_list(), cfg)
    idx = sorted(found)
    ids, srcs = work["id"].to_list(), work["source"].to_list()
    details = [f"{found[i][1]:.2f} similar to row {ids[found[i][0]]} ({srcs[found[i][0]]}), same answer" for i in idx]
    mask = pl.repeat(False, work.height, dtype=pl.Boolean, eager=True).scatter(idx, True)
    rejected = reject_frame(work.filter(mask), "dedup", "duplicate_near", pl.Series(details, dtype=pl.String))
    return work.filter(~mask), rejected


def dedup(df: pl.DataFrame, cfg: DedupConfig) -> StageResult:
    """Remove exact and near duplicate questions (rows need `id`, `question`, `source`; `reference`
    is used when present)."""
    start = time.perf_counter()
    answer = dedup_key(pl.col("reference")) if "reference" in df.columns else pl.lit("")
    work = df.with_row_index("_row").with_columns(dedup_key(pl.col("question")).alias("_key"), answer.alias("_answer"))
    rejects = []
    if cfg.exact and work.height:
        work, rejected = _exact(work)
        rejects.append(rejected)
    if cfg.near and work.height > 1:
        work, rejected = _near(work, cfg)
        rejects.append(rejected)
    helper = ["_row", "_key", "_answer", "_first_id", "_first_src"]
    kept = work.drop([c for c in helper if c in work.columns])
    rej = pl.concat(rejects, how="diagonal_relaxed") if rejects else reject_frame(work.clear(), "dedup", "", "")
    rej = rej.sort("_row").drop([c for c in helper if c in rej.columns])
    return StageResult(kept, rej, make_stats(df.height, kept, rej, time.perf_counter() - start))
