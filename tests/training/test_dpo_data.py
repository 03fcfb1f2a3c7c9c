"""DPO pairs from tier rollouts: who is chosen and rejected, the caps, length matching, seeding, drop reasons, export."""

import json

import polars as pl
import pytest

from rlvrflow.training.config import DPOConfig
from rlvrflow.training.dpo_data import build_pairs, export_dpo, pair_samples, read_pairs


def _tiers(tiers: dict[str, str]) -> pl.DataFrame:
    ids = list(tiers)
    return pl.DataFrame(
        {"id": ids, "category": ["c"] * len(ids), "prompt": [f"Q {i}" for i in ids], "tier": list(tiers.values())}
    )


def _rollouts(spec: dict[str, list[tuple[str, bool, int]]]) -> pl.DataFrame:
    """spec: id -> [(response, correct, n_tokens)]."""
    rows = [
        {
            "id": i,
            "sample": j,
            "response": text,
            "score": 1.0 if ok else 0.0,
            "status": "correct" if ok else "wrong",
            "extracted": None,
            "correct": ok,
            "n_tokens": n,
            "finish_reason": "stop",
        }
        for i, samples in spec.items()
        for j, (text, ok, n) in enumerate(samples)
    ]
    return pl.DataFrame(rows)


def test_chosen_is_correct_rejected_is_incorrect_and_drops_say_why():
    tiers = _tiers({"a": "learnable", "b": "learnable", "c": "learnable", "d": "too_easy", "e": "learnable"})
    roll = _rollouts(
        {
            "a": [("A1", True, 3), ("x", False, 3)],
            "b": [("B1", True, 3), ("B2", True, 3)],
            "c": [("n", False, 2), ("m", False, 2)],
            "d": [("D", True, 1), ("z", False, 1)],
        }
    )
    pairs, stats = build_pairs(tiers, roll, DPOConfig(), seed=0)
    assert [(p["id"], p["prompt"], p["chosen"], p["rejected"]) for p in pairs] == [("a", "Q a", "A1", "x")]
    assert pairs[0]["chosen_status"] == "correct" and pairs[0]["rejected_status"] == "wrong"
    assert stats["rejected_by_reason"] == {
        "no_incorrect_sample": 1,
        "no_correct_sample": 1,
        "tier_not_selected": 1,
        "no_rollouts": 1,
    }
    assert stats["rows_in"] == 5 == stats["rows_kept"] + stats["rows_rejected"]
    both, _ = build_pairs(tiers, roll, DPOConfig(tiers=["learnable", "too_easy"]), seed=0)
    assert [p["id"] for p in both] == ["a", "d"]


def _samples(good: list[int], bad: list[int]) -> list[dict]:
    """Correct responses g<k> and incorrect b<k> with token counts good[k] / bad[k]."""
    out = [{"sample": k, "response": f"g{k}", "correct": True, "n_tokens": n} for k, n in enumerate(good)]
    return out + [
        {"sample": len(good) + k, "response": f"b{k}", "correct": False, "n_tokens": n} for k, n in enumerate(bad)
    ]


def test_at_most_m_pairs_each_response_once_before_reuse():
    import random

    pairs = pair_samples(_samples([5, 5], [5, 5, 5]), 2, False, random.Random(0))
    assert len(pairs) == 2
    assert len({c["sample"] for c, _ in pairs}) == 2 and len({r["sample"] for _, r in pairs}) == 2
    six = pair_samples(_samples([5, 5], [5, 5, 5]), 10, False, random.Random(0))
    assert len(six) == 6 and len({(c["sample"], r["sample"]) for c, r in six}) == 6  # every combination once


def test_length_matching_pairs_the_closest_lengths_first():
    import random

    samples = _samples([4, 20], [21, 3, 12])
    matched = pair_samples(samples, 2, True, random.Random(0))
    assert {(c["n_tokens"], r["n_tokens"]) for c, r in matched} == {(4, 3), (20, 21)}
    gaps = [
        sum(abs(c["n_tokens"] - r["n_tokens"]) for c, r in pair_samples(samples, 2, False, random.Random(s)))
        for s in range(20)
    ]
    assert max(gaps) > 2  # without matching, some seeds pair far-apart lengths


