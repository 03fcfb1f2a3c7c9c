"""The symbolic voter: LaTeX-ish answers to sympy, compared in a helper process with a timeout.

sympy's `parse_expr` evaluates its input, so model text is first converted and then checked
against a whitelist (digits, single-letter symbols, a few function names, arithmetic); anything
else abstains. The comparison runs in a long-lived helper process (one per calling process) under
an address-space limit; past the timeout the helper is killed and restarted on the next call, so
`x^(9^(9^9))` costs one timeout, never a hang. No `signal.alarm` anywhere.
"""
from __future__ import annotations

import re
import threading

from .._proc import Child

FUNCS = {"sqrt", "pi", "oo", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan",
         "log", "exp", "Abs", "E", "I"}
_LATEX = [
    (re.compile(r"\\(?:cdot|times|ast)"), "*"), (re.compile(r"\\div"), "/"),
    (re.compile(r"\\pi"), " pi "), (re.compile(r"\\infty"), " oo "), (re.compile(r"\\ln"), " log"),
    (re.compile(r"\\(log|sin|cos|tan|cot|sec|csc|exp)"), r" \1"),
    (re.compile(r"\\arc(sin|cos|tan)"), r" a\1"),
]
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
_ROOT = re.compile(r"\\sqrt\[([^\[\]{}]*)\]\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\{([^{}]*)\}")
_ABS = re.compile(r"\|([^|]*)\|")
_SAFE = re.compile(r"^[0-9a-zA-Z_+\-*/(). ]*$")
_IDENT = re.compile(r"[A-Za-z_]+")
MAX_CHARS = 300
HELPER_MEMORY_BYTES = 2 << 30


def to_sympy_text(s: str) -> str | None:
    """Convert a normalized answer to sympy syntax, or None if it is outside the safe subset."""
    if len(s) > MAX_CHARS or re.search(r"\d\s+\d", s) or "=" in s or "%" in s:
        return None
    for pat, rep in _LATEX:
        s = pat.sub(rep, s)
    for _ in range(8):
        s2 = _ROOT.sub(r"((\2)**(1/(\1)))", s)
        s2 = _FRAC.sub(r"((\1)/(\2))", s2)
        s2 = _SQRT.sub(r"sqrt(\1)", s2)
        if s2 == s:
            break
        s = s2
    s = _ABS.sub(r"Abs(\1)", s)
    s = s.replace("^", "**").replace("{", "(").replace("}", ")").replace("[", "(").replace("]", ")")
    if "\\" in s or not _SAFE.match(s) or "__" in s or re.search(r"\.\s*[A-Za-z_]", s):
        return None
    for ident in _IDENT.findall(s):
        if len(ident) > 1 and ident not in FUNCS:
            return None
    return s.strip() or None


def _equal_in_sympy(a: str, b: str, rel_tol: float) -> bool | None:
    import sympy
    from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application,
                                            parse_expr, standard_transformations)

    trans = standard_transformations + (implicit_multiplication_application, convert_xor)
    names = {n: getattr(sympy, n) for n in FUNCS}
    ea = parse_expr(a, local_dict=dict(names), transformations=trans, evaluate=True)
    eb = parse_expr(b, local_dict=dict(names), transformations=trans, evaluate=True)
    if not (isinstance(ea, sympy.Expr) and isinstance(eb, sympy.Expr)):
        return None
    if not ea.free_symbols and not eb.free_symbols:
        va, vb = complex(sympy.N(ea, 30)), complex(sympy.N(eb, 30))
        return abs(va - vb) <= rel_tol * max(abs(va), abs(vb)) + 1e-12
    if ea.free_symbols != eb.free_symbols:
        return False
    return sympy.simplify(ea - eb) == 0


def helper_main(rx, tx) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (HELPER_MEMORY_BYTES, HELPER_MEMORY_BYTES))
    while True:
        try:
            a, b, rel_tol = rx.recv()
        except (EOFError, OSError):
            return
        try:
            result = _equal_in_sympy(a, b, rel_tol)
        except BaseException:  # noqa: BLE001 - sympy raises anything; an abstention, not a crash
            result = None
        tx.send(result)


class _Helper:
    """One sympy helper process per calling process, restarted after a timeout."""

    def __init__(self) -> None:
        self.child: Child | None = None
        self.lock = threading.Lock()  # one request at a time on the pipe

    def stop(self) -> None:
        if self.child is not None:
            self.child.kill()
        self.child = None

    def equal(self, a: str, b: str, rel_tol: float, timeout_s: float) -> bool | None | str:
        """True/False, None when sympy cannot decide, "timeout" when it ran out of time."""
        with self.lock:
            return self._equal(a, b, rel_tol, timeout_s)

    def _equal(self, a: str, b: str, rel_tol: float, timeout_s: float) -> bool | None | str:
        if self.child is None or not self.child.alive():
            self.stop()
            self.child = Child("verifiers.math.symbolic:helper_main")
        try:
            self.child.tx.send((a, b, rel_tol))
            if self.child.rx.poll(timeout_s):
                return self.child.rx.recv()
        except (EOFError, OSError):
            self.stop()
            return None
        self.stop()
        return "timeout"


HELPER = _Helper()


def symbolic_equal(gold: str, pred: str, rel_tol: float, timeout_s: float) -> bool | None | str:
    a, b = to_sympy_text(gold), to_sympy_text(pred)
    if a is None or b is None:
        return None
    return HELPER.equal(a, b, rel_tol, timeout_s)
