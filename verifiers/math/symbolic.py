"""The symbolic voter: math-verify's LaTeX parser and comparison in a helper process with a timeout.

LaTeX is parsed by math-verify (`latex2sympy2_extended`, an ANTLR grammar: model text is never
evaluated as Python) and compared by math-verify's `verify` (sets, intervals, matrices, relations
compared after moving terms, equivalent expressions; a sum or product of explicit matrices is
evaluated to the matrix it makes; a decimal matches an irrational gold to `float_digits`
places). Before that, our own guards: an answer that is or holds an infinity, NaN or a complex infinity, or whose
value is beyond float range, never equals a gold that is not such a value itself. With
`exact=True` (a number gold, an expression answer, `allow_expressions`) the answer must evaluate
to exactly the gold: `3*12` is 36, `2^{10000}` is compared as an exact integer.

The comparison runs in a long-lived helper process (one per calling process) under an
address-space limit; past the timeout the helper is killed and restarted on the next call, so
`9^{9^{9^9}}` costs one timeout, never a hang. No `signal.alarm` anywhere (math-verify's own
timeouts use it; they are switched off here and the process timeout replaces them).
"""

from __future__ import annotations

import threading

from .._proc import Child

MAX_CHARS = 1000
HELPER_MEMORY_BYTES = 3 << 30
HUGE = 10**300
_CACHE_SIZE = 4096
STARTUP_TIMEOUT_S = 120.0


def _parse(text: str, cache: dict):
    """[sympy object, its text] as math-verify's verify wants it, [] when it does not parse.
    The text is already extracted and normalized, so latex2sympy is called directly (half the
    cost of math-verify's parse, which would search it for an answer again); math-verify's parse
    is the fallback for what that misses."""
    if text in cache:
        return cache[text]
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
    from math_verify import LatexExtractionConfig, parse
    from math_verify.parser import should_treat_as_complex

    try:
        latex = normalize_latex(
            text,
            NormalizationConfig(
                basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="all", equations=False
            ),
        )
        got = [
            latex2sympy(
                latex, is_real=not should_treat_as_complex(latex), convert_degrees=False, normalization_config=None
            ),
            latex,
        ]
    except Exception:  # noqa: BLE001 - the grammar raises many types; try math-verify's own route
        got = parse(f"${text}$", [LatexExtractionConfig(boxed_match_priority=0)], parsing_timeout=None)
    got = [_evaluated(x) for x in got]
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[text] = got
    return got


def _evaluated(obj):
    """A sum or product of explicit matrices (`A + B`, `A B`) is the matrix it makes, as a
    matrix whose entries are written as sums already is; one whose shapes do not fit stays as
    written and equals no matrix."""
    import sympy

    if isinstance(obj, sympy.MatrixExpr) and not isinstance(obj, sympy.MatrixSymbol):
        try:
            return obj.doit()
        except Exception:  # noqa: BLE001 - ShapeError and kin: the expression names no matrix
            return obj
    return obj


def _not_finite(objs) -> bool:
    """True when a parsed value is or holds an infinity or NaN, or evaluates beyond float range."""
    import sympy

    bad = (sympy.oo, -sympy.oo, sympy.zoo, sympy.nan)
    for obj in objs:
        if isinstance(obj, str) or not isinstance(obj, sympy.Basic) or isinstance(obj, sympy.MatrixExpr):
            continue
        if any(obj.has(b) for b in bad):
            return True
        if isinstance(obj, sympy.Expr) and not obj.free_symbols:
            value = sympy.N(obj, 15)
            if value.has(*bad) or (value.is_number and abs(value) > HUGE):
                return True
    return False


def _exact_equal(gold, pred) -> bool | None:
    import sympy

    g = next((x for x in gold if isinstance(x, sympy.Expr)), None)
    p = next((x for x in pred if isinstance(x, sympy.Expr)), None)
    if g is None or p is None:
        return None
    if p.free_symbols:
        return False
    return bool(sympy.simplify(p - g) == 0)


def compare(gold_text: str, pred_text: str, float_digits: int, exact: bool, cache: dict) -> bool | None:
    """True/False, or None when either side does not parse (runs in the helper)."""
    from math_verify import verify

    gold, pred = _parse(gold_text, cache), _parse(pred_text, cache)
    if not gold or not pred:
        return None
    if _not_finite(pred) and not _not_finite(gold):
        return False
    if exact:
        return _exact_equal(gold, pred)
    quick = _quick_equal(gold[0], pred[0])
    if quick is not None:
        return quick
    return bool(verify(gold, pred, float_rounding=float_digits, timeout_seconds=None))


