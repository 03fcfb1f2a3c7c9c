"""Dedup in passes over hashes on disk: the same decisions as dedup.py, with memory bounded by a shard.

Each chunk of cleaned rows writes, per row (`_row`: a 64-bit position that sorts like the input):

    exact/<shard>/<chunk>.parquet   h1, h2 (128 bits of the normalized question), _row, id, source
    bands/<shard>/<chunk>.parquet   bucket, _row: one entry per LSH band (datasketch's bands of the
                                    same MinHash), the bucket hashed with the row's numbers and answer
    keys/<chunk>.parquet            _row, _key, id, source (read back only for candidate pairs)

The shard of an entry is its hash modulo `shards`, so equal keys and equal buckets meet in one
shard and every shard is resolved on its own (one task each, on any worker):

    exact_shard    the first row of each key stays; later rows are `duplicate_exact` of it
    pairs_shard    rows sharing a bucket (exact duplicates left out) -> candidate pairs (i > j)
    resolve_near   candidate pairs -> exact Jaccard of the 5-gram sets -> the same greedy choice as
                   dedup._near_duplicates: row i (in input order) is a duplicate of the most similar
                   earlier row j that is itself kept; ties go to the earlier j

Why equal: datasketch's LSH query returns the inserted rows that share at least one band with the
row, and dedup.py then drops candidates whose numbers or answer differ. A bucket here is a band
together with the numbers and answer, so rows meet in a bucket exactly when they would survive
that filter (up to 64-bit hash collisions, which the Jaccard check would still have to pass).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import polars as pl

from .config import DedupConfig
from .dedup import _NUMBER, _shingles, dedup_key

__all__ = ["write_signatures", "exact_shard", "pairs_shard", "resolve_near", "band_layout"]

SIGNATURE_BATCH = 10_000
MAX_CACHED_SETS = 20_000
_MIX = np.random.default_rng(20260101).integers(1, 2**63, size=1024, dtype=np.uint64) | np.uint64(1)


def band_layout(cfg: DedupConfig) -> list[tuple[int, int]]:
    """datasketch's (start, end) hash ranges for this threshold and num_perm."""
    from datasketch import MinHashLSH

    return list(MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm).hashranges)


