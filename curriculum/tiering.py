"""Tier prompts by the SFT model's pass@k: sample n completions per prompt, verify, count, classify.

    tiered = tier_rows(rows, engine, cfg, seed=0)        # adds n_samples, n_correct, pass_at_1, pass_at_k, tier
    tiered, rollouts = tier_with_rollouts(rows, engine, cfg, seed=0)   # + every sample, one row each
    tier_to_dir(rows, "runs/demo/sft", cfg, "runs/demo/tier", seed=0)   # tiers.parquet, tier_rollouts.parquet, report

Determinism: the samples a row gets depend only on (seed, the row ids being tiered), never on the
entry point or how a caller chunks the rows. Rows are put in an order hashed from (seed, id) and
generated in calls of PROMPTS_PER_CALL consecutive rows of that order, each call seeded from
(seed, its first id). A caller that fans out (the flow's tier stage) cuts the same order into
chunks of whole calls (`call_chunks`), so `rlvrflow tier`, `rlvrflow run` and any `chunk_rows`
give the same tiers.

A sample is correct when its verdict score is >= 1 - 1e-9 (the verifier's `correct`); partial credit
does not count. The tier is decided on pass@1 = c/n with `cfg.boundaries` (see curriculum/config.py).
Scoring goes through `score_fn(items) -> list[Verdict | float]` with items
`(verifier, response, reference, verifier_params)`; the default is `verifiers.score_many`.

What was sampled is kept: `tier_with_rollouts` also returns the rollouts, one row per (id, sample)
with ROLLOUT_COLUMNS (response text, score, verdict status and extracted answer when the scorer
returns Verdicts, null for plain numbers, correct flag, completion tokens, finish reason), and
`tier_to_dir` writes them to `tier_rollouts.parquet` beside `tiers.parquet`. They live in a sibling
table rather than a list column so the prompt rows keep the one row schema every later stage reads
(the sampler and GRPO never load n responses per row), and so fan-out chunks concatenate the same
way as the tiers. DPO pairs (curriculum/dpo_pairs.py) are built from them. A tqdm bar counts the
prompts sampled (on stderr, silent when stderr is not a terminal).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.engines.hf_engine import RolloutEngine, SamplingParams
from rlvrflow.curriculum.passk import pass_at_k_array
from rlvrflow.curriculum.report import tier_report
from rlvrflow.io import write_parquet

log = logging.getLogger("rlvrflow.curriculum")

CORRECT_MIN = 1.0 - 1e-9
TIER_COLUMNS = ("n_samples", "n_correct", "pass_at_1", "pass_at_k", "tier")
ROLLOUT_COLUMNS = ("id", "sample", "response", "score", "status", "extracted", "correct", "n_tokens", "finish_reason")
ROLLOUTS_FILE = "tier_rollouts.parquet"
_NEEDED = ("id", "category", "prompt", "reference", "verifier", "verifier_params")
PROMPTS_PER_CALL = 256  # engine calls are chunked so memory and progress stay bounded

ScoreFn = Callable[[Sequence[tuple[str, str, str, str]]], Sequence[object]]


def default_score_fn(workers: int | None, timeout_s: float = 30.0) -> ScoreFn:
    """`verifiers.score_many` with a fixed worker count and per-item timeout (the spec's
    verifiers.timeout_s; imported lazily)."""

    def score(items):
        from rlvrflow.verifiers import score_many

        return score_many(items, workers=workers, timeout_s=timeout_s)

    return score


def _score_value(verdict: object) -> float:
    return float(getattr(verdict, "score", verdict))


def _hash(seed: int, key: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()


def call_order(ids: Sequence[object], seed: int) -> list[int]:
    """Positions of `ids` in the order tiering samples them: by a hash of (seed, id)."""
    return sorted(range(len(ids)), key=lambda i: (_hash(seed, str(ids[i])), str(ids[i])))


def call_chunks(ids: Sequence[object], seed: int, chunk_rows: int) -> list[list[object]]:
    """The ids cut into fan-out chunks of whole engine calls (chunk_rows rounded up to a multiple
    of PROMPTS_PER_CALL), in call order: tiering each chunk alone gives what one call on all gives."""
    per_chunk = max(1, -(-max(1, chunk_rows) // PROMPTS_PER_CALL)) * PROMPTS_PER_CALL
    order = [ids[i] for i in call_order(ids, seed)]
    return [order[i : i + per_chunk] for i in range(0, len(order), per_chunk)] or [[]]


def call_seed(seed: int, first_id: object) -> int:
    return int.from_bytes(_hash(seed, f"call:{first_id}"), "big") % (2**31 - 1)


def sample_rows(df, engine: RolloutEngine, cfg: CurriculumConfig, seed: int, score_fn: ScoreFn) -> list[list[dict]]:
    """Each row's cfg.n_samples scored samples (ROLLOUT_COLUMNS but `id`), in row order (sampled in call order)."""
    from tqdm.auto import tqdm

    sampling = SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens)
    table = df.select(_NEEDED).to_dicts()
    order = call_order([r["id"] for r in table], seed)
    rows = [table[i] for i in order]
    samples: list[list[dict]] = []
    n = cfg.n_samples
    # disable=None: no bar when stderr is not a terminal (logs, CI, Prefect workers)
    with tqdm(total=len(rows), desc="tiering", unit="prompt", disable=None, leave=False) as bar:
        for start in range(0, len(rows), PROMPTS_PER_CALL):
            chunk = rows[start : start + PROMPTS_PER_CALL]
            groups = engine.generate([r["prompt"] for r in chunk], n, sampling, call_seed(seed, chunk[0]["id"]))
            items = [
                (r["verifier"], c.text, r["reference"], r["verifier_params"])
                for r, group in zip(chunk, groups)
                for c in group
            ]
            verdicts = list(score_fn(items))
            if len(verdicts) != len(items):
                raise RuntimeError(
                    f"score_fn returned {len(verdicts)} verdicts for {len(items)} items; it must return one per item"
                )
            completions = [c for group in groups for c in group]
            records = [_record(j % n, c, v) for j, (c, v) in enumerate(zip(completions, verdicts))]
            samples.extend(records[i * n : (i + 1) * n] for i in range(len(chunk)))
            bar.update(len(chunk))
            log.info("tiering: %d/%d prompts sampled and scored", start + len(chunk), len(rows))
    in_row_order: list[list[dict]] = [[] for _ in rows]
    for position, row_samples in zip(order, samples):
        in_row_order[position] = row_samples
    return in_row_order


