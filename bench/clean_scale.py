"""Growth curve of the data stages: rows/s and peak memory of `prepare` as the logs grow.

    .venv/bin/python bench/clean_scale.py --rows 250000 [--paths memory,stream,dask] [--workers 2]

Writes N rows of ticket logs (JSONL, up to --rows-per-file rows a file; English and Chinese
questions from a dozen templates with random names, amounts and quantities; about 4% retyped
exact duplicates, 3% near-duplicates with one word changed, 0.5% malformed lines and 0.5% rows
without a reference), then runs each path in a fresh process on the same files:

    memory   cleaning.prepare_in_memory, whole tables (the baseline; skipped above --memory-max-rows)
    stream   cleaning.prepare, a chunk at a time (cleaning.chunk_rows)
    dask     cleaning.dask_run.prepare_on_dask on a local cluster of --workers processes

and prints rows/s, the peak RSS of the process tree (the run and every process it started, sampled
every 0.1 s) and the ratios against the baseline. It also checks that each path kept the same rows
and rejected the same ones for the same reasons as the baseline (its output from an earlier run on
the same --rows and --seed counts, since the logs are the same), else as the first path run. Not a test: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
EN = [
    "Customer {name} bought {a} units of {item} at {p} yuan each and paid with a coupon worth {c} yuan. How much did they pay?",
    "Order {oid}: {a} boxes of {item} were shipped from the {city} warehouse, {b} came back damaged. How many arrived intact?",
    "The {city} store sold {a} {item} on Monday and {b} on Tuesday. What were the total sales over the two days?",
    "A {item} costs {p} yuan and is {d}% off this week for member {name}. What is the sale price?",
    "Convert {a} grams of {item} into kilograms for the invoice of order {oid}.",
    "{name} asks whether a {item} bought {a} days ago in {city} can still be returned under the 30-day policy. Answer yes or no.",
]
ZH = [
    "顾客{name}买了{a}件{item}，每件{p}元，使用了{c}元优惠券，一共付了多少钱？",
    "订单{oid}：{city}仓库发出{a}箱{item}，退回{b}箱破损，完好送达多少箱？",
    "{city}门店周一卖出{a}件{item}，周二卖出{b}件，两天一共卖出多少件？",
    "{item}原价{p}元，本周会员{name}享受{d}%折扣，折后价是多少？",
]
NAMES = ["Li Wei", "Wang Fang", "Zhang Min", "Chen Jie", "Liu Yang", "Anna", "Tom", "Maria", "Ken", "Sara"]
ITEMS = ["rice cooker", "kettle", "desk lamp", "tea set", "umbrella", "backpack", "phone case", "towel"]
CITIES = ["Hangzhou", "Shanghai", "Guangzhou", "Chengdu", "Wuhan", "Xi'an", "Nanjing", "Suzhou"]


def _row(rng: random.Random, i: int) -> dict:
    v = {
        "name": rng.choice(NAMES),
        "item": rng.choice(ITEMS),
        "city": rng.choice(CITIES),
        "a": rng.randint(2, 5000),
        "b": rng.randint(1, 900),
        "p": rng.randint(3, 2000),
        "c": rng.randint(1, 50),
        "d": rng.choice([5, 10, 15, 20, 25, 30]),
        "oid": f"SO{rng.randint(10**7, 10**8)}",
    }
    zh = rng.random() < 0.4
    k = rng.randrange(len(ZH if zh else EN))
    question = (ZH if zh else EN)[k].format(**v)
    reference = str(
        [
            v["a"] * v["p"] - v["c"],
            v["a"] - v["b"],
            v["a"] + v["b"],
            round(v["p"] * (100 - v["d"]) / 100, 2),
            v["a"] / 1000,
            "yes" if v["a"] <= 30 else "no",
        ][k]
    )
    return {
        "ticket_id": f"T{i:09d}",
        "body": question,
        "answer": reference,
        "type": "arithmetic",
        "lang": "zh" if zh else "en",
        "agent": f"agent_{rng.randint(1, 40):02d}",
    }


def _variant(rng: random.Random, row: dict, near: bool) -> dict:
    body = row["body"]
    if near:
        words = body.split(" ")
        w = rng.randrange(len(words))
        words[w] = words[w] + ("s" if words[w].isalpha() else "")
        body = " ".join(words) if len(words) > 3 else body + "？"
    else:
        body = body.upper() if rng.random() < 0.5 else body.replace(" ", "  ")
    return {**row, "body": body}


def write_logs(folder: Path, rows: int, per_file: int, seed: int) -> list[Path]:
    """N lines of ticket logs; the injected duplicates point at rows already written."""
    rng, recent, files = random.Random(seed), [], []
    folder.mkdir(parents=True, exist_ok=True)
    out = None
    for i in range(rows):
        if i % per_file == 0:
            out and out.close()
            files.append(folder / f"tickets-{len(files):03d}.jsonl")
            out = open(files[-1], "w", encoding="utf-8")
        draw = rng.random()
        if recent and draw < 0.07:
            row = _variant(rng, rng.choice(recent), near=draw >= 0.04)
            row["ticket_id"] = f"T{i:09d}"
        else:
            row = _row(rng, i)
            recent = (recent + [row])[-2000:]
        if draw > 0.995:
            line = json.dumps(row, ensure_ascii=False)[:-9]  # malformed
        elif draw > 0.99:
            line = json.dumps({**row, "answer": None}, ensure_ascii=False)
        else:
            line = json.dumps(row, ensure_ascii=False)
        out.write(line + "\n")
    out and out.close()
    return files


SPEC = {
    "sources": [
        {
            "name": "tickets",
            "path": "logs/*.jsonl",
            "format": "jsonl",
            "fields": {"id": "ticket_id", "question": "body", "reference": "answer", "category": "type"},
        }
    ],
    "validation": {"categories": ["arithmetic"]},
}


def run_path(path: str, folder: Path, out: Path, workers: int, chunk_rows: int) -> dict:
    """One path, in this process (the child)."""
    from rlvrflow.cleaning import CleaningConfig, SourceSpec, ValidationConfig, prepare
    from rlvrflow.cleaning.prepare import prepare_in_memory

    sources = [SourceSpec.model_validate(s) for s in SPEC["sources"]]
    cleaning = CleaningConfig(chunk_rows=chunk_rows)
    validation = ValidationConfig.model_validate(SPEC["validation"])
    start = time.perf_counter()
    if path == "memory":
        result = prepare_in_memory(sources, cleaning, validation, "bench", folder, out)
    elif path == "stream":
        result = prepare(sources, cleaning, validation, "bench", folder, out)
    else:
        from rlvrflow.cleaning.dask_run import local_cluster, prepare_on_dask

        with local_cluster(workers) as client:
            result = prepare_on_dask(client, sources, cleaning, validation, "bench", folder, out)
    return {
        "seconds": time.perf_counter() - start,
        "rows_in": result.stats["rows_in"],
        "rows_kept": result.stats["rows_kept"],
        "rejected_by_reason": result.stats["rejected_by_reason"],
    }


def measure(args: list[str]) -> tuple[dict, float]:
    """Run a child; (its JSON result, peak RSS in MB of it and its descendants)."""
    proc = psutil.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    peak = 0
    while proc.poll() is None:
        try:
            tree = [proc, *proc.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out = proc.stdout.read()
    if proc.returncode:
        raise SystemExit(f"{args} failed with exit code {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1]), peak / 2**20


def _same(a: Path, b: Path) -> bool:
    import polars as pl

    key = ["source", "reason"]
    return pl.read_parquet(a / "clean.parquet").equals(pl.read_parquet(b / "clean.parquet")) and pl.read_parquet(
        a / "rejects.parquet"
    ).select(key).sort(key).equals(pl.read_parquet(b / "rejects.parquet").select(key).sort(key))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=250_000)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--paths", default="memory,stream,dask")
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (one thread each)")
    ap.add_argument("--chunk-rows", type=int, default=100_000, help="cleaning.chunk_rows")
    ap.add_argument("--memory-max-rows", type=int, default=1_000_000, help="skip the baseline above this")
    ap.add_argument("--work", default="runs/bench_clean_scale", help="scratch folder (logs and outputs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work) / str(args.rows)
    if args.child:
        print(json.dumps(run_path(args.child, work, work / f"out-{args.child}", args.workers, args.chunk_rows)))
        return
    start = time.perf_counter()
    files = write_logs(work / "logs", args.rows, args.rows_per_file, args.seed)
    size = sum(f.stat().st_size for f in files) / 2**20
    print(f"{args.rows:,} rows in {len(files)} file(s), {size:.0f} MB, written in {time.perf_counter() - start:.0f} s")
    results = {}
    for path in args.paths.split(","):
        if path == "memory" and args.rows > args.memory_max_rows:
            print(f"memory: skipped above --memory-max-rows={args.memory_max_rows:,}")
            continue
        res, peak = measure(
            [
                "--rows",
                str(args.rows),
                "--work",
                args.work,
                "--workers",
                str(args.workers),
                "--chunk-rows",
                str(args.chunk_rows),
                "--child",
                path,
            ]
        )
        results[path] = (res, peak)
        print(
            f"{path:7s} {res['rows_in'] / res['seconds']:9,.0f} rows/s  {res['seconds']:7.1f} s  "
            f"peak {peak:8,.0f} MB  kept {res['rows_kept']:,}  {res['rejected_by_reason']}",
            flush=True,
        )
    ref = "memory" if (work / "out-memory" / "clean.parquet").exists() else next(iter(results), None)
    for path, (res, peak) in results.items():
        if path == ref:
            continue
        same = _same(work / f"out-{ref}", work / f"out-{path}")
        line = f"{path} vs {ref}: same kept rows and reject reasons: {same}"
        if ref in results:
            base, base_peak = results[ref]
            line += f"; {base['seconds'] / res['seconds']:.2f}x speed, {peak / base_peak:.2f}x peak memory"
        print(line)


if __name__ == "__main__":
    main()
