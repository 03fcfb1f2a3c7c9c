"""Scale-out: the prepare and attach stages with their fan-out on a local Dask cluster (prefect-dask)."""

from __future__ import annotations

import os
from pathlib import Path

import distributed  # noqa: F401,E402 - the dev extra installs both: a missing one is a failure, not a skip
import prefect_dask  # noqa: F401,E402


def test_prepare_and_attach_on_a_local_dask_cluster(prefect_harness, toy_spec, tmp_path):
    from prefect_dask import DaskTaskRunner

    from rlvrflow.flows.attach import attach
    from rlvrflow.flows.common import load_run_spec, make_task_runner
    from rlvrflow.flows.prepare import prepare

    spec = load_run_spec(toy_spec, runner="dask")
    runner = make_task_runner(spec)
    assert isinstance(runner, DaskTaskRunner)
    out = tmp_path / "out"
    clean = prepare.with_options(task_runner=make_task_runner(spec))(str(toy_spec), str(out), runner="dask")
    data = attach.with_options(task_runner=runner)(str(toy_spec), str(out), clean, runner="dask")
    st = data["attach"]["stats"]
    assert st["rows_in"] == 40 == st["rows_kept"] + st["rows_rejected"]
    assert st["chunks"] == 3 and st["chunk_pids"] and os.getpid() not in st["chunk_pids"]  # Dask workers
    assert (Path(data["split"]["dir"]) / "train.parquet").is_file()

    # the same stages on threads reuse what the Dask run computed: the cache key ignores the runner
    threads = attach(str(toy_spec), str(out), clean)
    assert threads["attach"]["cached"] and threads["attach"]["dir"] == data["attach"]["dir"]

    # prepare's own tasks ran on the cluster (cleaning.dask_run from inside the Dask task) and gave
    # exactly what a prepare on threads gives in another folder
    import polars as pl

    local = prepare(str(toy_spec), str(tmp_path / "local"))
    for name in ("clean.parquet", "rejects.parquet"):
        dask_rows, local_rows = (pl.read_parquet(Path(m["dir"]) / name) for m in (clean, local))
        assert dask_rows.equals(local_rows), name
    assert clean["stats"]["rows_in"] == local["stats"]["rows_in"] == 40
