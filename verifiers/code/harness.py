"""Runs the tests and reports over the result fd: `units` and `finish` serve remote.py's tests
process in the bwrap sandbox; `main` runs solution and tests in one process in rlimits-only mode.

Usage (rlimits-only mode): python harness.py RESULT_FD ENTRY_POINT PARTIAL [PATH...]   (the nonce
arrives on stdin; each PATH is put on sys.path).
The report `<nonce> <passed> <total>` is written to RESULT_FD only after the tests returned;
then the process leaves with os._exit so no atexit hook or finalizer of the solution runs after.
Stdout, stderr and the exit code are never read as a verdict. Standard library only.
"""
import ast
import os
import sys


def units(tests_src, ns, entry, partial):
    """Callables, each one test unit: test_* functions, the asserts of check(), or all of check."""
    if "check" in ns and entry:
        candidate = ns.get(entry)
        if candidate is None:
            raise NameError(f"entry point {entry!r} is not defined by the solution")
        if not partial:
            return [lambda: ns["check"](candidate)]
        return _split_check(tests_src, ns, candidate)
    tests = [v for k, v in ns.items() if k.startswith("test_") and callable(v)]
    return tests


def _split_check(tests_src, ns, candidate):
    """One unit per top-level statement of check() that is an assert; other statements run first."""
    tree = ast.parse(tests_src)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    arg = check.args.args[0].arg if check.args.args else "candidate"
    setup = [s for s in check.body if not isinstance(s, ast.Assert)]
    units = []
    for stmt in check.body:
        if isinstance(stmt, ast.Assert):
            fn = ast.FunctionDef(name="_unit", args=ast.arguments(posonlyargs=[], args=[ast.arg(arg)],
                                 kwonlyargs=[], kw_defaults=[], defaults=[]),
                                 body=setup + [stmt], decorator_list=[], returns=None, type_params=[])
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
    ns = {"__name__": "__solution__", "__builtins__": __builtins__}
    exec(compile(solution, "solution.py", "exec"), ns)
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
