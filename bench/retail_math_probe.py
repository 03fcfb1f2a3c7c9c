"""Benchmark: can outcome-only RL beat more SFT on the retail sample's math, and from which base?

    .venv/bin/python bench/retail_math_probe.py --fraction 0.06 --sft-steps 400 --grpo-steps 150 --grpo-lr 3e-4
    .venv/bin/python bench/retail_math_probe.py --base random --worked english          # random weights
    .venv/bin/python bench/retail_math_probe.py --base random --pretrain 3000 --worked few-chinese

Issue 15 asks the demo's GRPO, trained on rows that carry only the gold outcome, to beat the same
SFT model trained on for GRPO's seconds by 10 points of held-out greedy pass@1. `demo_target.py`
measures that on the whole demo; `addition_probe.py` on one shared skill. This probe asks it on the
retail math alone (the four math categories of examples/retail/tasks_math.py, English and Chinese,
depths 1-3, prompts in the spec's template), for a choice of starting model and of which rows carry a
worked reply:
  - `--base embedded-base` (default): the shipped pretrained tiny base (training/tiny_base.py: generic
    arithmetic and number reading) adapted to the rows' characters, as the demo starts;
    `--base random`: the same architecture from random weights, optionally `--pretrain N` steps on
    generic arithmetic in the replies' notation (`37+25=62`, `3*12-5=36-5=31`, `12+25+40=77`; no reading);
    `--base DIR`: any model folder;
  - `--worked uniform`: a worked reply on `--fraction` of the rows, whatever their language (the demo's
    sample); `english`: on English rows only (twice the fraction, the same count), so Chinese tickets
    are outcome-only; `few-chinese`: Chinese rows at `--chinese-share`; `--shares d1=0.3,d3=0` per depth.

Each run: SFT on the worked rows, tier `--max-rows` of the outcome-only rows, GRPO on them, and the
control arm (the SFT model trained on for as many steps as SFT's own pace fits into GRPO's seconds, on
the same worked rows), all evaluated on the same held-out rows. It prints held-out greedy pass@1 per
language and depth (categories `en-d1` ... `zh-d3`) for SFT, GRPO and the control, the GRPO curve, and
writes OUT/probe.json. Nothing is downloaded. Figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RETAIL = ROOT / "examples/retail"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(RETAIL))

import generate  # noqa: E402  (examples/retail: the category weights)
import tasks_math  # noqa: E402

COLUMNS = ("id", "category", "prompt", "reference", "solution", "verifier", "verifier_params")


def math_rows(n: int, seed: int, template) -> list[dict]:
    """n retail math tasks in the generator's category mix, half English, half Chinese; `category`
    is language and depth (`en-d2`), so per-category scores read per language and depth."""
    rng = random.Random(f"retail-math-probe:{seed}")
    weights = {c: generate.CATEGORY_WEIGHTS[c] for c in generate.MATH}
    from rlvrflow.cleaning.template import render_prompt

    rows = []
    for i in range(n):
        cat = rng.choices(list(weights), list(weights.values()))[0]
        lang = "zh" if rng.random() < 0.5 else "en"
        task = tasks_math.GENERATORS[cat](rng, lang)
        rows.append(
            {
                "id": f"m{i:05d}",
                "category": f"{lang}-d{task.depth}",
                "lang": lang,
                "prompt": render_prompt(task.question, cat, template),
                "reference": task.answer,
                "solution": task.solution,
                "verifier": "math",
                "verifier_params": "{}",
            }
        )
    return rows


def worked(rows: list[dict], how: str, fraction: float, chinese_share: float, seed: int) -> list[bool]:
    """Which rows keep their worked reply (SFT's); the others are outcome-only (RL's)."""
    rng = random.Random(f"retail-math-probe-worked:{seed}")
    share = {
        "uniform": {"en": fraction, "zh": fraction},
        "english": {"en": 2 * fraction, "zh": 0.0},
        "few-chinese": {"en": 2 * fraction - chinese_share, "zh": chinese_share},
    }[how]
    return [rng.random() < share[r["lang"]] for r in rows]


def arithmetic_lines(n: int, seed: int) -> list[str]:
    """Generic arithmetic in the worked replies' notation, random operands (the tiny base's own lines,
    training.tiny_base.arithmetic_line): what a pretrained model knows."""
    from rlvrflow.training.tiny_base import arithmetic_line

    rng = random.Random(f"retail-math-probe-arith:{seed}")
    return [arithmetic_line(rng) for _ in range(n)]


def frame(rows: list[dict], split: str, outcome_only: bool = False):
    import polars as pl

    df = pl.DataFrame([{**{c: r[c] for c in COLUMNS}, "split": split} for r in rows])
    return df.with_columns(solution=pl.lit(None, pl.Utf8)) if outcome_only else df


def pretrain(base: Path, lines: list[str], cfg, steps: int, out: Path, seed: int) -> tuple[Path, float]:
    """The base trained on generic arithmetic; (its folder, held-out accuracy on lines with one `=`)."""
    import polars as pl

    from rlvrflow.training import evaluate, run_sft
    from rlvrflow.training.config import EvalConfig

    cut = len(lines) - 300
    train = pl.DataFrame({"prompt": ["calc: "] * cut, "solution": lines[:cut]})
    pcfg = cfg.model_copy(
        update={"sft": cfg.sft.model_copy(update={"max_steps": steps, "batch_size": 64, "max_length": 40})}
    )
    model = run_sft(base, train, pcfg, out, seed)
    held = [line for line in lines[cut:] if line.count("=") == 1]
    df = pl.DataFrame(
        [
            {
                "id": f"a{i}",
                "category": "arithmetic",
                "prompt": "calc: " + x.split("=")[0] + "=",
                "reference": x.split("=")[1],
                "solution": None,
                "verifier": "math",
                "verifier_params": "{}",
                "split": "eval",
            }
            for i, x in enumerate(held)
        ]
    )
    m = evaluate(model, df, EvalConfig(k=1, n_samples=1, max_new_tokens=8, max_prompts=len(held)), seed, device="cpu")
    return model, m["pass_at_1_greedy"]


def per_group(m: dict) -> dict[str, float]:
    return {k: round(v["pass_at_1_greedy"], 3) for k, v in sorted(m.get("per_category", {}).items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "runs/retail_math_probe"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worked", choices=("uniform", "english", "few-chinese"), default="uniform")
    ap.add_argument(
        "--fraction",
        type=float,
        default=generate.WORKED_FRACTION,
        help=f"share of rows with a worked reply (default {generate.WORKED_FRACTION}, the sample's)",
    )
    ap.add_argument("--chinese-share", type=float, default=0.04, help="few-chinese: share of Chinese rows worked")
    ap.add_argument("--rows", type=int, default=5000, help="training rows (worked and outcome-only)")
    ap.add_argument("--eval", type=int, default=400, help="held-out rows")
    ap.add_argument(
        "--max-rows", type=int, default=None, help="outcome-only rows tiered for GRPO (default: the spec's)"
    )
    ap.add_argument("--sft-steps", type=int, default=None, help="default: the spec's training.sft.max_steps")
    ap.add_argument("--grpo-steps", type=int, default=None, help="default: the spec's training.grpo.max_steps")
    ap.add_argument("--grpo-lr", type=float, default=None, help="default: the spec's training.grpo.learning_rate")
    ap.add_argument(
        "--base",
        default="embedded-base",
        help="'embedded-base' (the shipped pretrained tiny base, default), 'random' (random weights), or a "
        "model folder",
    )
    ap.add_argument(
        "--pretrain", type=int, default=0, help="with --base random: steps of generic arithmetic before SFT (0: none)"
    )
    ap.add_argument(
        "--shares",
        default=None,
        help="worked share per group, e.g. 'd1=0.3,d2=0.05,d3=0' or 'en-d1=0.3' (most specific wins)",
    )
    args = ap.parse_args(argv)
    if not 0 < args.fraction <= 0.5 or not 0 <= args.chinese_share <= 2 * args.fraction:
        ap.error("--fraction must be in (0, 0.5] and --chinese-share in [0, 2 x fraction]")
    if args.pretrain and args.base != "random":
        ap.error("--pretrain trains a random-weight model: use it with --base random")

    from rlvrflow.curriculum import tier_rows
    from rlvrflow.engines import HFEngine
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.training import build_tiny_model, evaluate, run_sft, train_grpo
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.tiny_base import BASE_DIMS, BASE_DIR, adapt_base

    spec = load_spec(RETAIL / "spec.yaml")
    args.max_rows = args.max_rows or spec.curriculum.max_rows
    args.sft_steps = spec.training.sft.max_steps if args.sft_steps is None else args.sft_steps
    args.grpo_steps = spec.training.grpo.max_steps if args.grpo_steps is None else args.grpo_steps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = math_rows(args.eval + args.rows, args.seed, spec.cleaning.template)
    held, train = rows[: args.eval], rows[args.eval :]
    mask = worked(train, args.worked, args.fraction, args.chinese_share, args.seed)
    if args.shares:
        spec_shares = dict(kv.split("=") for kv in args.shares.split(","))
        rng2 = random.Random(f"retail-math-probe-shares:{args.seed}")

        def share(cat: str) -> float:
            lang, depth = cat.split("-")
            for key in (cat, depth, lang):
                if key in spec_shares:
                    return float(spec_shares[key])
            return args.fraction

        mask = [rng2.random() < share(r["category"]) for r in train]
    sft_df = frame([r for r, w in zip(train, mask) if w], "train")
    rl_df = frame([r for r, w in zip(train, mask) if not w], "train", outcome_only=True)
    rl_df = rl_df.sample(n=min(args.max_rows, len(rl_df)), seed=args.seed)
    eval_df = frame(held, "eval")
    # the demo's model, SFT and GRPO settings (examples/retail/spec.yaml), this probe's step counts
    tc = spec.training
    cfg = tc.model_copy(
        update={
            "seed": args.seed,
            "sft": tc.sft.model_copy(update={"max_steps": args.sft_steps}),
            "grpo": tc.grpo.model_copy(
                update={"max_steps": args.grpo_steps, "learning_rate": args.grpo_lr or tc.grpo.learning_rate}
            ),
            "checkpoint": tc.checkpoint.model_copy(update={"every": max(1, args.grpo_steps // 3), "keep_last": 1}),
        }
    )
    cur = spec.curriculum
    eval_cfg = spec.eval.model_copy(update={"max_prompts": args.eval or None})  # 0: every prompt
    summary: dict = {"args": vars(args), "worked_rows": len(sft_df), "rl_pool": len(rl_df), "seconds": {}}
    secs = summary["seconds"]

    def clock(name: str, t: float) -> None:
        secs[name] = round(time.perf_counter() - t, 1)

    t = time.perf_counter()
    lines = arithmetic_lines(20000, args.seed) if args.pretrain else []
    corpus = [r["prompt"] for r in rows] + [r["solution"] for r in rows] + lines
    if args.base == "embedded-base":
        model = adapt_base(BASE_DIR, corpus, out / "base", args.seed)
    elif args.base == "random":
        model = build_tiny_model(corpus, out / "base", args.seed, BASE_DIMS)
    else:
        model = Path(args.base)
    if args.pretrain:
        shutil.rmtree(out / "pretrain", ignore_errors=True)
        model, summary["pretrain_accuracy"] = pretrain(model, lines, cfg, args.pretrain, out / "pretrain", args.seed)
        clock("pretrain", t)
        print(
            f"[probe] pretrained {args.pretrain} steps on generic arithmetic ({secs['pretrain']} s): held-out "
            f"one-line accuracy {summary['pretrain_accuracy']:.3f}",
            flush=True,
        )
    t = time.perf_counter()
    # run_sft reuses a folder by the base's path, not its weights: another --base into the same --out
    # must not find the last one's SFT model
    shutil.rmtree(out / "sft", ignore_errors=True)
    sft = run_sft(model, sft_df, cfg, out / "sft", args.seed)
    clock("sft", t)
    t = time.perf_counter()
    policy, tok = load_model_and_tokenizer(sft, "cpu", trainable=False)
    tiered = tier_rows(rl_df, HFEngine(policy, tok, device="cpu"), cur, args.seed)
    summary["tiers"] = dict(zip(*tiered["tier"].value_counts().to_dict(as_series=False).values()))
    clock("tier", t)
    t = time.perf_counter()
    shutil.rmtree(out / "grpo", ignore_errors=True)
    result = train_grpo(sft, tiered, cfg, cur, spec.verifiers.reward, eval_df, eval_cfg, out / "grpo", args.seed)
    clock("grpo", t)
    sft_stats = json.loads((Path(sft) / "sft_stats.json").read_text())
    steps = max(1, round(secs["grpo"] * sft_stats["steps"] / max(sft_stats["seconds"], 1e-9)))
    ccfg = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"max_steps": steps, "warmup_steps": 0})})
    shutil.rmtree(out / "control", ignore_errors=True)
    control = evaluate(
        run_sft(sft, sft_df, ccfg, out / "control", args.seed), eval_df, eval_cfg, args.seed, device="cpu"
    )
    base_m = evaluate(sft, eval_df, eval_cfg, args.seed, device="cpu")

    pick = ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k")
    summary.update(
        sft={**{k: base_m[k] for k in pick}, "per_group": per_group(base_m)},
        # train_grpo's result leaves the per-category figures out; its evals.jsonl keeps them
        grpo={
            **{k: result["final"][k] for k in pick},
            "per_group": per_group(json.loads((out / "grpo" / "evals.jsonl").read_text().splitlines()[-1])),
        },
        control={"steps": steps, **{k: control[k] for k in pick}, "per_group": per_group(control)},
        evals=[
            {"step": e["step"], "greedy": e["pass_at_1_greedy"], "sampled": e["pass_at_1_sampled"]}
            for e in result["evals"]
        ],
    )
    (out / "probe.json").write_text(json.dumps(summary, indent=1) + "\n")
    g0, g1, c = base_m["pass_at_1_greedy"], result["final"]["pass_at_1_greedy"], control["pass_at_1_greedy"]
    print(
        f"[probe] --worked {args.worked}: {len(sft_df)} worked rows, {len(rl_df)} outcome-only tiered "
        f"{summary['tiers']}; seconds {secs}",
        flush=True,
    )
    for e in summary["evals"]:
        print(f"[probe] GRPO step {e['step']:4d}: held-out greedy {e['greedy']:.3f} sampled {e['sampled']:.3f}")
    print(f"[probe] SFT      greedy {g0:.3f} per group {summary['sft']['per_group']}")
    print(f"[probe] GRPO     greedy {g1:.3f} per group {summary['grpo']['per_group']}")
    print(f"[probe] control  greedy {c:.3f} per group {summary['control']['per_group']} ({steps} more SFT steps)")
    print(
        f"[probe] held-out greedy pass@1: SFT {g0:.3f} -> GRPO {g1:.3f} ({(g1 - g0) * 100:+.1f} points); control "
        f"{c:.3f} ({(c - g0) * 100:+.1f}); GRPO over the control {(g1 - c) * 100:+.1f} points"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
