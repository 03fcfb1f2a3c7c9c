"""prepare on a local multi-process Dask cluster writes what the single-process run writes."""

from __future__ import annotations

import json
import os

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import distributed  # noqa: F401 - the dev extra installs it: a missing one is a failure, not a skip
from rlvrflow.cleaning import CleaningConfig, ValidationConfig
from rlvrflow.cleaning.dask_run import local_cluster, prepare_on_dask
from rlvrflow.cleaning.stream import prepare_stream


VALIDATION = ValidationConfig(categories=["arithmetic", "policy"], max_rejected_fraction=0.5)


def _pid() -> int:
    return os.getpid()


@pytest.mark.slow
def test_dask_run_equals_the_single_process_run(tmp_path, toy_sources):
    sources = toy_sources
    cleaning = CleaningConfig(chunk_rows=5, dedup={"shards": 4})
    prepare_stream(sources, cleaning, VALIDATION, "toy", tmp_path, tmp_path / "local")
    with local_cluster(workers=2) as client:
        pids = set(client.run(_pid).values())
        result = prepare_on_dask(client, sources, cleaning, VALIDATION, "toy", tmp_path, tmp_path / "dask")
    assert len(pids) == 2 and os.getpid() not in pids  # separate worker processes
    for name in ("clean.parquet", "rejects.parquet", "stages/dedup.parquet", "stages/validate_rejects.parquet"):
        assert_frame_equal(pl.read_parquet(tmp_path / "local" / name), pl.read_parquet(tmp_path / "dask" / name))
    local = json.loads((tmp_path / "local" / "stats.json").read_text())
    for stats in (local, result.stats):
        stats.pop("seconds")
        for st in stats["stages"].values():
            st.pop("seconds")
    assert result.stats == local
    assert result.stats["rejected_by_reason"]["duplicate_near"] == 1
