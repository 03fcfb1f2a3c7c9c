"""One classification of failures, by type: the CLI's exit codes and Prefect's retry policy agree."""

from __future__ import annotations

import pickle
from concurrent.futures.process import BrokenProcessPool

import pytest

from rlvrflow.flows.errors import DataError, StageFailed, TransientError, classify, exit_code, is_transient


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as exc:
        return exc


@pytest.mark.parametrize(
    "exc, kind",
    [
        (BrokenProcessPool("worker died"), "transient"),
        (ConnectionResetError("peer reset"), "transient"),
        (TimeoutError("slow"), "transient"),
        (TransientError("retry me"), "transient"),
        (DataError("bad rows"), "data"),
        (FileNotFoundError("raw/x.jsonl"), "data"),
        (ValueError("reference column holds bytes"), "bug"),
        (KeyError("oops"), "bug"),
    ],
)
def test_kinds_by_type(exc, kind):
    assert classify(exc) == kind


def test_library_errors_and_chains():
    from rlvrflow.cleaning.ingest import IngestError
    from rlvrflow.cleaning.validate import ValidationFailed
    from rlvrflow.flows.spec import SpecError
    from rlvrflow.verifiers.registry import UnknownVerifier

    assert (
        classify(IngestError("x")) == "data" and classify(ValidationFailed({"reason": "gx", "failures": []})) == "data"
    )
    assert classify(SpecError("x")) == classify(UnknownVerifier("nope")) == "usage"
    # a wrapper of unknown type takes its cause's kind; an exception named like a transient one does not
    assert classify(_chained(RuntimeError("task failed"), BrokenProcessPool("died"))) == "transient"
    fake = type("BrokenProcessPool", (Exception,), {})
    assert classify(fake("same name, other class")) == "bug"


def test_dask_errors_are_transient_once_distributed_is_loaded():
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    assert is_transient(KilledWorker("task", "worker", 3)) and is_transient(CommClosedError("closed"))


def test_stage_failed_keeps_its_kind_through_pickling_and_sets_the_exit_code():
    err = StageFailed("stage 'attach' failed: ...", "data")
    back = pickle.loads(pickle.dumps(err))
    assert back.kind == "data" and str(back) == str(err)
    assert exit_code(back) == 1 and exit_code(StageFailed("x", "transient")) == 75
    assert exit_code(StageFailed("x", "usage")) == 2 and exit_code(StageFailed("x")) == 70


def test_retry_policy_uses_the_same_classification():
    from rlvrflow.flows.tasks import retry_if_transient

    class State:
        def __init__(self, exc):
            self.data = exc

    assert retry_if_transient(None, None, State(BrokenProcessPool("died")))
    assert not retry_if_transient(None, None, State(DataError("bad rows")))
    assert not retry_if_transient(None, None, State(ValueError("a bug")))
