"""The `code` verifier: extract the solution, run the reference tests in the sandbox.

reference: JSON object `{"tests": "<python source>", "entry_point": "name", "setup": "<optional
code put before the solution, e.g. imports>"}`. Tests may define `check(candidate)` (called with
the entry point, as HumanEval does), `test_*` functions, or plain top-level asserts.
params: timeout_s (5), memory_mb (512), partial (false: all-or-nothing; true: fraction of test
units passed), sandbox ("bwrap" default, or "rlimits" to run without bubblewrap and without any
filesystem isolation), packages (import names of this environment's packages the program may
use, e.g. [numpy]; the sandbox exposes only those, see mounts.py).
A verdict's detail quotes the program's output only when it failed, and then a clipped excerpt.
"""

from __future__ import annotations

import json

from .. import verdict as V
from .extract import extract_code
from .mounts import PackageUnavailable, package_mounts
from .sandbox import Limits, SandboxUnavailable, run_sandboxed


# The reward canaries (verifiers/canary.py) run every canary program in the sandbox: fewer rows.
CANARY_SAMPLE_ROWS = 16


def parse_reference(reference: str) -> dict:
    try:
        ref = json.loads(reference)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'code reference is not JSON ({exc}); expected {{"tests": "...", "entry_point": "..."}}'
        ) from None
    if not isinstance(ref, dict) or not isinstance(ref.get("tests"), str) or not ref["tests"].strip():
        raise ValueError('code reference needs a non-empty string field "tests"')
    return ref


def _limits(params: dict) -> Limits:
    return Limits(timeout_s=float(params.get("timeout_s", 5.0)), memory_mb=int(params.get("memory_mb", 512)))


def _packages(params: dict) -> tuple[str, ...]:
    names = params.get("packages") or ()
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise PackageUnavailable(f"params.packages must be a list of import names, e.g. [numpy]; got {names!r}")
    return tuple(names)


def verify_code(response: str, reference: str, params: dict) -> V.Verdict:
    try:
        ref = parse_reference(reference)
        packages = _packages(params)
        package_mounts(packages)  # cached; a bad name is the verifier's config error, found before any run
    except ValueError as exc:
        return V.error(str(exc))
    entry = ref.get("entry_point") or None
    code = extract_code(response, entry)
    if code is None or not code.strip():
        return V.unparsed("no Python code block found in the response")
    program = (ref.get("setup") or "") + "\n" + code
    partial = bool(params.get("partial", False))
    try:
        run = run_sandboxed(program, ref["tests"], entry, partial, _limits(params), params.get("sandbox"), packages)
    except SandboxUnavailable as exc:
        return V.error(str(exc), V.clip(code, 200))
    extracted = V.clip(code, 200)
    if run.timed_out:
        return V.timeout(
            f"killed after {params.get('timeout_s', 5.0)} s wall clock; output: {V.clip(run.output, 200)}", extracted
        )
    if not run.reported:
        return V.wrong(
            extracted, f"tests did not complete (exit code {run.returncode}); output: {V.clip(run.output, 300)}"
        )
    if run.passed == run.total:
        return V.correct(extracted, f"passed {run.passed}/{run.total} test units")
    score = run.passed / run.total if partial else 0.0
    return V.wrong(extracted, f"passed {run.passed}/{run.total} test units", score=score)


def check_reference(reference: str, params: dict) -> str | None:
    try:
        ref = parse_reference(reference)
        compile(ref["tests"], "tests", "exec")
    except (ValueError, SyntaxError) as exc:
        return f"code reference unusable: {exc}"
    try:
        package_mounts(_packages(params))
    except PackageUnavailable as exc:
        return f"code params unusable: {exc}"
    return None


def solution_from_reference(reference: str, prompt: str) -> str | None:
    return None  # tests alone cannot produce a solution
