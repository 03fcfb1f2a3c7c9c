"""Math verdicts per second: rlvrflow's `math` verifier against math-verify's parse + verify.

Both run in this process, one row at a time, on the same rows: a mix of typical short answers
(integers, decimals, fractions, percents, currency, \\boxed, `Answer:`, `答案是`), half of them
correct. Then both are scored on the project's own table (bench/cases/math_cases.jsonl), where a
verdict counts as right when it matches the table's expected label.

    .venv/bin/pip install -q math-verify      # the peer (pyproject extra `bench`)
    .venv/bin/python bench/math_verdicts.py [--rows 3000] [--seed 0]

Prints both rates, the ratio (goal >= 5x) and both accuracies. math-verify's own timeouts use
signal.alarm, which works here because the benchmark runs in the main thread.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = Path(__file__).with_name("cases") / "math_cases.jsonl"
FORMATS = ["Answer: {}", "The answer is {}.", "\\boxed{{{}}}", "So the final answer is $\\boxed{{{}}}$.",
           "答案是 {}", "We compute step by step.\nAnswer: {}"]


def typical_rows(n: int, seed: int) -> list[tuple[str, str]]:
    """(gold, response) pairs of typical short answers; about half are correct."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        kind = rng.randrange(5)
        a, b = rng.randrange(1, 500), rng.randrange(2, 20)
        if kind == 0:
            gold, ans = str(a), str(a)
        elif kind == 1:
            gold, ans = f"{a / 4:g}", f"{a / 4:g}"
        elif kind == 2:
            gold, ans = f"{a}/{b}", f"\\frac{{{a}}}{{{b}}}"
        elif kind == 3:
            gold, ans = f"{a}%", f"{a}\\%"
        else:
            gold, ans = f"{a * 1000:,}", str(a * 1000)
        if rng.random() < 0.5:
            ans = str(a + 1)
        rows.append((gold, rng.choice(FORMATS).format(ans)))
    return rows


def ours(gold: str, response: str) -> bool:
    from verifiers.math.verifier import verify_math

    return verify_math(response, gold, {}).correct


def peer(gold: str, response: str) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(gold), parse(response)))
    except Exception:  # noqa: BLE001 - count a crash as a "no"
        return False


def rate(fn, rows) -> tuple[float, list[bool]]:
    t0 = time.perf_counter()
    out = [fn(g, r) for g, r in rows]
    return len(rows) / (time.perf_counter() - t0), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        import math_verify  # noqa: F401
    except ImportError:
        sys.exit("math-verify is not installed: .venv/bin/pip install -q math-verify")
    rows = typical_rows(a.rows, a.seed)
    ours(*rows[0]), peer(*rows[0])  # warm imports
    ours_rate, ours_v = rate(ours, rows)
    peer_rate, peer_v = rate(peer, rows)
    agree = sum(x == y for x, y in zip(ours_v, peer_v)) / len(rows)
    cases = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line]
    pairs = [(c["gold"], c["response"]) for c in cases]
    _, ours_c = rate(ours, pairs)
    _, peer_c = rate(peer, pairs)
    ours_acc = sum(int(v) == c["expected"] for v, c in zip(ours_c, cases)) / len(cases)
    peer_acc = sum(int(v) == c["expected"] for v, c in zip(peer_c, cases)) / len(cases)
    print(f"typical short answers: {len(rows)} rows, one process, one row at a time")
    print(f"  rlvrflow math : {ours_rate:10.1f} verdicts/s")
    print(f"  math-verify   : {peer_rate:10.1f} verdicts/s (parse gold + parse response + verify)")
    print(f"  ratio         : {ours_rate / peer_rate:10.1f}x (goal >= 5x); verdicts agree on {agree:.1%}")
    print(f"project math cases ({len(cases)}, bench/cases/math_cases.jsonl):")
    print(f"  rlvrflow math accuracy: {ours_acc:.1%}")
    print(f"  math-verify accuracy  : {peer_acc:.1%}")
    missed = [c["why"] for v, c in zip(peer_c, cases) if int(v) != c["expected"]]
    print(f"  math-verify misses: {'; '.join(missed[:12])}{' ...' if len(missed) > 12 else ''}")


if __name__ == "__main__":
    main()
