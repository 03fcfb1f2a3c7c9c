"""Cleaning throughput: the vectorized cleaner against a per-row Python baseline, in one run.

    python bench/clean_throughput.py [--rows 1000000] [--seed 0]

Generates `--rows` rows from the seed with a realistic mix (about 70% clean English/Chinese
questions, the rest mojibake (6%, twice the sample domain's rate), full-width forms, LaTeX,
special tokens, zero-width characters and stray whitespace), then cleans the question, reference and solution columns twice:
  baseline  per row and field in a Python loop: ftfy.fix_text and the same regexes with `re`
            (`cleaning.clean_value`, which repeats its pass while it changes the value);
  ours      `cleaning.clean_frame`: the regexes in polars, ftfy and span-scoped width only on
            the rows a vectorized check says need them.
It checks that both give identical output, and prints both rates and the ratio (goal: >= 10x).
The generation time is not counted.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ftfy.bad_codecs  # noqa: E402,F401  (registers sloppy-windows-1252)
import polars as pl  # noqa: E402

from rlvrflow.cleaning import CleaningConfig, clean_frame, clean_value  # noqa: E402

CATEGORIES = ["arithmetic", "discount", "unit_conversion", "policy_choice", "sql"]
EN = [
    "What is {a} + {b}?",
    "A customer buys {a} items at {b} dollars each. What is the total?",
    "Convert {a} km to meters.",
    "Order #{a} had {b} units refunded; how many remain of {c}?",
]
ZH = ["计算{a}加{b}等于多少？", "顾客买了{a}件商品，每件{b}元，一共多少钱？", "订单{a}退了{b}件，还剩多少件？"]
MIX = [
    ("clean", 0.70),
    ("mojibake", 0.06),
    ("fullwidth", 0.08),
    ("latex", 0.07),
    ("tokens", 0.06),
    ("zero_width", 0.03),
]


def _fw(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def make_row(rng: random.Random, kind: str) -> dict[str, str]:
    a, b, c = rng.randint(1, 999), rng.randint(1, 99), rng.randint(100, 999)
    q = rng.choice(EN if rng.random() < 0.6 else ZH).format(a=a, b=b, c=c)
    ref, sol, cat = str(a + b), f"The answer is {a + b}.\nAnswer: {a + b}", rng.choice(CATEGORIES)
    if cat == "sql":
        ref, sol = f"SELECT SUM(qty) FROM orders WHERE id = {a};", ""
    if kind == "mojibake":
        # UTF-8 read as Windows-1252, the classic: ftfy's sloppy codec keeps the undefined bytes
        q = (q + " — café “special”").encode("utf-8").decode("sloppy-windows-1252")
    elif kind == "fullwidth":
        q, ref = q.replace(str(a), _fw(str(a))) + " 请用＄ｘ＋１＄表示", _fw(ref) if cat != "sql" else ref
    elif kind == "latex":
        q = q + f" Use $\\left(\\dfrac{{{a}}}{{{b}}}\\right)$ and 1\\,000."
        ref = rng.choice([f"$\\tfrac{{{a}}}{{{b}}}$", f"{b}^\\circ", f"{a}\\text{{ cm}}", f"$${a}$$"])
    elif kind == "tokens":
        q = f"<|im_start|>user\n{q}<|im_end|>"
        sol = f"<s>{sol}</s><|endoftext|>"
    elif kind == "zero_width":
        q = q.replace(" ", " \u200b", 1) + "\ufeff  \t"
    return {"question": q, "reference": ref, "solution": sol, "category": cat}


def generate(rows: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed)
    kinds = rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX], k=rows)
    return pl.DataFrame([make_row(rng, k) for k in kinds])


def baseline(df: pl.DataFrame, cfg: CleaningConfig) -> pl.DataFrame:
    cats = df["category"].to_list()
    cols = {
        f: [clean_value(v, f, c, cfg) for v, c in zip(df[f].to_list(), cats)]
        for f in ("question", "reference", "solution")
    }
    return df.with_columns([pl.Series(f, v, dtype=pl.String) for f, v in cols.items()])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = CleaningConfig(verbatim_categories=["sql"])
    t0 = time.perf_counter()
    df = generate(args.rows, args.seed)
    print(f"generated {df.height:,} rows in {time.perf_counter() - t0:.1f}s (not timed below)")

    t0 = time.perf_counter()
    ours = clean_frame(df, cfg)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = baseline(df, cfg)
    t_base = time.perf_counter() - t0

    same = ours.equals(base)
    changed = int((ours["question"] != df["question"]).sum())
    print(f"baseline (per-row Python: ftfy + re)  {t_base:8.2f}s  {df.height / t_base:12,.0f} rows/s")
    print(f"ours (polars + ftfy fast path)        {t_ours:8.2f}s  {df.height / t_ours:12,.0f} rows/s")
    print(f"ratio {t_base / t_ours:.1f}x (goal >= 10x); questions changed: {changed:,}; identical output: {same}")
    if not same:
        diff = (
            (ours["question"] != base["question"])
            | (ours["reference"] != base["reference"])
            | (ours["solution"] != base["solution"])
        )
        print("first differing rows:", df.filter(diff).head(3).to_dicts(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