def _record(index: int, completion, verdict: object) -> dict:
    score = _score_value(verdict)
    return {
        "sample": index,
        "response": completion.text,
        "score": score,
        "status": getattr(verdict, "status", None),
        "extracted": getattr(verdict, "extracted", None),
        "correct": score >= CORRECT_MIN,
        "n_tokens": len(completion.token_ids),
        "finish_reason": completion.finish_reason,
    }


def rollouts_frame(ids: Sequence[object], samples: list[list[dict]], id_dtype=None):
    """The long rollouts table: one row per (id, sample), ROLLOUT_COLUMNS, rows in (row, sample) order."""
    import polars as pl

    flat = [{"id": i, **s} for i, row in zip(ids, samples) for s in row]
    schema = {
        "id": id_dtype or pl.String,
        "sample": pl.Int64,
        "response": pl.String,
        "score": pl.Float64,
        "status": pl.String,
        "extracted": pl.String,
        "correct": pl.Boolean,
        "n_tokens": pl.Int64,
        "finish_reason": pl.String,
    }
    return pl.DataFrame(flat, schema=schema)


def tier_rows(
    df,
    engine: RolloutEngine,
    cfg: CurriculumConfig,
    seed: int,
    score_fn: ScoreFn | None = None,
    workers: int | None = None,
):
    """The rows plus `n_samples, n_correct, pass_at_1, pass_at_k, tier` (existing tier columns are replaced).

    `workers` sets the verifier pool size when `score_fn` is None (None = every core).
    """
    return tier_with_rollouts(df, engine, cfg, seed, score_fn=score_fn, workers=workers)[0]


