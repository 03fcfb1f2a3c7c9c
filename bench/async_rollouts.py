"""Benchmark: async GRPO rollouts against synchronous ones, the same data, seed and steps.

The 2-digit addition task of bench/addition_probe.py (its rows, held-out split and model size): a tiny
model is built and taken through a short SFT (reused when unchanged), its training pairs are tiered
once, then GRPO runs `--steps` steps from the same SFT weights in each arm:
  - sync:  `training.grpo.rollout_mode: sync` (rollouts and updates take turns in one process);
  - async: `rollout_mode: async` with `--max-staleness` (a generator process samples and scores the
           next groups with a copy of the policy at most that many updates old while the trainer updates).
Each arm runs once per seed in --seeds. Printed per run: steps/s of the loop (steps 2..N-1: neither the
generator's start nor the final eval), the end-to-end GRPO seconds, the groups dropped as stale, and the
held-out greedy and sampled pass@1 of the SFT model and of the final checkpoint; then the steps/s ratio
async/sync and the mean pass@1 of each arm, with the spread between seeds as the noise to compare with.

    nice -n 5 .venv/bin/python bench/async_rollouts.py                       # ~5 minutes on 2 shared cores
    .venv/bin/python bench/async_rollouts.py --steps 60 --seeds 0 1 2 --max-staleness 2

Writes `<out>/async_rollouts.json`. Nothing is downloaded. The timing depends on what else the machine
runs: compare the two arms of one invocation, not figures across machines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.addition_probe import addition_rows, split_pairs  # noqa: E402

METRICS = ("pass_at_1_greedy", "pass_at_1_sampled")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "runs/async_rollouts"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--train", type=int, default=4000, help="training pairs (of 8,100)")
    ap.add_argument("--eval", type=int, default=200, help="held-out pairs")
    ap.add_argument("--sft-steps", type=int, default=500)
    ap.add_argument("--steps", type=int, default=40, help="GRPO steps per run")
    ap.add_argument("--prompts-per-step", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4, help="GRPO learning rate")
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the trainer (the generator uses 1)")
    return ap.parse_args(argv)


def grpo_config(args, seed: int, mode: str):
    from rlvrflow.training.config import TrainingConfig

    grpo = {
        "max_steps": args.steps,
        "prompts_per_step": args.prompts_per_step,
        "num_generations": args.group_size,
        "learning_rate": args.lr,
        "warmup_steps": 5,
        "max_new_tokens": 12,
        "rollout_mode": mode,
    }
    if mode == "async":
        grpo["max_staleness"] = args.max_staleness
    return TrainingConfig.model_validate(
        {
            "tiny": {
                "hidden_size": 128,
                "num_layers": 4,
                "num_heads": 4,
                "intermediate_size": 352,
                "max_positions": 64,
            },
            "sft": {
                "max_steps": args.sft_steps,
                "learning_rate": 1e-3,
                "batch_size": 64,
                "warmup_steps": 20,
                "max_length": 32,
            },
            "grpo": grpo,
            "checkpoint": {"every": args.steps, "keep_last": 1},
            "seed": seed,
            "torch_threads": args.threads,
            "device": "cpu",
            "report_to": [],
        }
    )


def run_arm(args, seed: int, mode: str, sft, tiered, eval_df, out: Path) -> dict:
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training import train_grpo
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.verifiers import RewardConfig

    stamps: dict[int, float] = {}
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    result = train_grpo(
        sft,
        tiered,
        grpo_config(args, seed, mode),
        CurriculumConfig(n_samples=8, k=4, dedup_window=4),
        RewardConfig(),
        eval_df,
        EvalConfig(k=4, n_samples=4, max_new_tokens=12),
        out,
        seed,
        on_progress=lambda step, total, m: stamps.setdefault(step, time.perf_counter()),
    )
    seconds = time.perf_counter() - t
    loop = (args.steps - 2) / (stamps[args.steps - 1] - stamps[1])
    return {
        "mode": mode,
        "seed": seed,
        "loop_steps_per_s": loop,
        "grpo_seconds": seconds,
        "groups_stale": result["groups_stale"],
        "groups_trained": result["groups_trained"],
        "sft": {k: result["baseline"][k] for k in METRICS},
        "final": {k: result["final"][k] for k in METRICS},
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.steps < 4:
        raise SystemExit("--steps must be at least 4 (the loop rate leaves out the first and the last step)")
    from rlvrflow.curriculum import CurriculumConfig, tier_rows
    from rlvrflow.engines import HFEngine
    from rlvrflow.training import build_tiny_model, run_sft
    from rlvrflow.training.modeling import load_model_and_tokenizer, set_threads

    set_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_pairs, eval_pairs = split_pairs(0, args.train, args.eval)
    train_df, eval_df = addition_rows(train_pairs, "train"), addition_rows(eval_pairs, "eval")
    cfg = grpo_config(args, 0, "sync")
    corpus = train_df["prompt"].to_list() + train_df["solution"].to_list() + eval_df["prompt"].to_list()
    sft = run_sft(build_tiny_model(corpus, out / "base", 0, cfg.tiny), train_df, cfg, out / "sft", 0)
    model, tok = load_model_and_tokenizer(sft, "cpu", trainable=False)
    tiered = tier_rows(train_df, HFEngine(model, tok, device="cpu"), CurriculumConfig(n_samples=8, k=4), 0)

    runs = []
    for seed in args.seeds:
        for mode in ("sync", "async"):
            r = run_arm(args, seed, mode, sft, tiered, eval_df, out / f"{mode}_{seed}")
            runs.append(r)
            print(
                f"[async-bench] seed {seed} {mode:5s}: {r['loop_steps_per_s']:.3f} steps/s (loop), GRPO "
                f"{r['grpo_seconds']:.0f} s, stale groups {r['groups_stale']}; held-out greedy "
                f"{r['sft']['pass_at_1_greedy']:.3f} -> {r['final']['pass_at_1_greedy']:.3f}, sampled "
                f"{r['sft']['pass_at_1_sampled']:.3f} -> {r['final']['pass_at_1_sampled']:.3f}",
                flush=True,
            )

    def arm(mode: str, key):
        return [key(r) for r in runs if r["mode"] == mode]

    rate = {m: sum(arm(m, lambda r: r["loop_steps_per_s"])) / len(args.seeds) for m in ("sync", "async")}
    summary = {"args": vars(args), "runs": runs, "steps_per_s": rate, "ratio": rate["async"] / rate["sync"]}
    for metric in METRICS:
        for mode in ("sync", "async"):
            vals = arm(mode, lambda r: r["final"][metric])
            summary[f"{mode}_{metric}"] = {"mean": sum(vals) / len(vals), "spread": max(vals) - min(vals)}
    (out / "async_rollouts.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"[async-bench] steps/s sync {rate['sync']:.3f}, async {rate['async']:.3f}: ratio {summary['ratio']:.2f}x")
    for metric in METRICS:
        s, a = summary[f"sync_{metric}"], summary[f"async_{metric}"]
        print(
            f"[async-bench] held-out {metric}: sync {s['mean']:.3f} (seed spread {s['spread']:.3f}), "
            f"async {a['mean']:.3f} (seed spread {a['spread']:.3f}), async - sync {a['mean'] - s['mean']:+.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
