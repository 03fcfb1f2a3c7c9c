"""What kind of failure an exception is: a usage error, a data error, a transient fault, or a bug.

One module decides, by type (never by class-name strings), and both consumers import it: the CLI
turns the kind into its exit code (`exit_code`) and Prefect's retry policy retries only transient
failures (`flows.tasks.retry_if_transient`).

    usage      the spec or the command line is wrong            exit 2, never retried
    data       the rows or files failed a check (fix the data)  exit 1, never retried
    transient  a worker process died, a connection dropped      exit 75 (EX_TEMPFAIL), retried
    bug        anything else: the code is wrong                 exit 70 (EX_SOFTWARE), never retried

Third-party transient types are matched by class: `concurrent.futures.BrokenExecutor` (and its
`BrokenProcessPool`), `ConnectionError`, `TimeoutError`, and Dask's `KilledWorker` and
`CommClosedError` when `distributed` is loaded (an exception of its types cannot exist otherwise,
so it is never imported here). Library error classes are imported when first classified, so
importing this module stays cheap.
"""

from __future__ import annotations

import sys
from concurrent.futures import BrokenExecutor
from typing import Literal

Kind = Literal["usage", "data", "transient", "bug"]
EXIT_CODES: dict[str, int] = {"data": 1, "usage": 2, "bug": 70, "transient": 75}

__all__ = ["DataError", "TransientError", "StageFailed", "Kind", "EXIT_CODES", "classify", "exit_code", "is_transient"]


class DataError(ValueError):
    """The inputs (rows, files, references) failed a check; the message names what and the fix."""


class TransientError(RuntimeError):
    """A fault worth retrying unchanged (a lost worker, a dropped connection)."""


class StageFailed(RuntimeError):
    """A stage could not produce its output: which stage, for which domain and spec, and why.

    `kind` is the classification of the cause, kept through pickling (Dask, Prefect results)."""

    def __init__(self, message: str, kind: Kind = "bug"):
        super().__init__(message)
        self.kind: Kind = kind

    def __reduce__(self):
        return (type(self), (str(self), self.kind))


def _usage_types() -> tuple[type, ...]:
    from rlvrflow.flows.spec import SpecError
    from rlvrflow.verifiers.registry import UnknownVerifier

    return (SpecError, UnknownVerifier)


def _data_types() -> tuple[type, ...]:
    from rlvrflow.cleaning.ingest import IngestError
    from rlvrflow.cleaning.validate import ValidationFailed

    return (DataError, IngestError, ValidationFailed, FileNotFoundError)


def _transient_types() -> tuple[type, ...]:
    found: list[type] = [TransientError, BrokenExecutor, ConnectionError, TimeoutError]
    if "distributed" in sys.modules:
        from distributed import KilledWorker
        from distributed.comm.core import CommClosedError

        found += [KilledWorker, CommClosedError]
    return tuple(found)


def _own_kind(exc: BaseException) -> Kind | None:
    if isinstance(exc, StageFailed):
        return exc.kind
    if isinstance(exc, _transient_types()):
        return "transient"
    if isinstance(exc, _usage_types()):
        return "usage"
    if isinstance(exc, _data_types()):
        return "data"
    return None


def classify(exc: BaseException | None) -> Kind:
    """The kind of `exc`: the first exception along its cause chain whose type is known, else bug."""
    seen = 0
    while exc is not None and seen < 8:
        kind = _own_kind(exc)
        if kind is not None:
            return kind
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return "bug"


def is_transient(exc: BaseException | None) -> bool:
    return exc is not None and classify(exc) == "transient"


def exit_code(exc: BaseException) -> int:
    """The CLI's exit code for a failure of this kind (see the table above)."""
    return EXIT_CODES[classify(exc)]
