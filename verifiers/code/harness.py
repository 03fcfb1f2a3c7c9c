"""Runs the tests and reports over the result fd: `units` and `finish` serve remote.py's tests
process in the bwrap sandbox; `main` runs solution and tests in one process in rlimits-only mode.

Usage (rlimits-only mode): python harness.py RESULT_FD ENTRY_POINT PARTIAL [PATH...]   (the nonce
arrives on stdin; each PATH is put on sys.path).
The report `<nonce> <passed> <total>` is written to RESULT_FD only after the tests returned;
then the process leaves with os._exit so no atexit hook or finalizer of the solution runs after.
Stdout, stderr and the exit code are never read as a verdict. Standard library only.
"""

import ast
import builtins
import os
import sys


def _defs(tree):
    """The functions the tests' module defines at its top level (also under if/try/with), by name."""
    found, todo = {}, list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif not isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef)):
            todo += [n for field in ("body", "orelse", "finalbody") for n in getattr(node, field, [])]
            todo += [n for h in getattr(node, "handlers", []) for n in h.body]
    return found


def _unit_name(name):
    return name == "check" or name.startswith("test_")


def visible(tests_src, solution_names, entry):
    """The solution names the tests get: the entry point, and the names the tests use that are
    neither built-ins (a solution's `abs` would decide the tests' `abs(...) < eps`) nor test
    units (only the tests' own `check` and `test_*` are run)."""
    used = {n.id for n in ast.walk(ast.parse(tests_src)) if isinstance(n, ast.Name)}
    return [
        name
        for name in solution_names
        if name == entry
        or (name in used and not name.startswith("__") and not hasattr(builtins, name) and not _unit_name(name))
    ]


def units(tests_src, ns, entry, partial):
    """Callables, each one test unit: test_* functions, the asserts of check(), or all of check.
    Only functions the tests' own source defines are units, whatever else `ns` holds."""
    defs = _defs(ast.parse(tests_src))
    if "check" in defs and entry:
        candidate = ns.get(entry)
        if candidate is None:
            raise NameError(f"entry point {entry!r} is not defined by the solution")
        if not partial:
            return [lambda: ns["check"](candidate)]
        return _split_check(defs["check"], ns, candidate)
    return [ns[name] for name in defs if name.startswith("test_") and callable(ns.get(name))]


def _split_check(check, ns, candidate):
    """One unit per top-level statement of check() that is an assert; other statements run first."""
    arg = check.args.args[0].arg if check.args.args else "candidate"
    setup = [s for s in check.body if not isinstance(s, ast.Assert)]
    units = []
    for stmt in check.body:
        if isinstance(stmt, ast.Assert):
            fn = ast.FunctionDef(
                name="_unit",
                args=ast.arguments(posonlyargs=[], args=[ast.arg(arg)], kwonlyargs=[], kw_defaults=[], defaults=[]),
                body=setup + [stmt],
                decorator_list=[],
                returns=None,
                type_params=[],
            )
            mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
            local = {}
            exec(compile(mod, "<tests>", "exec"), ns, local)
            units.append(lambda f=local["_unit"]: f(candidate))
    return units or [lambda: ns["check"](candidate)]


def run_and_report(result_fd, nonce, entry, partial):
    """Run solution.py then tests.py from the current directory; report, then os._exit(0)."""
    sys.stdin = open(os.devnull)
    with open("solution.py") as f:
        solution = f.read()
    with open("tests.py") as f:
        tests = f.read()
    sol = {"__name__": "__solution__", "__builtins__": builtins}
    exec(compile(solution, "solution.py", "exec"), sol)
    ns = {"__name__": "__tests__", "__builtins__": builtins}
    ns.update({name: sol[name] for name in visible(tests, sol, entry)})
    exec(compile(tests, "tests.py", "exec"), ns)
    finish(units(tests, ns, entry, partial), partial, result_fd, nonce)


def finish(test_units, partial, result_fd, nonce):
    """Run the units; on completion write the report and leave at once (no atexit, no finalizers)."""
    passed = 0
    for unit in test_units:
        try:
            unit()
            passed += 1
        except Exception as exc:  # a failing test; BaseException (SystemExit) aborts the run
            if not partial:
                raise
            print(f"test failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    total = max(len(test_units), 1)
    os.write(result_fd, f"{nonce} {passed if test_units else 1} {total}\n".encode())
    sys.stdout.flush()
    os._exit(0)


def main():
    result_fd, entry, partial = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    sys.path[:0] = sys.argv[4:]
    nonce = sys.stdin.readline().strip()
    run_and_report(result_fd, nonce, entry, partial)


if __name__ == "__main__":
    main()
