"""StageResult/write_stage reconciliation and atomic writes; exact and near-duplicate removal."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rlvrflow.cleaning import ReconciliationError, StageResult, dedup, write_stage
from rlvrflow.cleaning.config import DedupConfig
from rlvrflow.cleaning.stage import make_stats, reject_frame


def rows(questions: list[str]) -> pl.DataFrame:
    n = len(questions)
    return pl.DataFrame(
        {"id": [f"r{i}" for i in range(n)], "question": questions, "source": [f"f.jsonl:{i + 1}" for i in range(n)]}
    )


def test_stage_result_refuses_lost_rows():
    kept = rows(["a", "b"])
    rej = reject_frame(rows(["c"]), "x", "some_reason", "why")
    assert StageResult(kept, rej, make_stats(3, kept, rej, 0.0)).stats["rejected_by_reason"] == {"some_reason": 1}
    with pytest.raises(ReconciliationError, match="rows_in=4"):
        StageResult(kept, rej, make_stats(4, kept, rej, 0.0))
    with pytest.raises(ReconciliationError):
        StageResult(kept, rej, {"rows_in": 3, "rows_kept": 1, "rows_rejected": 2})


def test_write_stage_writes_three_files_atomically(tmp_path):
    kept, rej = rows(["a"]), reject_frame(rows(["b"]), "s", "r", "d")
    paths = write_stage(tmp_path / "out", "ingest", kept, rej, make_stats(2, kept, rej, 0.1))
    assert pl.read_parquet(paths["kept"]).equals(kept)
    assert pl.read_parquet(paths["rejects"])["reason"].to_list() == ["r"]
    assert json.loads(paths["stats"].read_text())["rows_in"] == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ingest.parquet",
        "ingest_rejects.parquet",
        "ingest_stats.json",
    ]  # no temp files left
    with pytest.raises(ReconciliationError):
        write_stage(tmp_path / "bad", "x", kept, rej, {"rows_in": 5, "rows_kept": 1, "rows_rejected": 1})
    assert not (tmp_path / "bad" / "x.parquet").exists()


def test_exact_duplicates_after_normalization_keep_the_first():
    df = rows(["What is 1+1?", "what is 1 + 1", "What is 1-1?", "What is 1+1?!"])
    r = dedup(df, DedupConfig(near=False))
    assert r.kept["id"].to_list() == ["r0", "r2"]
    assert r.rejects["reason"].to_list() == ["duplicate_exact"] * 2
    assert "r0 (f.jsonl:1)" in r.rejects["detail"][0]


def test_near_duplicates_found_but_different_numbers_are_different_problems():
    base = "My order from the Berlin store arrived with a broken lamp, can I get a refund for it please"
    df = rows(
        [
            base,
            base.replace("please", "pls") + ".",
            base.replace("lamp", "chair"),
            "A customer buys 12 apples at 3 dollars each, what is the total cost of the order?",
            "A customer buys 13 apples at 3 dollars each, what is the total cost of the order?",
            "请问我在柏林门店买的台灯坏了，可以退款吗？谢谢您的帮助",
            "请问我在柏林门店买的台灯坏了，可以退款吗？谢谢您的帮忙",
        ]
    )
    r = dedup(df, DedupConfig(exact=True, near=True, threshold=0.8))
    rejected = dict(zip(r.rejects["id"].to_list(), r.rejects["reason"].to_list()))
    assert rejected == {"r1": "duplicate_near", "r6": "duplicate_near"}
    assert "similar to row r0" in r.rejects.filter(pl.col("id") == "r1")["detail"][0]
    assert {"r3", "r4"} <= set(r.kept["id"].to_list())  # 12 vs 13 apples: both kept
    assert r.stats["rows_in"] == 7 == r.kept.height + r.rejects.height


def test_near_duplicates_need_the_same_answer():
    df = rows(
        [
            "广州门店的平均订单金额（数量×单价之和）是多少？请给出结果",
            "杭州门店的平均订单金额（数量×单价之和）是多少？请给出结果",
            "广州门店的平均订单金额（数量×单价之和）是多少？请给出结果吧",
        ]
    ).with_columns(reference=pl.Series(["SELECT 1 -- 广州", "SELECT 1 -- 杭州", "SELECT 1 -- 广州"]))
    r = dedup(df, DedupConfig(threshold=0.8))
    assert r.kept["id"].to_list() == ["r0", "r1"] and r.rejects["id"].to_list() == ["r2"]


def test_dedup_is_deterministic_and_can_be_switched_off():
    df = rows(["same question here ok"] * 3 + ["other"])
    assert dedup(df, DedupConfig(exact=False, near=False)).kept.height == 4
    a, b = dedup(df, DedupConfig()), dedup(df, DedupConfig())
    assert a.kept.equals(b.kept) and a.kept.height == 2
