"""LoRA against full fine-tuning in the project's GRPO loop on CPU: steps/s, update time, peak memory.

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python bench/lora_vs_full.py            # ~24M-param Qwen2
    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python bench/lora_vs_full.py --size test  # make-model's default

Both arms run `training.grpo.train_grpo` on the same randomly initialized Qwen2 model (built here by
`training.qwen_model.build_qwen2_model`, the code behind `rlvrflow make-model --arch qwen2`, with its
BPE tokenizer and chat template), the same addition prompts, seed, group size and steps; only
`training.lora` differs. Each arm runs in a fresh process; its memory is read from /proc/self/status:
the peak RSS (VmHWM: weights, gradients, AdamW state, activations, the torch runtime) and the largest
RSS seen at the end of a step (training's steady state). Not `ru_maxrss`: Linux carries the parent's
high-water mark across fork + exec into it. Timed per step through the loop's
`on_progress` callback; the update alone by wrapping `training.grpo.update_policy` (the rollouts and
rewards are the rest). The first step (warm-up) and the last (it also evaluates and saves) are
left out of the per-step means.

The learning rate is small (1e-6) so that both policies stay close to the shared start and sample
about the same completions from the same seed: the arms then do the same work, which is what a cost
comparison needs. The reward: a random model never solves arithmetic, so correctness is 0 everywhere; the length
penalty (`reward.length_penalty`, two-sided around 8 tokens) gives every group reward variance, and
`filter_zero_variance: false` keeps every group anyway, so both arms update on the same number of
rows each step. Completion lengths can still differ a little between the arms; the table prints
the update tokens per step so the rates can be compared per token too.

What to expect: LoRA saves the gradients and AdamW moments of the frozen weights (3 fp32 copies of
them) and the backward's weight-gradient matmuls; it does not save the forward, the activation
gradients or the rollouts, and adds the adapter matmuls. On a model this small the torch runtime
dominates RSS and the per-op overhead dominates time, so the savings are small or absent; the
output says what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# hidden, layers, heads, kv heads, intermediate
SIZES = {"test": (64, 2, 2, 1, 128), "small": (256, 4, 4, 2, 704), "medium": (512, 8, 4, 2, 1408)}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="medium",
        help="model dims: test = make-model's default (~0.4M params), medium ~24M",
    )
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-6, help="both arms (see the module docstring)")
    p.add_argument(
        "--beta",
        type=float,
        default=0.0,
        help="KL coefficient (LoRA's reference: adapter off; full fine-tuning's: a second copy of the model)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per arm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arm", choices=["full", "lora"], help=argparse.SUPPRESS)  # the child process
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def rows(n: int, seed: int, split: str):
    """Tiered rows (DESIGN.md columns) of two-digit additions, checked by the math verifier."""
    import random

    import polars as pl

    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        out.append(
            {
                "id": f"{split}-{i:04d}",
                "category": "add",
                "prompt": f"What is {a} + {b}?",
                "reference": str(a + b),
                "solution": f"Answer: {a + b}",
                "verifier": "math",
                "verifier_params": "{}",
                "split": split,
                "tier": "learnable",
                "pass_at_1": 0.5,
            }
        )
    return pl.DataFrame(out)


def build_model(size: str, out: Path, seed: int) -> Path:
    from rlvrflow.training.qwen_model import Qwen2Dims, build_qwen2_model

    hidden, layers, heads, kv, inter = SIZES[size]
    corpus = [r["prompt"] + " Answer: " + r["reference"] for r in rows(400, seed, "corpus").iter_rows(named=True)]
    dims = Qwen2Dims(
        vocab_size=2048,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        intermediate_size=inter,
    )
    return build_qwen2_model(corpus * 5, out, seed=seed, dims=dims)


def run_arm(args: argparse.Namespace) -> dict:
    """One arm in this process: train_grpo, timed per step and per update."""
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training import grpo
    from rlvrflow.training.config import EvalConfig, TrainingConfig
    from rlvrflow.verifiers import RewardConfig

    cfg = TrainingConfig.model_validate(
        {
            "device": "cpu",
            "torch_threads": args.threads,
            "prompt_format": "chat",
            "lora": {"r": args.lora_r, "alpha": 2 * args.lora_r} if args.arm == "lora" else None,
            "grpo": {
                "max_steps": args.steps,
                "prompts_per_step": args.prompts,
                "num_generations": args.group,
                "learning_rate": args.lr,
                "beta": args.beta,
                "warmup_steps": 0,
                "max_new_tokens": args.max_new_tokens,
                "max_refill_rounds": 0,
                "filter_zero_variance": False,
            },
            "checkpoint": {"every": args.steps, "keep_last": 1},
        }
    )
    reward = RewardConfig(
        length_penalty={"enabled": True, "target_tokens": 8, "max_penalty": 0.5, "scale_tokens": 8, "two_sided": True}
    )
    updates, ticks, rss = [], [time.perf_counter()], []
    original = grpo.update_policy

    def timed_update(backend, ref, groups, g, pad_id, device):
        t0 = time.perf_counter()
        out = original(backend, ref, groups, g, pad_id, device)
        tokens = sum(
            len(grp.prompt_ids) * len(grp.completion_ids) + sum(map(len, grp.completion_ids)) for grp in groups
        )
        updates.append({"seconds": time.perf_counter() - t0, "tokens": tokens})
        return out

    grpo.update_policy = timed_update  # the loop looks it up in its module at each step
    result = grpo.train_grpo(
        args.model,
        rows(64, args.seed, "train"),
        cfg,
        CurriculumConfig(dedup_window=1),
        reward,
        rows(2, args.seed + 1, "eval"),
        EvalConfig(k=1, n_samples=1, max_new_tokens=8),
        args.out,
        seed=args.seed,
        on_progress=lambda *_: (ticks.append(time.perf_counter()), rss.append(_status_mb("VmRSS"))),
    )
    steps = [b - a for a, b in zip(ticks, ticks[1:])]
    mid = slice(1, -1) if len(steps) > 2 else slice(None)
    upd = updates[mid]
    return {
        "arm": args.arm,
        "steps": len(steps),
        "step_s": _mean(steps[mid]),
        "update_s": _mean([u["seconds"] for u in upd]),
        "update_tokens": _mean([u["tokens"] for u in upd]),
        "trainable_params": result["trainable_params"],
        "total_params": result["total_params"],
        "peak_rss_mb": _status_mb("VmHWM"),
        "step_rss_mb": max(rss),
    }


def _status_mb(field: str) -> float:
    """A memory line of /proc/self/status (kB there), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field} line (this bench reads Linux's process status)")


def _mean(xs) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def table(full: dict, lora: dict) -> str:
    lines = [f"{'':28}{'full':>14}{'lora':>14}{'lora/full':>11}"]
    for label, key, fmt in (
        ("trainable params", "trainable_params", "{:,.0f}"),
        ("total params", "total_params", "{:,.0f}"),
        ("steps/s", "steps_s", "{:.3f}"),
        ("s/step", "step_s", "{:.2f}"),
        ("update s/step", "update_s", "{:.2f}"),
        ("update tokens/step", "update_tokens", "{:.0f}"),
        ("update tokens/s", "update_tok_s", "{:.0f}"),
        ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
        ("largest end-of-step RSS MB", "step_rss_mb", "{:.0f}"),
    ):
        a, b = full[key], lora[key]
        lines.append(f"{label:28}{fmt.format(a):>14}{fmt.format(b):>14}{b / a if a else float('nan'):>10.2f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.arm:
        print(json.dumps(run_arm(args)), flush=True)
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryDirectory(prefix="lora_vs_full_") as tmp:
        model = build_model(args.size, Path(tmp) / "model", args.seed)
        print(f"[bench] model: {json.loads((model / 'rlvrflow_model.json').read_text())}", flush=True)
        res = {}
        for arm in ("full", "lora"):
            t0 = time.perf_counter()
            cmd = [sys.executable, __file__, *argv, "--arm", arm, "--model", str(model), "--out", f"{tmp}/{arm}"]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stdout[-2000:] + proc.stderr[-4000:], file=sys.stderr)
                print(f"[bench] the {arm} arm failed (rc {proc.returncode})", file=sys.stderr)
                return 1
            res[arm] = json.loads(proc.stdout.strip().splitlines()[-1])
            res[arm]["steps_s"] = 1 / res[arm]["step_s"]
            res[arm]["update_tok_s"] = res[arm]["update_tokens"] / res[arm]["update_s"]
            print(f"[bench] {arm}: {time.perf_counter() - t0:.0f} s in all", flush=True)
    print(
        f"[bench] {args.steps} steps x {args.prompts} prompts x G={args.group}, <= {args.max_new_tokens} new "
        f"tokens, lr {args.lr}, beta {args.beta}, LoRA r={args.lora_r} on attention + MLP, "
        f"{args.threads} torch thread(s); per-step means leave out the first and last step; load average {os.getloadavg()[0]:.1f}"
    )
    print(table(res["full"], res["lora"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
