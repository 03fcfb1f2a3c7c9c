"""The prepare and attach flows on a temporary Prefect API: outputs, artifacts, cache, retries, failures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest


def _prepare_attach(spec: Path, out: Path, force: bool = False):
    from rlvrflow.flows.attach import attach
    from rlvrflow.flows.prepare import prepare

    clean = prepare(str(spec), str(out), force=force)
    return clean, attach(str(spec), str(out), clean, force=force)


def test_prepare_attach_split_then_cached(prefect_harness, toy_spec, tmp_path, read_artifact):
    out = tmp_path / "out"
    clean, data = _prepare_attach(toy_spec, out)
    assert not clean["cached"] and clean["stats"]["rows_in"] == 40
    st = data["attach"]["stats"]
    assert st["rows_in"] == clean["stats"]["rows_kept"] == st["rows_kept"] + st["rows_rejected"]
    split = data["split"]
    train = pl.read_parquet(Path(split["dir"]) / "train.parquet")
    evals = pl.read_parquet(Path(split["dir"]) / "eval.parquet")
    assert train.height + evals.height == st["rows_kept"] and evals.height > 0
    assert set(train["verifier"].to_list()) == {"math"}
    # 40 rows in chunks of 16 -> three attach-chunk tasks, merged into one table
    assert not (Path(data["attach"]["dir"]) / "chunks").exists()
    assert st["chunks"] == 3 and st["chunk_pids"] == [os.getpid()]  # threads: this process
    artifact = read_artifact("toy-validation")
    assert artifact is not None and "Great Expectations: passed" in artifact.data

    clean2, data2 = _prepare_attach(toy_spec, out)
    assert clean2["cached"] and data2["attach"]["cached"] and data2["split"]["cached"]
    assert clean2["dir"] == clean["dir"] and data2["split"]["digests"] == split["digests"]

    (toy_spec.parent / "raw" / "part-1.jsonl").write_text(
        json.dumps({"qid": "new1", "q": "What is 100 plus 1?", "a": "101", "s": "Answer: 101"}) + "\n"
    )
    clean3, _ = _prepare_attach(toy_spec, out)
    assert not clean3["cached"] and clean3["dir"] != clean["dir"] and clean3["stats"]["rows_in"] == 41

    clean4, data4 = _prepare_attach(toy_spec, out, force=True)
    assert not clean4["cached"] and not data4["attach"]["cached"]


def test_transient_verifier_crash_is_retried(prefect_harness, toy_spec, tmp_path, monkeypatch):
    import importlib
    from concurrent.futures.process import BrokenProcessPool

    attach_module = importlib.import_module("rlvrflow.verifiers.attaching")  # the stage calls attach from its module
    real, calls = attach_module.attach, []

    def flaky(df, config, base_dir, workers=None):
        calls.append(df.height)
        if len(calls) == 1:
            raise BrokenProcessPool("a verifier worker died")
        return real(df, config, base_dir, workers=workers)

    monkeypatch.setattr(attach_module, "attach", flaky)
    _, data = _prepare_attach(toy_spec, tmp_path / "out")
    assert len(calls) == 4  # three chunks, one of them twice
    assert data["attach"]["stats"]["rows_in"] == 40


def test_data_error_is_not_retried_and_names_the_stage(prefect_harness, toy_spec, tmp_path, monkeypatch):
    import importlib

    attach_module = importlib.import_module("rlvrflow.verifiers.attaching")  # the stage calls attach from its module
    calls = []

    def broken(df, config, base_dir, workers=None):
        calls.append(1)
        raise ValueError("reference column holds bytes")

    monkeypatch.setattr(attach_module, "attach", broken)
    from rlvrflow.flows.errors import StageFailed

    with pytest.raises(StageFailed) as info:
        _prepare_attach(toy_spec, tmp_path / "out")
    msg = str(info.value)
    assert "stage 'attach' failed" in msg and "domain toy" in msg and str(toy_spec) in msg
    assert "reference column holds bytes" in msg
    assert len(calls) == 3  # each chunk once: a ValueError is not transient


def test_missing_sources_fail_prepare_with_the_fix(prefect_harness, toy_spec, tmp_path):
    from rlvrflow.flows.errors import StageFailed
    from rlvrflow.flows.prepare import prepare

    for f in (toy_spec.parent / "raw").iterdir():
        f.unlink()
    state = prepare(str(toy_spec), str(tmp_path / "out"), return_state=True)
    assert state.is_failed()
    with pytest.raises(StageFailed, match=r"sources\[0\] \(qa\).*matches no file"):
        state.result()


def test_failed_validation_fails_the_run_and_publishes_the_summary(prefect_harness, toy_spec, tmp_path, read_artifact):
    from rlvrflow.flows.prepare import prepare

    toy_spec.write_text(toy_spec.read_text().replace("validation:\n", "validation:\n  min_rows: 1000\n"))
    state = prepare(str(toy_spec), str(tmp_path / "out"), return_state=True)
    assert state.is_failed()
    with pytest.raises(Exception) as info:
        state.result()
    assert "stage 'prepare' failed" in str(info.value) and "ValidationFailed" in str(info.value)
    artifact = read_artifact("toy-validation")
    assert artifact is not None and "FAILED" in artifact.data
