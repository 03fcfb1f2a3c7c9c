"""The row type: each row stage's kept rows are checked against it; extra columns are carried."""

from __future__ import annotations

import polars as pl
import pytest

from rlvrflow.flows.rows import RowSchemaError, check_rows, columns_after
from rlvrflow.flows.runner import Result, Stage, run_stage
from rlvrflow.flows.spec import load_spec

ATTACHED = {c: pl.String for c in columns_after("attach")}


def test_columns_accumulate_from_clean_to_tier():
    assert list(columns_after("prepare"))[:3] == ["id", "domain", "category"]
    tier = columns_after("tier")
    assert tier["verifier_params"] == "String" and tier["split"] == "String" and tier["n_correct"] == "Int64"


def test_missing_or_retyped_columns_fail_and_extra_ones_pass():
    check_rows(pl.Schema({**ATTACHED, "samples": pl.List(pl.String)}), "attach")  # an extra column is fine
    with pytest.raises(RowSchemaError, match=r"missing verifier_params \(String\)"):
        check_rows(pl.Schema({k: v for k, v in ATTACHED.items() if k != "verifier_params"}), "attach")
    with pytest.raises(RowSchemaError, match="n_correct is Float64, not Int64"):
        check_rows(
            pl.Schema(
                {
                    **ATTACHED,
                    "split": pl.String,
                    "n_samples": pl.Int64,
                    "n_correct": pl.Float64,
                    "pass_at_1": pl.Float64,
                    "pass_at_k": pl.Float64,
                    "tier": pl.String,
                }
            ),
            "tier",
        )


def _drops_a_column(job):
    df = pl.DataFrame({c: ["x"] for c in columns_after("prepare")}).drop("source")
    return Result(
        {"rows_in": 1, "rows_kept": 1, "rows_rejected": 0, "rejected_by_reason": {}},
        kept=df,
        rejects=df.head(0).with_columns(pl.lit("").alias("reason")),
    )


def test_a_stage_that_breaks_the_row_type_fails_as_a_bug_and_caches_nothing(toy_spec, tmp_path):
    stage = Stage("prepare", inputs=(), sections=("domain",), code=(), call=_drops_a_column, rows=True)
    with pytest.raises(Exception) as info:
        run_stage(stage, load_spec(toy_spec), tmp_path, {}, echo=None)
    assert info.value.kind == "bug" and "missing source (String)" in str(info.value)
    assert not list(tmp_path.glob("stages/prepare/*/_manifest.json"))