def test_duplicate_texts_count_once_and_pairs_depend_on_seed_and_id_not_row_order():
    tiers = _tiers({f"p{i}": "learnable" for i in range(6)})
    roll = _rollouts(
        {
            f"p{i}": [("ok", True, 2), ("ok", True, 2), ("r1", False, 2), ("r2", False, 2), ("r3", False, 2)]
            for i in range(6)
        }
    )
    pairs, _ = build_pairs(tiers, roll, DPOConfig(max_pairs_per_prompt=1, length_match=False), seed=0)
    assert all(p["chosen_sample"] == 0 for p in pairs)  # the repeated "ok" is one response
    shuffled, _ = build_pairs(tiers.reverse(), roll.reverse(), DPOConfig(max_pairs_per_prompt=1, length_match=False), 0)
    assert shuffled == pairs
    rejected = {
        s: [
            p["rejected"] for p in build_pairs(tiers, roll, DPOConfig(max_pairs_per_prompt=1, length_match=False), s)[0]
        ]
        for s in range(4)
    }
    assert len({tuple(v) for v in rejected.values()}) > 1  # the seed changes the draw
    assert len(set(rejected[0])) > 1  # and so does the row id, within one seed


def test_export_writes_jsonl_and_an_hf_dataset_with_trl_columns(tmp_path):
    import datasets

    tier_dir = tmp_path / "tier"
    tier_dir.mkdir()
    _tiers({"a": "learnable", "b": "learnable"}).write_parquet(tier_dir / "tiers.parquet")
    _rollouts(
        {"a": [("A", True, 2), ("x", False, 2), ("y", False, 4)], "b": [("B", True, 1), ("q", False, 1)]}
    ).write_parquet(tier_dir / "tier_rollouts.parquet")
    stats = export_dpo(tier_dir, tmp_path / "out", DPOConfig(max_pairs_per_prompt=2), seed=0)
    assert stats["pairs"] == 3 and stats["rows_kept"] == 2
    ds = datasets.load_from_disk(str(tmp_path / "out" / "dataset"))
    assert {"prompt", "chosen", "rejected", "chosen_status", "rejected_status", "id"} <= set(ds.column_names)
    assert ds.num_rows == 3 and ds[0]["prompt"] == "Q a" and ds[0]["chosen"] == "A"
    assert read_pairs(tmp_path / "out") == [dict(r) for r in ds]
    assert json.loads((tmp_path / "out" / "dpo_stats.json").read_text())["pairs"] == 3
    again = export_dpo(tier_dir / "tiers.parquet", tmp_path / "out", DPOConfig(max_pairs_per_prompt=2), seed=0)
    assert again["pairs"] == 3  # a tiers.parquet path works too, and a rerun replaces the folder


def test_missing_rollouts_no_pairs_and_bad_pair_lines_name_the_fix(tmp_path):
    _tiers({"a": "learnable"}).write_parquet(tmp_path / "tiers.parquet")
    with pytest.raises(FileNotFoundError, match="tier again"):
        export_dpo(tmp_path, tmp_path / "out", DPOConfig(), seed=0)
    _rollouts({"a": [("A", True, 2)]}).write_parquet(tmp_path / "tier_rollouts.parquet")
    with pytest.raises(ValueError, match=r"no prompt of tiers \['learnable'\].*no_incorrect_sample"):
        export_dpo(tmp_path, tmp_path / "out", DPOConfig(), seed=0)
    assert json.loads((tmp_path / "out" / "dpo_stats.json").read_text())["pairs"] == 0  # the why stays on disk
    (tmp_path / "p.jsonl").write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n{"prompt": "q"}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:2: \['chosen', 'rejected'\]"):
        read_pairs(tmp_path / "p.jsonl")