def tier_with_rollouts(
    df,
    engine: RolloutEngine,
    cfg: CurriculumConfig,
    seed: int,
    score_fn: ScoreFn | None = None,
    workers: int | None = None,
):
    """(`tier_rows`' frame, the rollouts behind it): the second has one row per (id, sample) with
    ROLLOUT_COLUMNS, in the tiered rows' order. Same samples, seeds and tiers as `tier_rows`."""
    import polars as pl

    missing = [c for c in _NEEDED if c not in df.columns]
    if missing:
        raise ValueError(
            f"tier_rows: the frame lacks column(s) {missing}; tier rows after the verifiers stage attached "
            "`verifier` and `verifier_params` (see the row schema in docs/DESIGN.md)"
        )
    base = df.drop([c for c in TIER_COLUMNS if c in df.columns])
    if base.height == 0:
        return base.with_columns(
            pl.lit(None, pl.Int64).alias("n_samples"),
            pl.lit(None, pl.Int64).alias("n_correct"),
            pl.lit(None, pl.Float64).alias("pass_at_1"),
            pl.lit(None, pl.Float64).alias("pass_at_k"),
            pl.lit(None, pl.String).alias("tier"),
        ), rollouts_frame([], [], base.schema["id"])
    return tiered_from_samples(base, sample_rows(base, engine, cfg, seed, score_fn or default_score_fn(workers)), cfg)


def tiered_from_samples(base, samples: list[list[dict]], cfg: CurriculumConfig):
    """(base with n_samples, n_correct, pass_at_1, pass_at_k and tier, the rollouts frame) from each row's
    sample records (each with `correct`), single replies and episodes alike."""
    import polars as pl

    correct = [sum(s["correct"] for s in row) for row in samples]
    n = [cfg.n_samples] * base.height
    p1 = [c / cfg.n_samples for c in correct]
    tiered = base.with_columns(
        pl.Series("n_samples", n, dtype=pl.Int64),
        pl.Series("n_correct", correct, dtype=pl.Int64),
        pl.Series("pass_at_1", p1, dtype=pl.Float64),
        pl.Series("pass_at_k", pass_at_k_array(n, correct, cfg.k) if n else [], dtype=pl.Float64),
        pl.Series("tier", [cfg.boundaries.tier_of(p) for p in p1], dtype=pl.String),
    )
    return tiered, rollouts_frame(base["id"].to_list(), samples, base.schema["id"])


def tier_to_dir(
    df,
    model_path: str | Path,
    cfg: CurriculumConfig,
    out_dir: str | Path,
    seed: int,
    score_fn: ScoreFn | None = None,
    device: str = "cpu",
    workers: int | None = None,
    dtype: str = "auto",
):
    """Load the model at `model_path` into the engine `cfg.engine` names (`make_engine`; `dtype` "auto"
    is the checkpoint's), tier `df`, write the stage to `out_dir`.

    Writes `tiers.parquet` (the rows plus the tier columns), `tier_rollouts.parquet` (every sample:
    ROLLOUT_COLUMNS), `tiers_rejects.parquet` (empty: tiering drops nothing), `tiers_stats.json` and
    the tier report (tier_table.csv, tier_report.md, tier_histogram.png). Returns the tiered frame.
    """
    from rlvrflow.engines.factory import make_engine, release

    started = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    engine = make_engine(
        cfg.engine,
        model_path,
        device=device,
        dtype=dtype,
        batch_size=cfg.engine_batch_size,
        seed=seed,
        field="curriculum.engine",
    )
    try:
        tiered, rollouts = tier_with_rollouts(df, engine, cfg, seed, score_fn=score_fn, workers=workers)
    finally:
        release(engine)
    if tiered.height != df.height:
        raise AssertionError(f"tiering changed the row count: {df.height} in, {tiered.height} out")
    write_parquet(out / ROLLOUTS_FILE, rollouts)
    write_parquet(out / "tiers.parquet", tiered)
    write_parquet(out / "tiers_rejects.parquet", _empty_rejects(df))
    tier_report(tiered, out, k=cfg.k)
    stats = {
        "rows_in": df.height,
        "rows_kept": tiered.height,
        "rows_rejected": 0,
        "rejected_by_reason": {},
        "seconds": round(time.time() - started, 3),
        "model": str(model_path),
        "seed": seed,
        "n_samples": cfg.n_samples,
        "engine": cfg.engine,
        "rollouts": rollouts.height,
        "k": cfg.k,
        "tiers": {t: int(v) for t, v in tiered["tier"].value_counts().iter_rows()} if tiered.height else {},
    }
    tmp = out / "tiers_stats.json.tmp"
    tmp.write_text(json.dumps(stats, indent=2, sort_keys=True))
    tmp.replace(out / "tiers_stats.json")
    return tiered


def _empty_rejects(df):
    import polars as pl

    return df.head(0).with_columns(
        pl.lit(None, pl.String).alias("stage"),
        pl.lit(None, pl.String).alias("reason"),
        pl.lit(None, pl.String).alias("detail"),
    )
