"""Math verdicts per second and accuracy: rlvrflow's `math` verifier against math-verify.

    .venv/bin/python bench/math_verdicts.py [--rows 3000] [--repeats 5] [--seed 0]

The timed rows are the realistic mix of bench/cases/math_mix.py (half plain-number golds, half
LaTeX or wrapped; about 45% wrong; truth known by construction; rows whose truth depends on a
grading convention are left out, see there), with the hand-labelled real Chinese replies of
tests/verifiers/cases/real_model_endings.jsonl spread through it. Both sides run in this process, one row at a time:
ours is `verify_math(response, gold, {})`; math-verify is `parse(gold)`, `parse(response)`,
`verify(gold, pred)` with its defaults (its signal.alarm timeouts work here, in the main thread).
A bare LaTeX gold is handed to math-verify in `$...$`, the form its README uses: without it
`parse("\\dfrac{5}{12}")` finds nothing and `parse("2\\sqrt{2}")` reads 2. Plain numbers and golds
that already hold `$` or `\\boxed` go as stored (so does `1,234`; the outside table's decimal-comma
gold `1,22` is wrapped and then reads as two values, which costs math-verify that one case).

Startup is not timed: both sides first judge warm-up rows from another seed, which starts our
symbolic helper process and loads math-verify's grammar. The rows are split into `--repeats`
chunks; each chunk is timed for ours then for math-verify, and the median chunk rate is reported
with the range. Our time is wall time and includes waiting for the symbolic helper. Golds seldom
repeat (see math_mix.py), so neither side's parse cache does much.

Accuracy is against the labels: the mix's truth; bench/cases/math_cases.jsonl's `expected` (our own
table; rows may carry `params`, which math-verify has no equivalent for); and
tests/verifiers/cases/math_verify_cases.jsonl (math-verify's own test cases, an outside table on
which math-verify naturally scores high; its tests use per-case extraction settings, this bench
its defaults).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "cases"))

import math_mix  # noqa: E402

PROJECT = ROOT / "bench" / "cases" / "math_cases.jsonl"
OUTSIDE = ROOT / "tests" / "verifiers" / "cases" / "math_verify_cases.jsonl"
_PLAIN = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?|[-+]?\.\d+")


def ours(gold: str, response: str, params: dict | None = None) -> bool:
    from rlvrflow.verifiers.math.verifier import verify_math

    return verify_math(response, gold, params or {}).correct


def peer_gold(gold: str) -> str:
    """The gold as math-verify's README hands it over (see the module docstring)."""
    if _PLAIN.fullmatch(gold.strip()) or "$" in gold or "\\boxed" in gold:
        return gold
    return f"${gold}$"


def peer(gold: str, response: str, params: dict | None = None) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(peer_gold(gold)), parse(response)))
    except Exception:  # noqa: BLE001 - a crash counts as "no"
        return False


def timed(fn, rows) -> tuple[float, list[bool]]:
    t0 = time.perf_counter()
    out = [fn(r.gold, r.response) for r in rows]
    return len(rows) / (time.perf_counter() - t0), out


def accuracy(fn, cases: list[dict], pred_key: str) -> float:
    return sum(int(fn(c["gold"], c[pred_key], c.get("params"))) == c["expected"] for c in cases) / len(cases)


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def time_both(rows: list, repeats: int) -> tuple[dict, dict, int]:
    """Per-chunk rates and all verdicts of both sides; each chunk is timed for ours, then the peer."""
    size = -(-len(rows) // repeats)
    rates: dict[str, list[float]] = {"ours": [], "peer": []}
    verdicts: dict[str, list[bool]] = {"ours": [], "peer": []}
    for i in range(0, len(rows), size):
        for name, fn in (("ours", ours), ("peer", peer)):
            rate, out = timed(fn, rows[i : i + size])
            rates[name].append(rate)
            verdicts[name] += out
    return rates, verdicts, size


def breakdown(rows: list, verdicts: dict, field: str) -> None:
    """Mix accuracy of both sides per gold kind or per response form."""
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r, o, p in zip(rows, verdicts["ours"], verdicts["peer"]):
        g = groups[getattr(r, field)]
        g[0], g[1], g[2] = g[0] + 1, g[1] + (o == r.truth), g[2] + (p == r.truth)
    print(f"\nmix accuracy by {field:14}{'rows':>6}{'rlvrflow':>10}{'math-verify':>13}")
    for key, (n, o, p) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"  {key:26}{n:6}{o / n:10.1%}{p / n:13.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        import math_verify  # noqa: F401
    except ImportError:
        sys.exit("math-verify is not installed: .venv/bin/pip install -q math-verify")
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # parse failures log; not timed work

    for r in math_mix.rows(100, a.seed + 1_000_000):  # warm-up: helper start, grammar load, imports
        ours(r.gold, r.response), peer(r.gold, r.response)
    rows = math_mix.with_real_endings(math_mix.rows(a.rows, a.seed), "zh")
    rates, verdicts, size = time_both(rows, a.repeats)
    med = {k: statistics.median(v) for k, v in rates.items()}
    acc = {k: sum(v == r.truth for v, r in zip(vs, rows)) / len(rows) for k, vs in verdicts.items()}

    print(f"command: .venv/bin/python bench/math_verdicts.py --rows {a.rows} --repeats {a.repeats} --seed {a.seed}")
    wrong = sum(not r.truth for r in rows) / len(rows)
    plain = sum(r.kind in math_mix.PLAIN_KINDS for r in rows) / len(rows)
    real = sum(r.kind == "real-model" for r in rows)
    print(
        f"mix: {len(rows)} rows ({plain:.0%} plain-number golds, {wrong:.0%} wrong, {real} real Chinese replies), "
        f"{len(rates['ours'])} chunks of {size}, one process, one row at a time\n"
    )
    print(f"{'':16}{'verdicts/s (median)':>20}{'chunk range':>16}{'mix accuracy':>14}")
    for name, label in (("ours", "rlvrflow math"), ("peer", "math-verify")):
        lo, hi = min(rates[name]), max(rates[name])
        print(f"{label:16}{med[name]:20,.0f}{f'{lo:,.0f}-{hi:,.0f}':>16}{acc[name]:14.1%}")
    ratio = med["ours"] / med["peer"]
    met = ratio >= 5 and acc["ours"] >= acc["peer"]
    print(f"ratio {ratio:.1f}x; goal >= 5x at equal or better mix accuracy: {'met' if met else 'NOT met'}")
    breakdown(rows, verdicts, "kind")
    breakdown(rows, verdicts, "template")

    for title, path, key in (
        ("project table (our own)", PROJECT, "response"),
        ("outside table (math-verify's own tests)", OUTSIDE, "pred"),
    ):
        cases = load(path)
        print(
            f"\n{title}, {path.relative_to(ROOT)}, {len(cases)} cases: "
            f"rlvrflow {accuracy(ours, cases, key):.1%}, math-verify {accuracy(peer, cases, key):.1%}"
        )


if __name__ == "__main__":
    main()
