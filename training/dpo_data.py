"""DPO pairs from what tiering already sampled: chosen = a correct sample, rejected = a wrong one, same prompt.

    pairs, stats = build_pairs(tiers_df, rollouts_df, cfg.dpo, seed=0)
    stats = export_dpo("runs/x/stages/tier/<key>", "runs/x/dpo", cfg.dpo, seed=0)   # JSONL + HF dataset

Tiering draws n samples per prompt and scores them (curriculum/tiering.py keeps them in
`tier_rollouts.parquet`): every prompt with both a correct and an incorrect sample is preference data
for free. For each prompt of the selected tiers (`cfg.tiers`, learnable by default) the distinct
correct responses are paired with the distinct incorrect ones (any status but `correct`: wrong,
unparsed, error, timeout; partial credit is not correct), at most `cfg.max_pairs_per_prompt` pairs,
each response used once before any is reused. With `cfg.length_match` the pairs whose token counts
are closest come first (DPO otherwise learns "longer" or "shorter" when length differs between
sides); ties and the order without length matching come from a shuffle seeded by (seed, row id), so
the pairs do not depend on the order of the rows or of the files.

Every prompt row lands in the stats: kept (pairs made) or dropped with a reason: `tier_not_selected`,
`no_correct_sample`, `no_incorrect_sample`, `no_rollouts`. `export_dpo` writes `dpo_pairs.jsonl`,
`dataset/` (`datasets.Dataset.save_to_disk`: TRL's `prompt`, `chosen`, `rejected` columns plus ids and
verdicts) and `dpo_stats.json`. `prompt` is the row's prompt text as the pipeline stores it; the
trainer (training/dpo.py) renders it in the run's prompt format, as SFT and GRPO do.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

from rlvrflow.io import write_json, write_text
from rlvrflow.training.config import DPOConfig
from rlvrflow.verifiers.config import EPISODE

PAIRS_FILE = "dpo_pairs.jsonl"
DATASET_DIR = "dataset"
STATS_FILE = "dpo_stats.json"
TIERS_FILE = "tiers.parquet"
ROLLOUTS_FILE = "tier_rollouts.parquet"  # curriculum.tiering.ROLLOUTS_FILE
PAIR_COLUMNS = (
    "prompt",
    "chosen",
    "rejected",
    "id",
    "category",
    "tier",
    "chosen_sample",
    "rejected_sample",
    "chosen_score",
    "rejected_score",
    "chosen_status",
    "rejected_status",
    "chosen_tokens",
    "rejected_tokens",
    "chosen_finish",
    "rejected_finish",
)
DROP_REASONS = ("episode_row", "tier_not_selected", "no_rollouts", "no_correct_sample", "no_incorrect_sample")


def _rng(seed: int, row_id: object) -> random.Random:
    digest = hashlib.blake2b(f"{seed}\x00dpo\x00{row_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _distinct(samples: list[dict]) -> list[dict]:
    """One sample per response text (the lowest sample index): a repeated text adds no preference."""
    seen: dict[str, dict] = {}
    for s in sorted(samples, key=lambda s: s["sample"]):
        seen.setdefault(s["response"], s)
    return list(seen.values())


def pair_samples(
    samples: list[dict], max_pairs: int, length_match: bool, rng: random.Random
) -> list[tuple[dict, dict]]:
    """(chosen, rejected) pairs from one prompt's samples (dicts with sample, response, correct, n_tokens).

    Candidates are every (correct, incorrect) combination of distinct texts, shuffled by `rng`, then
    (with `length_match`) stably sorted by token-count difference. The first pass takes pairs whose
    two responses are both unused; a second pass fills up to `max_pairs` from the rest in that order.
    """
    good = _distinct([s for s in samples if s["correct"]])
    bad = _distinct([s for s in samples if not s["correct"]])
    combos = [(c, r) for c in good for r in bad if c["response"] != r["response"]]
    rng.shuffle(combos)
    if length_match:
        combos.sort(key=lambda cr: abs(cr[0]["n_tokens"] - cr[1]["n_tokens"]))
    picked, used = [], set()
    for c, r in combos:
        if len(picked) < max_pairs and ("c", c["sample"]) not in used and ("r", r["sample"]) not in used:
            picked.append((c, r))
            used |= {("c", c["sample"]), ("r", r["sample"])}
    for c, r in combos:
        if len(picked) >= max_pairs:
            break
        if (c, r) not in picked:
            picked.append((c, r))
    return picked


def _pair_record(row: dict, c: dict, r: dict) -> dict:
    return {
        "prompt": row["prompt"],
        "chosen": c["response"],
        "rejected": r["response"],
        "id": str(row["id"]),
        "category": row.get("category"),
        "tier": row["tier"],
        "chosen_sample": c["sample"],
        "rejected_sample": r["sample"],
        "chosen_score": c["score"],
        "rejected_score": r["score"],
        "chosen_status": c["status"],
        "rejected_status": r["status"],
        "chosen_tokens": c["n_tokens"],
        "rejected_tokens": r["n_tokens"],
        "chosen_finish": c["finish_reason"],
        "rejected_finish": r["finish_reason"],
    }


def build_pairs(tiers_df, rollouts_df, cfg: DPOConfig, seed: int) -> tuple[list[dict], dict]:
    """DPO pair records (PAIR_COLUMNS) in row-id order, and stats: rows in, kept, dropped by reason."""
    need_t = [c for c in ("id", "prompt", "tier") if c not in tiers_df.columns]
    need_r = [c for c in ("id", "sample", "response", "correct", "n_tokens") if c not in rollouts_df.columns]
    if need_t or need_r:
        raise ValueError(
            f"build_pairs: tiers lack {need_t}, rollouts lack {need_r}; pass tiers.parquet and "
            f"{ROLLOUTS_FILE} as curriculum.tiering.tier_to_dir writes them"
        )
    by_id: dict[str, list[dict]] = {}
    for s in rollouts_df.iter_rows(named=True):
        by_id.setdefault(str(s["id"]), []).append(s)
    pairs: list[dict] = []
    dropped = dict.fromkeys(DROP_REASONS, 0)
    kept = 0
    for row in sorted(tiers_df.iter_rows(named=True), key=lambda r: str(r["id"])):
        samples = by_id.get(str(row["id"]), [])
        reason = (
            "episode_row"  # a conversation, not one reply: GRPO's (training.episodes), never DPO's
            if row.get("verifier") == EPISODE
            else "tier_not_selected"
            if row["tier"] not in cfg.tiers
            else "no_rollouts"
            if not samples
            else "no_correct_sample"
            if not any(s["correct"] for s in samples)
            else "no_incorrect_sample"
            if all(s["correct"] for s in samples)
            else None
        )
        made = (
            [] if reason else pair_samples(samples, cfg.max_pairs_per_prompt, cfg.length_match, _rng(seed, row["id"]))
        )
        if reason is None and not made:
            reason = "no_incorrect_sample"  # every incorrect text equals a correct one (a flaky verifier)
        if reason:
            dropped[reason] += 1
            continue
        kept += 1
        pairs.extend(_pair_record(row, c, r) for c, r in made)
    stats = {
        "rows_in": tiers_df.height,
        "rows_kept": kept,
        "rows_rejected": sum(dropped.values()),
        "rejected_by_reason": {k: v for k, v in dropped.items() if v},
        "pairs": len(pairs),
        "tiers": list(cfg.tiers),
        "max_pairs_per_prompt": cfg.max_pairs_per_prompt,
        "length_match": cfg.length_match,
        "seed": seed,
    }
    if stats["rows_in"] != stats["rows_kept"] + stats["rows_rejected"]:
        raise AssertionError(f"build_pairs lost rows: {stats}")
    return pairs, stats


def tier_files(tiered: str | Path) -> tuple[Path, Path]:
    """(tiers.parquet, tier_rollouts.parquet) from a tier output folder or the tiers.parquet in it."""
    p = Path(tiered)
    tiers = p / TIERS_FILE if p.is_dir() else p
    rollouts = tiers.with_name(ROLLOUTS_FILE)
    if not tiers.is_file():
        raise FileNotFoundError(
            f"export-dpo: {tiers} does not exist; pass a tier output folder (rlvrflow tier "
            "--out DIR, or the run's stages/tier/<key>/) or its tiers.parquet"
        )
    if not rollouts.is_file():
        raise FileNotFoundError(
            f"export-dpo: {tiers} has no {ROLLOUTS_FILE} beside it, so the samples behind its "
            "tiers are gone (tiered before rollouts were kept?); tier again to get them"
        )
    return tiers, rollouts


def export_dpo(tiered: str | Path, out_dir: str | Path, cfg: DPOConfig, seed: int) -> dict:
    """Build pairs from a tier output and write dpo_pairs.jsonl, dataset/ (HF) and dpo_stats.json; returns the stats."""
    import datasets
    import polars as pl

    tiers, rollouts = tier_files(tiered)
    pairs, stats = build_pairs(pl.read_parquet(tiers), pl.read_parquet(rollouts), cfg, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / PAIRS_FILE, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    if not pairs:  # an empty dataset cannot be saved, and DPO on nothing is a mistake worth stopping for
        write_json(out / STATS_FILE, {**stats, "source": str(tiers)}, sort_keys=True)
        raise ValueError(
            f"export-dpo: no prompt of tiers {list(cfg.tiers)} in {tiers} has both a correct and an "
            f"incorrect sample (dropped: {stats['rejected_by_reason']}); widen training.dpo.tiers, raise "
            "curriculum.n_samples, or check the SFT model's tiers"
        )
    table = {c: [p[c] for p in pairs] for c in PAIR_COLUMNS}
    features = datasets.Features(
        {
            c: datasets.Value(
                "int64" if c.endswith(("_sample", "_tokens")) else "float64" if c.endswith("_score") else "string"
            )
            for c in PAIR_COLUMNS
        }
    )
    tmp = out / f".tmp-{DATASET_DIR}"
    shutil.rmtree(tmp, ignore_errors=True)
    datasets.Dataset.from_dict(table, features=features).save_to_disk(str(tmp))
    shutil.rmtree(out / DATASET_DIR, ignore_errors=True)
    tmp.replace(out / DATASET_DIR)
    stats = {**stats, "source": str(tiers), "files": {"jsonl": PAIRS_FILE, "dataset": DATASET_DIR}}
    write_json(out / STATS_FILE, stats, sort_keys=True)
    return stats


def read_pairs(path: str | Path) -> list[dict]:
    """Pair records from an export folder (its dpo_pairs.jsonl) or a JSONL file; errors name the line."""
    p = Path(path)
    f = p / PAIRS_FILE if p.is_dir() else p
    if not f.is_file():
        raise FileNotFoundError(f"{f} does not exist; write it with export_dpo (rlvrflow export-dpo SPEC --out DIR)")
    pairs = []
    for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{f}:{n}: not JSON ({exc})") from None
        missing = [k for k in ("prompt", "chosen", "rejected") if not isinstance(rec.get(k), str)]
        if missing:
            raise ValueError(f"{f}:{n}: {missing} missing or not strings; each line needs prompt, chosen and rejected")
        pairs.append(rec)
    return pairs