def _hash2(values: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    return values.hash(seed=0).to_numpy(), values.hash(seed=1).to_numpy()


def _write(path: Path, df: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(path)


def _by_shard(work: Path, kind: str, name: str, df: pl.DataFrame, on: str, shards: int) -> None:
    df = df.with_columns((pl.col(on) % shards).alias("_shard"))
    for (shard,), part in df.partition_by("_shard", as_dict=True).items():
        _write(work / kind / f"{shard:04d}" / f"{name}.parquet", part.drop("_shard"))


def _buckets(keys: list[str], answers: list[str], rows: np.ndarray, cfg: DedupConfig) -> pl.DataFrame:
    """One (bucket, _row) per row and band: band values, band number, numbers and answer, hashed."""
    from datasketch import MinHash

    sigs = np.zeros((len(keys), cfg.num_perm), dtype=np.uint64)  # (N, num_perm)
    for lo in range(0, len(keys), SIGNATURE_BATCH):  # the shingle lists cost ~4 KB a row: a batch at a time
        sets = [[s.encode("utf-8") for s in _shingles(k)] for k in keys[lo : lo + SIGNATURE_BATCH]]
        for i, m in enumerate(MinHash.bulk(sets, num_perm=cfg.num_perm, seed=cfg.seed, hashfunc=zlib.crc32)):
            sigs[lo + i] = m.hashvalues
    problem = (
        pl.Series(["\x00".join(_NUMBER.findall(k)) + "\x01" + a for k, a in zip(keys, answers)], dtype=pl.String)
        .hash(seed=2)
        .to_numpy()
    )  # (N,)
    out = []
    with np.errstate(over="ignore"):
        for band, (start, end) in enumerate(band_layout(cfg)):
            mixed = (sigs[:, start:end] * _MIX[start:end]).sum(axis=1)  # (N,) mod 2**64
            bucket = mixed ^ (problem * _MIX[-1 - band]) ^ np.uint64(band)
            out.append(pl.DataFrame({"bucket": bucket, "_row": rows}))
    return pl.concat(out) if out else pl.DataFrame(schema={"bucket": pl.UInt64, "_row": pl.UInt64})


def write_signatures(
    work: Path, name: str, kept: pl.DataFrame, rows: np.ndarray, cfg: DedupConfig, shards: int
) -> None:
    """Write one chunk's exact entries, band buckets and keys (see the module docstring)."""
    keys = kept.select(
        dedup_key(pl.col("question")).alias("_key"), dedup_key(pl.col("reference")).alias("_answer"), "id", "source"
    )
    row = pl.Series("_row", rows, dtype=pl.UInt64)
    if cfg.exact:
        h1, h2 = _hash2(keys["_key"])
        entries = pl.DataFrame({"h1": h1, "h2": h2}).with_columns(row, keys["id"], keys["source"])
        _by_shard(work, "exact", name, entries, "h1", shards)
    if cfg.near:
        buckets = _buckets(keys["_key"].to_list(), keys["_answer"].to_list(), rows, cfg)
        _by_shard(work, "bands", name, buckets, "bucket", shards)
        _write(work / "keys" / f"{name}.parquet", keys.select(row, "_key", "id", "source"))


def _scan(folder: Path) -> pl.LazyFrame | None:
    files = sorted(folder.glob("*.parquet"))
    return pl.scan_parquet(files) if files else None


def exact_shard(work: str, shard: int) -> int:
    """Resolve one shard of exact entries into exact_out/<shard>.parquet (_row, detail); returns
    how many rows it rejects."""
    work_dir = Path(work)
    scan = _scan(work_dir / "exact" / f"{shard:04d}")
    dups = pl.DataFrame(schema={"_row": pl.UInt64, "detail": pl.String})
    if scan is not None:
        first = pl.col("_row") == pl.col("_row").min().over(["h1", "h2"])
        ordered = scan.with_columns(
            pl.col("id").sort_by("_row").first().over(["h1", "h2"]).alias("_fid"),
            pl.col("source").sort_by("_row").first().over(["h1", "h2"]).alias("_fsrc"),
        )
        dups = (
            ordered.filter(~first)
            .select("_row", pl.format("same normalized question as row {} ({})", "_fid", "_fsrc").alias("detail"))
            .collect()
        )
    _write(work_dir / "exact_out" / f"{shard:04d}.parquet", dups)
    return dups.height


def _exact_rows(work: Path) -> pl.Series:
    scan = _scan(work / "exact_out")
    return scan.select("_row").collect()["_row"] if scan is not None else pl.Series("_row", [], pl.UInt64)


def pairs_shard(work: str, shard: int) -> int:
    """Candidate pairs (i > j sharing a bucket, neither an exact duplicate) of one shard into
    pairs/<shard>.parquet; returns how many."""
    work_dir = Path(work)
    scan = _scan(work_dir / "bands" / f"{shard:04d}")
    pairs = pl.DataFrame(schema={"i": pl.UInt64, "j": pl.UInt64})
    if scan is not None:
        live = scan.filter(~pl.col("_row").is_in(_exact_rows(work_dir).implode()))
        shared = live.filter(pl.len().over("bucket") > 1).collect()
        pairs = (
            shared.join(shared, on="bucket", suffix="_j")
            .filter(pl.col("_row") > pl.col("_row_j"))
            .select(pl.col("_row").alias("i"), pl.col("_row_j").alias("j"))
            .unique()
        )
    _write(work_dir / "pairs" / f"{shard:04d}.parquet", pairs)
    return pairs.height


def _similar_pairs(work: Path, cfg: DedupConfig) -> tuple[dict[int, list[tuple[int, float]]], dict]:
    """i -> [(j, Jaccard)] for the candidate pairs at or above the threshold; and _row -> (id, source)
    of the rows in them. Shingle sets (~10 KB a row) are cached for at most MAX_CACHED_SETS rows."""
    scan = _scan(work / "pairs")
    pairs = scan.unique().sort(["i", "j"]).collect() if scan is not None else pl.DataFrame()
    if not pairs.height:
        return {}, {}
    needed = pl.concat([pairs["i"], pairs["j"]]).unique()
    keys = _scan(work / "keys").filter(pl.col("_row").is_in(needed.implode())).collect()
    key_of = dict(zip(keys["_row"].to_list(), keys["_key"].to_list()))
    who = dict(zip(keys["_row"].to_list(), zip(keys["id"].to_list(), keys["source"].to_list())))
    del keys
    cache: dict[int, set[str]] = {}

    def sets(r: int) -> set[str]:
        if r not in cache:
            if len(cache) >= MAX_CACHED_SETS:
                cache.clear()
            cache[r] = _shingles(key_of[r])
        return cache[r]

    similar: dict[int, list[tuple[int, float]]] = {}
    for i, j in zip(pairs["i"].to_list(), pairs["j"].to_list()):
        a, b = sets(i), sets(j)
        sim = len(a & b) / len(a | b)
        if sim >= cfg.threshold:
            similar.setdefault(i, []).append((j, sim))
    return similar, who


def resolve_near(work: str, cfg: DedupConfig) -> int:
    """The greedy near-duplicate choice over all candidate pairs into near_out.parquet (_row,
    detail); returns how many rows it rejects."""
    work_dir = Path(work)
    similar, who = _similar_pairs(work_dir, cfg)
    found: dict[int, tuple[int, float]] = {}
    for i in sorted(similar):
        best: tuple[int, float] | None = None
        for j, sim in similar[i]:
            if j in found:
                continue  # a near duplicate was never inserted into the index
            if best is None or sim > best[1] or (sim == best[1] and j < best[0]):
                best = (j, sim)
        if best is not None:
            found[i] = best
    rows = sorted(found)
    details = [
        f"{found[i][1]:.2f} similar to row {who[found[i][0]][0]} ({who[found[i][0]][1]}), same answer" for i in rows
    ]
    _write(
        work_dir / "near_out.parquet",
        pl.DataFrame({"_row": pl.Series(rows, dtype=pl.UInt64), "detail": pl.Series(details, dtype=pl.String)}),
    )
    return len(rows)
