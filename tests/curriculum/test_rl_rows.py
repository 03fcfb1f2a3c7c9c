"""Which train rows tiering and GRPO draw from: the outcome-only rows SFT never saw, by default."""

import polars as pl
import pytest

from rlvrflow.curriculum.rl_rows import describe, rl_pool


def rows(worked: int, outcome: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"r{i:03d}" for i in range(worked + outcome)],
            "solution": ["1+1=2\nAnswer: 2"] * worked + ["", None, "  "] * (outcome // 3) + [""] * (outcome % 3),
        }
    )


def test_auto_takes_the_rows_sft_did_not_train_on():
    pool, info = rl_pool(rows(20, 80), "auto", None, seed=0)
    assert pool.height == 80 and info["rl_rows"] == "unseen" and info["sft_rows_in_pool"] == 0
    assert set(pool["id"]) == {f"r{i:03d}" for i in range(20, 100)}
    assert "none of which SFT trained on" in describe(info)


def test_auto_falls_back_to_all_rows_and_says_they_overlap():
    pool, info = rl_pool(rows(95, 5), "auto", None, seed=0)  # 5% outcome only: too few to learn from
    assert pool.height == 100 and info["rl_rows"] == "all" and info["sft_rows_in_pool"] == 95
    assert "95 of them are rows SFT trained on" in describe(info)
    pool, info = rl_pool(rows(20, 80), "all", None, seed=0)
    assert pool.height == 100 and info["sft_rows_in_pool"] == 20


def test_unseen_without_outcome_only_rows_is_an_error_with_the_fix():
    with pytest.raises(ValueError, match="rl_rows: all"):
        rl_pool(rows(10, 0), "unseen", None, seed=0)


def test_max_rows_is_a_seeded_sample_the_same_for_any_row_order():
    df = rows(20, 80)
    a, info = rl_pool(df, "auto", 30, seed=1)
    b, _ = rl_pool(df.reverse(), "auto", 30, seed=1)
    c, _ = rl_pool(df, "auto", 30, seed=2)
    assert a.height == 30 and info["capped_from"] == 80 and sorted(a["id"]) == sorted(b["id"])
    assert sorted(a["id"]) != sorted(c["id"])
    assert "a sample of 80" in describe(info)
