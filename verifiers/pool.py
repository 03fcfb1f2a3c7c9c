"""Run verifiers: `verify` for one response in this process, `score_many` across a warm pool.

`score_many` keeps worker processes alive between calls (a GRPO step scores a few hundred
completions; spawning per item would dominate). Each item gets a wall-clock deadline; a worker
past it is killed (SIGKILL) and replaced, and the item gets status `timeout`. A worker that dies
(segfault, memory kill) costs its item an `error` verdict. Order is preserved and nothing raises
for bad model output, bad params or an unknown verifier name: those become `error` verdicts.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import sys
import threading
import time
from multiprocessing.connection import wait
from typing import Any, Iterable

from . import verdict as V
from ._proc import Child
from .registry import UnknownVerifier, VerifierFn, get_verifier

Item = tuple[str, str, str, Any]


def as_params(params: Any) -> dict:
    """Params arrive as a dict, a JSON object string, or None/empty."""
    if params is None or params == "":
        return {}
    if isinstance(params, dict):
        return params
    if isinstance(params, str):
        value = json.loads(params)
        if isinstance(value, dict):
            return value
    raise ValueError(f"params must be a JSON object or a mapping, got {str(params)[:80]!r}")


def run_one(fn: VerifierFn, response: Any, reference: Any, params: dict) -> V.Verdict:
    """Call a verifier, turning any exception or bad return value into an `error` verdict."""
    try:
        result = fn("" if response is None else str(response), "" if reference is None else str(reference), params)
    except Exception as exc:  # noqa: BLE001 - a verifier bug must not stop a training step
        return V.error(f"verifier raised {type(exc).__name__}: {V.clip(exc, 200)}")
    if not isinstance(result, V.Verdict):
        return V.error(f"verifier returned {type(result).__name__}, expected Verdict")
    return result


def verify(name: str, response: str, reference: str, params: Any = None) -> V.Verdict:
    """Verify one response in this process (no pool, no outer timeout; the code verifier still
    sandboxes and the math voter still times sympy out in its helper)."""
    try:
        fn = get_verifier(name)
        p = as_params(params)
    except (UnknownVerifier, ValueError) as exc:
        return V.error(str(exc))
    return run_one(fn, response, reference, p)


def worker_main(rx, tx) -> None:
    """Loop of a pool worker: receive (index, pickled job), send back (index, verdict).
    A ("sys.path", [...]) message updates the import path; None or EOF stops the loop."""
    import sys

    from .code.processes import become_subreaper
    from .math import symbolic

    become_subreaper()
    while True:
        try:
            msg = rx.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        if msg[0] == "sys.path":
            sys.path[:] = msg[1]
            continue
        idx, blob = msg
        try:
            fn, response, reference, params = pickle.loads(blob)
        except Exception as exc:  # noqa: BLE001 - e.g. the verifier's module is not importable here
            tx.send((idx, V.error(f"cannot load the verifier in a worker process: {type(exc).__name__}: {exc}")))
            continue
        tx.send((idx, run_one(fn, response, reference, params)))
    symbolic.HELPER.stop()


class WarmPool:
    """N worker processes fed one item at a time through pipes, with per-item deadlines."""

    def __init__(self, workers: int) -> None:
        from .code.processes import become_subreaper

        become_subreaper()  # orphans of killed workers come to us, not to a PID 1 that may not reap
        self.n = workers
        self.slots: list[Child | None] = [None] * workers
        self.paths: list[list[str] | None] = [None] * workers

    def _spawn(self, i: int) -> Child:
        self.slots[i] = Child("rlvrflow.verifiers.pool:worker_main")
        self.paths[i] = None
        return self.slots[i]

    def _kill(self, i: int) -> None:
        from .code.processes import reap_sandbox_orphans

        if self.slots[i] is not None:
            self.slots[i].kill()
        self.slots[i] = None
        reap_sandbox_orphans()  # a killed worker's sandboxes were reparented to us

    def close(self) -> None:
        for i, child in enumerate(self.slots):
            if child is not None:
                try:
                    child.tx.send(None)
                    child.proc.wait(timeout=2)
                except Exception:  # noqa: BLE001 - best effort; _kill below is certain
                    pass
                self._kill(i)

    def run(self, jobs: list[tuple], timeout_s: float, progress=None) -> list[V.Verdict]:
        results: list[V.Verdict | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))[::-1]
        busy: dict[int, tuple[int, float]] = {}  # slot -> (job index, deadline)
        while pending or busy:
            for i in range(self.n):
                if i not in busy and pending:
                    j = pending.pop()
                    child = self.slots[i] or self._spawn(i)
                    if not child.alive():
                        self._kill(i)
                        child = self._spawn(i)
                    if self.paths[i] != sys.path:
                        child.tx.send(("sys.path", list(sys.path)))
                        self.paths[i] = list(sys.path)
                    idx, fn, response, reference, params = jobs[j]
                    child.tx.send((idx, pickle.dumps((fn, response, reference, params))))
                    busy[i] = (j, time.monotonic() + timeout_s)
            soonest = min(d for _, d in busy.values())
            ready = wait([self.slots[i].rx for i in busy], timeout=max(0.0, soonest - time.monotonic()))
            for i in list(busy):
                j, deadline = busy[i]
                conn = self.slots[i].rx
                if conn in ready:
                    try:
                        _, results[j] = conn.recv()
                    except (EOFError, OSError):
                        results[j] = V.error("verifier worker died (crash or memory kill)")
                        self._kill(i)
                elif time.monotonic() >= deadline:
                    results[j] = V.timeout(f"no verdict within {timeout_s:g} s; worker killed")
                    self._kill(i)
                else:
                    continue
                del busy[i]
                if progress is not None:
                    progress.update(1)
        return results  # type: ignore[return-value]


_POOL: WarmPool | None = None
_POOL_LOCK = threading.RLock()  # callers in several threads (a threaded task runner) take turns


def _pool(workers: int) -> WarmPool:
    global _POOL
    if _POOL is None or _POOL.n != workers:
        if _POOL is not None:
            _POOL.close()
        _POOL = WarmPool(workers)
    return _POOL


@atexit.register
def shutdown() -> None:
    """Stop the warm pool (also runs at interpreter exit)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.close()
            _POOL = None