_POINTS = (
    (0.5772156649, 1.4142135623, 2.7182818284),
    (-1.7320508075, 0.6180339887, -3.1415926535),
    (2.2360679774, -0.7071067811, 1.1447298858),
    (-0.3678794411, -2.4142135623, 0.9159655941),
)
_OPAQUE = (
    "Abs",
    "Piecewise",
    "Max",
    "Min",
    "floor",
    "ceiling",
    "sign",
    "Mod",
    "Sum",
    "Product",
    "Integral",
    "Limit",
    "Derivative",
    "frac",
    "re",
    "im",
    "arg",
)


def _quick_equal(g, p) -> bool | None:
    """A fast decision for two exact expressions before math-verify's `verify` is asked: their
    difference evaluated to 60 digits at four points (negative values included) for the free
    symbols. A relative difference above 1e-9 at any point is `False`; an absolute and relative
    difference below 1e-50 at every point is `True`. Anything else goes to `verify`: decimals
    (float_digits rounding applies there), piecewise functions (`|x|`, max, floor: the points
    could miss where they differ), undefined points, huge values, errors."""
    import sympy

    try:
        if not (isinstance(g, sympy.Expr) and isinstance(p, sympy.Expr)) or g.has(sympy.Float) or p.has(sympy.Float):
            return None
        names = {type(f).__name__ for e in (g, p) for f in e.atoms(sympy.Function)} | {
            type(e).__name__ for e in (g, p) for e in sympy.preorder_traversal(e)
        }
        if names & set(_OPAQUE) or g.free_symbols != p.free_symbols or len(g.free_symbols) > 3:
            return None
        symbols = sorted(g.free_symbols, key=str)
        if not symbols and g.is_rational and p.is_rational:  # `10^{100}+1` is not `10^{100}`: exact
            return bool(sympy.simplify(g - p) == 0)
        all_equal = True
        for point in _POINTS:
            subs = {s: sympy.Float(v, 60) for s, v in zip(symbols, point)}
            gv, pv = g.evalf(60, subs=subs), p.evalf(60, subs=subs)
            if not (gv.is_number and pv.is_number) or any(
                x.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) for x in (gv, pv)
            ):
                return None
            diff = abs(complex(gv - pv)) if max(abs(gv), abs(pv)) < 1e300 else None
            scale = max(abs(complex(gv)), abs(complex(pv))) if diff is not None else None
            if diff is None:
                return None
            if scale > 0 and diff / scale > 1e-9:
                return False
            all_equal = all_equal and diff < 1e-50 and (scale == 0 or diff / scale < 1e-50)
        return True if all_equal else None
    except Exception:  # noqa: BLE001 - sympy raises anything (divergent sums, ...): let verify decide
        return None


def helper_main(rx, tx) -> None:
    import logging
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (HELPER_MEMORY_BYTES, HELPER_MEMORY_BYTES))
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    import math_verify  # noqa: F401 - imported before "ready", so no request pays for it
    import sympy  # noqa: F401

    tx.send("ready")
    cache: dict = {}
    while True:
        try:
            gold, pred, digits, exact = rx.recv()
        except (EOFError, OSError):
            return
        try:
            result = compare(gold, pred, digits, exact, cache)
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

    def equal(self, request: tuple, timeout_s: float) -> bool | None | str:
        """True/False, None when sympy cannot decide, "timeout" when it ran out of time."""
        with self.lock:
            if self.child is None or not self.child.alive():
                self.stop()
                self.child = Child("rlvrflow.verifiers.math.symbolic:helper_main")
                try:  # the imports take seconds on a busy machine; they are not the request's time
                    ready = self.child.rx.poll(STARTUP_TIMEOUT_S) and self.child.rx.recv() == "ready"
                except (EOFError, OSError):
                    ready = False
                if not ready:
                    self.stop()
                    return None
            try:
                self.child.tx.send(request)
                if self.child.rx.poll(timeout_s):
                    return self.child.rx.recv()
            except (EOFError, OSError):
                self.stop()
                return None
            self.stop()
            return "timeout"


HELPER = _Helper()


def symbolic_equal(gold: str, pred: str, float_digits: int, timeout_s: float, exact: bool = False) -> bool | None | str:
    if len(gold) > MAX_CHARS or len(pred) > MAX_CHARS:
        return None
    return HELPER.equal((gold, pred, int(float_digits), exact), timeout_s)