def _prepare(items: Iterable[Item]) -> tuple[list[tuple], dict[int, V.Verdict]]:
    fns: dict[str, VerifierFn | V.Verdict] = {}
    jobs, early = [], {}
    for idx, (name, response, reference, params) in enumerate(items):
        if name not in fns:
            try:
                fn = get_verifier(name)
                pickle.dumps(fn)
                fns[name] = fn
            except UnknownVerifier as exc:
                fns[name] = V.error(str(exc))
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                fns[name] = V.error(
                    f"verifier {name!r} cannot be sent to worker processes "
                    f"({exc}); define it at module level in an importable module"
                )
        try:
            p = as_params(params)
        except ValueError as exc:
            early[idx] = V.error(str(exc))
            continue
        if isinstance(fns[name], V.Verdict):
            early[idx] = fns[name]
            continue
        jobs.append((idx, fns[name], response, reference, p))
    return jobs, early


def score_many(
    items: Iterable[Item], workers: int | None = None, timeout_s: float = 30.0, progress=None
) -> list[V.Verdict]:
    """Verdicts for `(verifier_name, response, reference, params)` items, in order.

    workers=None uses every core; workers=0 runs in this process (no timeouts; for debugging).
    `progress` is anything with `.update(n)` (a tqdm bar)."""
    jobs, early = _prepare(items)
    n_items = len(jobs) + len(early)
    out: list[V.Verdict | None] = [None] * n_items
    for idx, v in early.items():
        out[idx] = v
    if progress is not None and early:
        progress.update(len(early))
    if workers == 0:
        for idx, fn, response, reference, p in jobs:
            out[idx] = run_one(fn, response, reference, p)
            if progress is not None:
                progress.update(1)
        return out  # type: ignore[return-value]
    if jobs:
        with _POOL_LOCK:  # workers start lazily: a small batch wakes only as many as it needs
            pool = _pool(max(1, workers or os.cpu_count() or 1))
            verdicts = pool.run(jobs, timeout_s, progress)
        for (idx, *_), v in zip(jobs, verdicts):
            out[idx] = v
    return out  # type: ignore[return-value]
