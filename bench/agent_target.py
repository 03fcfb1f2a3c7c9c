"""Does GRPO on episodes teach the tiny model a two-step desk task? SFT, GRPO from it, and a control arm.

    nice .venv/bin/python bench/agent_target.py [--seeds 0] [--out runs/agent_target] [--sft-steps 300]
                                                [--grpo-steps 90] [--grpo-lr 2e-4] [--grpo-warmup 10]
                                                [--temperature 0.7] [--max-turns 3] [--context 1024]
                                                [--worked 80] [--threads 1] [--sft-from DIR] [--no-control]
                                                [--analyse]

The environment is built here with verifiers/environment.py: a toy SQLite shop (`orders`: id, total,
shipping; `refunds`) and two tools, `get_order(order_id)` (the total and the shipping) and
`refund(order_id, amount)`. A task is "Refund the shipping of order 4821." or "Refund order 4821 in
full."; the amount is in the order, not in the ticket, so an episode must look the order up, read the
right column and refund it. The outcome check is the refunds table: exactly that one refund.

Per seed, from the pretrained tiny base (`embedded-base`, adapted to the bench's characters):
- SFT: `--worked` worked transcripts (lookup, refund, a one-line reply), the loss on the assistant's
  tokens only (training/episode_sft.py), `--sft-steps` steps;
- GRPO: the chain's GRPO trainer (training/grpo.py `train_grpo`) from that SFT model on the outcome-only
  rows as episode rows of one tier, its held-out eval playing the held-out tasks at step 0 (the SFT
  model's score) and at the end; by default 90 steps of 8 prompts x 8 episodes at temperature 0.7, lr
  2e-4 after 10 warmup steps, no KL term, two refill rounds (`--refill-rounds`, the chain's default:
  zero-variance groups replaced by new prompts within the step);
- control: the SFT model trained on the same transcripts for as many CPU seconds as the GRPO stage took
  (its two held-out evals included, so the control gets a little more than GRPO's loop had).
Each is scored on the same held-out tasks (other orders), one greedy episode per task; gains come
with 95% paired bootstrap intervals (training.report.gain_interval). Diagnostics for a run that does
not learn: the share of zero-variance groups, success by turns taken, malformed calls, turn-limit stops.

`--sft-from DIR` starts from the SFT models an earlier run (its --out) trained with the same settings
(seed, orders, held-out tasks, worked transcripts, SFT steps and lr; checked against the card it
wrote, `sft/bench_sft.json`), so GRPO settings can be compared from one SFT without training it again;
the seed's SFT seconds are then the earlier run's, counted in the total. `--no-control` skips the
control arm (a screening run: the verdict is then never met). The JSON has the wall and CPU seconds of
each stage: SFT, the GRPO stage (its step-0 eval, the steps, the final eval), the control arm.

Target (issue 41, item 6): GRPO +20 points of held-out multi-step success over its SFT (the mean over
the seeds), beside the control arm, within 15 minutes per seed on 2 cores: SFT + GRPO, the run a team
would make, counted in the process's CPU seconds (on a shared machine the wall clock measures the
neighbours too; both are written). The control arm is the bench's measurement, as long as GRPO by
construction and independent of it: its seconds are reported apart (`cpu_seconds_total` has all three). Writes OUT/agent_target.json
and prints a line per seed. `--analyse` (after a run, same --out, --seeds, --orders, --eval-tasks and
--max-turns) sorts each held-out failure of
the SFT and final GRPO models by kind: wrong order id looked up or refunded, the other column's
amount, a number the order does not hold, no refund, extra refunds (OUT/agent_failures.json).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_GAIN, TARGET_SECONDS = 20.0, 900.0
EPISODE_TOKENS = 96  # most tokens of one assistant message, in training and eval


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads): on a shared machine the wall
    clock measures the neighbours too."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


TASKS = {"shipping": "Refund the shipping of order {id}.", "total": "Refund order {id} in full."}


def build_shop(path: Path, n_orders: int, seed: int) -> dict[int, dict]:
    """The shop database: `n_orders` orders with distinct 4-digit ids, totals 20-199, shipping 3-15."""
    rng = random.Random(seed)
    ids = rng.sample(range(1000, 10000), n_orders)
    orders = {i: {"total": rng.randint(20, 199), "shipping": rng.randint(3, 15)} for i in ids}
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE orders(order_id INTEGER PRIMARY KEY, total INTEGER, shipping INTEGER);"
        "CREATE TABLE refunds(refund_id INTEGER PRIMARY KEY, order_id INTEGER, amount REAL);"
    )
    con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, o["total"], o["shipping"]) for i, o in orders.items()])
    con.commit()
    con.close()
    return orders


def shop_env(db: Path, max_turns: int = 3):
    from rlvrflow.verifiers.environment import Environment

    order = {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    refund = {
        "type": "object",
        "required": ["order_id", "amount"],
        "additionalProperties": False,
        "properties": {"order_id": {"type": "integer"}, "amount": {"type": "number"}},
    }
    return Environment.model_validate(
        {
            "database": str(db),
            "max_turns": max_turns,
            "tools": [
                {
                    "name": "get_order",
                    "description": "an order's total and shipping",
                    "parameters": order,
                    "sql": "SELECT total, shipping FROM orders WHERE order_id = :order_id",
                },
                {
                    "name": "refund",
                    "description": "refund an amount of an order",
                    "parameters": refund,
                    "sql": "INSERT INTO refunds (order_id, amount) VALUES (:order_id, :amount)",
                },
            ],
            "outcome": {"query": "SELECT order_id, amount FROM refunds"},
        }
    )


def task_rows(orders: dict[int, dict], ids: list[int], rng: random.Random, split: str) -> list[dict]:
    rows = []
    for i in ids:
        kind = rng.choice(sorted(TASKS))
        rows.append(
            {
                "id": f"{split}-{i}",
                "prompt": TASKS[kind].format(id=i),
                "kind": kind,
                "order_id": i,
                "amount": orders[i][kind],
                "reference": json.dumps([[i, orders[i][kind]]]),
            }
        )
    return rows


def worked_transcript(row: dict, orders: dict[int, dict]):
    """The worked episode of a row: look the order up, refund the right column, say so."""
    from rlvrflow.verifiers.episode import ENVIRONMENT, POLICY, PROMPT, Episode

    i, o = row["order_id"], orders[row["order_id"]]
    lookup = f'<tool_call>{{"name":"get_order","arguments":{{"order_id":{i}}}}}</tool_call>'
    refund = f'<tool_call>{{"name":"refund","arguments":{{"order_id":{i},"amount":{row["amount"]}}}}}</tool_call>'
    result = json.dumps({"columns": ["total", "shipping"], "rows": [[o["total"], o["shipping"]]]})
    return Episode(
        [
            {"role": "user", "content": row["prompt"]},
            {"role": "assistant", "content": lookup},
            {"role": "tool", "name": "get_order", "content": result},
            {"role": "assistant", "content": refund},
            {"role": "tool", "name": "refund", "content": json.dumps({"rows_affected": 1})},
            {"role": "assistant", "content": f"Refunded {row['amount']}."},
        ],
        [PROMPT, POLICY, ENVIRONMENT, POLICY, ENVIRONMENT, POLICY],
    )


def episode_frame(rows: list[dict], env):
    """The rows as the chain's GRPO takes them (DESIGN.md columns): an environment category's episode rows,
    every one in the `learnable` tier, so the curriculum sampler draws them alike (no tiering run here)."""
    import polars as pl

    from rlvrflow.verifiers.config import EPISODE

    params = env.model_dump_json()
    return pl.DataFrame(
        [
            {
                "id": r["id"],
                "prompt": r["prompt"],
                "reference": r["reference"],
                "verifier": EPISODE,
                "verifier_params": params,
                "category": "refunds",
                "tier": "learnable",
                "pass_at_1": 0.5,
            }
            for r in rows
        ]
    )


def score_episodes(model, tok, rows: list[dict]) -> dict:
    """One greedy episode per row (`episode_frame` rows), as the evaluate stage and GRPO's held-out eval
    play them (training/eval_episodes.py): pass_at_1_greedy, the episode figures and `by_prompt`."""
    from rlvrflow.engines import HFEngine
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.eval import EVAL_BATCH
    from rlvrflow.training.eval_episodes import evaluate_episode_rows

    engine = HFEngine(model, tok, device="cpu", batch_size=EVAL_BATCH, prompt_format=PromptFormat())
    return evaluate_episode_rows(engine, rows, EPISODE_TOKENS, seed=0, per_category=0)[0]


def all_greedy_episodes(model, tok, env, rows: list[dict]) -> list:
    """Every row's greedy episode (the failure analysis reads all their tool runs)."""
    from rlvrflow.engines import HFEngine, SamplingParams
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.episodes import play_episodes
    from rlvrflow.training.eval import EVAL_BATCH
    from rlvrflow.training.eval_episodes import episode_view

    view, fmt = episode_view(HFEngine(model, tok, device="cpu", batch_size=EVAL_BATCH, prompt_format=PromptFormat()))
    return play_episodes(view, env, rows, fmt, SamplingParams(temperature=0.0, max_new_tokens=EPISODE_TOKENS), seed=0)


def diagnostics(result: dict) -> dict:
    keep = (
        "pass_at_1_greedy",
        "format_rate",
        "malformed_rate",
        "max_turns_rate",
        "turns_mean",
        "success_by_turns",
        "tool_calls",
    )
    return {k: result[k] for k in keep if k in result}


def run_seed(seed: int, args, out: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.io import read_jsonl
    from rlvrflow.training.config import EvalConfig, SFTConfig, TrainingConfig
    from rlvrflow.training.episode_format import PLAIN
    from rlvrflow.training.episode_sft import sft_on_transcripts
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.training.report import gain_interval
    from rlvrflow.training.tiny_base import BASE_DIR, adapt_base
    from rlvrflow.verifiers import RewardConfig

    t_seed, cpu0 = time.perf_counter(), cpu_seconds()
    d = out / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    orders = build_shop(d / "shop.db", args.orders, seed)
    env = shop_env(d / "shop.db", args.max_turns)
    ids = list(orders)
    held, train = ids[: args.eval_tasks], ids[args.eval_tasks :]
    eval_rows, train_rows = task_rows(orders, held, rng, "eval"), task_rows(orders, train, rng, "train")
    worked = [worked_transcript(r, orders) for r in train_rows[: args.worked]]
    rl_rows = episode_frame(train_rows[args.worked :], env)  # outcome-only: prompt and reference, no transcript
    held_out = episode_frame(eval_rows, env).to_dicts()
    texts = [PLAIN.prompt(w.messages) for w in worked] + ['{"error": "0123456789"} ' + "".join(TASKS.values())]
    tools = env.schemas()

    # arm 1: SFT on worked transcripts (or an earlier run's, trained with the same settings)
    card = {k: getattr(args, k) for k in SFT_KEYS} | {"seed": seed}
    if args.sft_from:
        sft_dir = reused_sft(Path(args.sft_from) / f"seed{seed}" / "sft", card)
        sft_card = json.loads((sft_dir / "bench_sft.json").read_text())
        sft_seconds, sft_cpu = sft_card["seconds"], sft_card["cpu_seconds"]
        print(
            f"seed {seed}: SFT reused from {sft_dir} ({sft_seconds:.0f}s, {sft_cpu:.0f}s CPU when trained)", flush=True
        )
    else:
        t0, c0 = time.perf_counter(), cpu_seconds()
        base = adapt_base(BASE_DIR, texts, d / "base", seed=seed)
        model, tok = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
        sc = SFTConfig(
            max_steps=args.sft_steps,
            learning_rate=args.sft_lr,
            batch_size=16,
            warmup_steps=10,
            logging_steps=50,
            max_length=512,
        )
        sft_log = sft_on_transcripts(model, tok, worked, tools, sc, seed)
        sft_dir = d / "sft"
        model.save_pretrained(sft_dir)
        tok.save_pretrained(sft_dir)
        sft_seconds, sft_cpu = time.perf_counter() - t0, cpu_seconds() - c0
        card |= {"seconds": round(sft_seconds, 1), "cpu_seconds": round(sft_cpu, 1)}
        (sft_dir / "bench_sft.json").write_text(json.dumps(card, indent=2))
        print(
            f"seed {seed}: SFT {args.sft_steps} steps {sft_seconds:.0f}s ({sft_cpu:.0f}s CPU) loss "
            f"{sft_log[0]['loss']:.3f} -> {sft_log[-1]['loss']:.3f}",
            flush=True,
        )

    # arm 2: the chain's GRPO (training/grpo.py) on the episode rows from the SFT model; its held-out eval
    # plays the held-out tasks at step 0 (the SFT model's) and at the end
    cfg = TrainingConfig(
        model=str(sft_dir),
        torch_threads=args.threads,
        grpo={
            "max_steps": args.grpo_steps,
            "prompts_per_step": args.prompts,
            "num_generations": args.group,
            "learning_rate": args.grpo_lr,
            "warmup_steps": args.grpo_warmup,
            "temperature": args.temperature,
            "episode_max_new_tokens": EPISODE_TOKENS,
            "beta": 0.0,
            "max_refill_rounds": args.refill_rounds,
            "logging_steps": 1,
        },
        checkpoint={"every": args.grpo_steps, "keep_last": 1},  # one eval at the end: the final checkpoint
    )
    eval_cfg = EvalConfig(k=1, n_samples=1, episode_max_new_tokens=EPISODE_TOKENS, samples_per_category=4)
    t0, c0 = time.perf_counter(), cpu_seconds()
    start = with_context(sft_dir, d / "grpo_start", args.context)
    summary = train_grpo(
        start,
        rl_rows,
        cfg,
        CurriculumConfig(),
        RewardConfig(),
        rl_rows.head(0),  # no single-reply rows: the held-out episodes are the eval's headline
        eval_cfg,
        d / "grpo",
        seed,
        eval_episodes=held_out,
    )
    grpo_seconds, grpo_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    evals, metrics = read_jsonl(d / "grpo" / "evals.jsonl"), read_jsonl(d / "grpo" / "metrics.jsonl")
    by = {e["step"]: e for e in evals}
    sft_res = _with_prompts(by[0], summary, first=True)
    grpo_res = _with_prompts(by[args.grpo_steps], summary, first=False)
    print(
        f"seed {seed}: GRPO {args.grpo_steps} steps {grpo_seconds:.0f}s ({grpo_cpu:.0f}s CPU; loop {summary['seconds']:.0f}s), "
        f"zero-variance {summary['zero_variance_fraction']:.0%}",
        flush=True,
    )

    # arm 3: control, the SFT model trained on the same transcripts for the GRPO stage's CPU seconds
    ctrl_res, ctrl_log, ctrl_seconds, ctrl_cpu = None, [], 0.0, 0.0
    if not args.no_control:
        t0, c0 = time.perf_counter(), cpu_seconds()
        ctrl, ctok = AutoModelForCausalLM.from_pretrained(sft_dir), AutoTokenizer.from_pretrained(sft_dir)
        csc = SFTConfig(
            max_steps=100_000,
            learning_rate=args.sft_lr * 0.1**0.5,
            batch_size=16,
            warmup_steps=0,
            logging_steps=50,
            max_length=512,
        )  # the cosine over 100k steps is flat: the rate SFT ended near, held
        # as many CPU seconds as the GRPO stage took, its two held-out evals included (a little more than
        # its loop had: the control's edge); the wall clock would also count the machine's other jobs
        ctrl_log = sft_on_transcripts(ctrl, ctok, worked, tools, csc, seed + 1, max_time_s=grpo_cpu, clock=cpu_seconds)
        ctrl_res = score_episodes(ctrl, ctok, held_out)
        ctrl_seconds, ctrl_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    total = time.perf_counter() - t_seed + (sft_seconds if args.sft_from else 0.0)
    cpu_total = cpu_seconds() - cpu0 + (sft_cpu if args.sft_from else 0.0)
    q = max(1, len(metrics) // 4)
    line = {
        "seed": seed,
        "seconds_total": round(total, 1),
        "cpu_seconds_total": round(cpu_total, 1),
        "cpu_seconds_sft_grpo": round(sft_cpu + grpo_cpu, 1),  # the trained chain, without the control arm
        "sft_reused_from": args.sft_from,
        "seconds_sft": round(sft_seconds, 1),
        "cpu_seconds_sft": round(sft_cpu, 1),
        "seconds_grpo": round(grpo_seconds, 1),
        "cpu_seconds_grpo": round(grpo_cpu, 1),
        "seconds_grpo_loop": summary["seconds"],
        "seconds_control": round(ctrl_seconds, 1),
        "cpu_seconds_control": round(ctrl_cpu, 1),
        "control_steps": ctrl_log[-1]["step"] if ctrl_log else 0,
        "sft": diagnostics(sft_res),
        "grpo": diagnostics(grpo_res),
        "control": diagnostics(ctrl_res) if ctrl_res else None,
        "gain_grpo_over_sft": gain_interval(sft_res, grpo_res),
        "gain_grpo_over_control": gain_interval(ctrl_res, grpo_res) if ctrl_res else None,
        "gain_control_over_sft": gain_interval(sft_res, ctrl_res) if ctrl_res else None,
        "zero_variance_fraction": summary["zero_variance_fraction"],
        "train_success_first_quarter": _quarter(metrics[:q], "episode_success_rate"),
        "train_success_last_quarter": _quarter(metrics[-q:], "episode_success_rate"),
        "train_malformed_first_quarter": _quarter(metrics[:q], "episode_malformed_rate"),
        "train_malformed_last_quarter": _quarter(metrics[-q:], "episode_malformed_rate"),
    }
    g = line["gain_grpo_over_sft"]
    ctrl_text = f"control {ctrl_res['pass_at_1_greedy']:.1%}" if ctrl_res else "no control arm"
    print(
        f"seed {seed}: held-out success SFT {sft_res['pass_at_1_greedy']:.1%} GRPO {grpo_res['pass_at_1_greedy']:.1%} "
        f"{ctrl_text}; GRPO-SFT {g['points']:+.1f} [{g['low']:+.1f}, {g['high']:+.1f}]; "
        f"{total:.0f}s wall, {line['cpu_seconds_total']:.0f}s CPU",
        flush=True,
    )
    return line


def failure_kinds(rows: list[dict], transcripts: list[dict], orders: dict[int, dict]) -> dict:
    """What went wrong in each held-out episode, from its transcript: `ok`, `no_lookup`, `wrong_lookup_id`,
    `no_refund` (malformed or missing call), `wrong_refund_id`, `other_column` (the other field's
    amount), `wrong_amount` (a number the order does not hold), `extra_refunds`."""
    counts: dict[str, int] = {}
    for row, t in zip(rows, transcripts):
        runs = [r for r in t["tool_runs"] if r["ok"]]
        looked = [r["arguments"].get("order_id") for r in runs if r["name"] == "get_order"]
        refunds = [r["arguments"] for r in runs if r["name"] == "refund"]
        other = orders[row["order_id"]]["total" if row["kind"] == "shipping" else "shipping"]
        if t["verdict"]["status"] == "correct":
            kind = "ok"
        elif not looked:
            kind = "no_lookup"
        elif row["order_id"] not in looked:
            kind = "wrong_lookup_id"
        elif not refunds:
            kind = "no_refund"
        elif len(refunds) > 1:
            kind = "extra_refunds"
        elif refunds[0].get("order_id") != row["order_id"]:
            kind = "wrong_refund_id"
        elif refunds[0].get("amount") == other:
            kind = "other_column"
        else:
            kind = "wrong_amount"
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def analyse(seed_dir: Path, seed: int, eval_tasks: int, n_orders: int, max_turns: int) -> dict:
    """Failure kinds of the SFT model and the final GRPO checkpoint on the seed's held-out tasks
    (rebuilt from the seed as run_seed builds them; greedy, outside the timed run)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.training import checkpoint as ckpt

    rng = random.Random(seed)
    orders = build_shop(seed_dir / "shop.db", n_orders, seed)
    env = shop_env(seed_dir / "shop.db", max_turns)
    rows = task_rows(orders, list(orders)[:eval_tasks], rng, "eval")
    out = {}
    # grpo_start is the SFT model GRPO started from (with_context): there also when the SFT was reused
    for name, path in (("sft", seed_dir / "grpo_start"), ("grpo", ckpt.latest_checkpoint(seed_dir / "grpo"))):
        model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
        episodes = all_greedy_episodes(model, tok, env, rows)
        out[name] = {
            "pass_at_1_greedy": sum(e.verdict.correct for e in episodes) / len(episodes),
            "failures": failure_kinds(rows, [e.to_dict() for e in episodes], orders),
        }
        print(f"{name}: {out[name]}", flush=True)
    return out


def with_context(sft_dir: Path, out: Path, positions: int) -> Path:
    """The SFT model saved to `out` with `positions` as its context. The tiny base is a Llama with rotary
    positions, so its 512 is a setting, not a table: past it the positions are only unseen in training.
    A sampled episode whose malformed calls bring long error results can pass 512 tokens, and episode
    GRPO stops on one; such episodes fail, and the longer context lets GRPO score them and learn from it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(sft_dir)
    if getattr(model.config, "rope_parameters", {}).get("rope_type") != "default":
        raise ValueError(f"--context: {sft_dir} is not a default-rotary model; its context cannot be set here")
    model.config.max_position_embeddings = max(positions, model.config.max_position_embeddings)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(sft_dir).save_pretrained(out)
    return out


SFT_KEYS = ("orders", "eval_tasks", "worked", "sft_steps", "sft_lr")


def reused_sft(sft_dir: Path, card: dict) -> Path:
    """`sft_dir` when its card says it was trained with `card`'s settings; otherwise a ValueError naming the fix."""
    path = sft_dir / "bench_sft.json"
    if not path.exists():
        raise ValueError(f"--sft-from: {path} is missing; run the bench once without --sft-from to train that SFT")
    found = json.loads(path.read_text())
    differ = {k: (found.get(k), v) for k, v in card.items() if found.get(k) != v}
    if differ:
        raise ValueError(
            f"--sft-from: {sft_dir} was trained with other settings ({differ}, as (trained, asked)); "
            "pass the same settings or drop --sft-from"
        )
    return sft_dir


def _quarter(metrics: list[dict], key: str) -> float:
    """The mean of `key` over the steps that played episodes (a step of refills only may have none)."""
    values = [m[key] for m in metrics if key in m]
    return sum(values) / max(1, len(values))


def _with_prompts(record: dict, summary: dict, first: bool) -> dict:
    """An evals.jsonl record with its per-task results, which the run state keeps (held_out_first/last)."""
    from rlvrflow.training import checkpoint as ckpt

    state = ckpt.load_state(summary["final_checkpoint"])["run"]
    return {**record, "by_prompt": state["held_out_first" if first else "held_out_last"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default="runs/agent_target")
    ap.add_argument("--orders", type=int, default=900)
    ap.add_argument("--eval-tasks", type=int, default=150)
    ap.add_argument("--worked", type=int, default=80)
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--sft-lr", type=float, default=2e-3)
    ap.add_argument("--grpo-steps", type=int, default=90)
    ap.add_argument("--grpo-lr", type=float, default=2e-4)
    ap.add_argument(
        "--max-turns",
        type=int,
        default=3,
        help="assistant messages per episode: 3 is the task's (lookup, refund, reply)",
    )
    ap.add_argument(
        "--context",
        type=int,
        default=1024,
        help="positions of the model GRPO starts from (with_context): room for long failed episodes",
    )
    ap.add_argument("--temperature", type=float, default=0.7, help="GRPO's rollout temperature")
    ap.add_argument(
        "--grpo-warmup",
        type=int,
        default=10,
        help="GRPO steps of linear lr warmup: a fresh AdamW's first steps move every weight by about the lr",
    )
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument(
        "--refill-rounds",
        type=int,
        default=2,
        help="GRPO's max_refill_rounds: draws that replace zero-variance groups within a step (0: none)",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sft-from", default=None, help="an earlier run's --out whose SFT models to start from")
    ap.add_argument("--no-control", action="store_true", help="skip the control arm (a screening run)")
    ap.add_argument(
        "--analyse",
        action="store_true",
        help="after a run: the failure kinds of each seed's SFT and final GRPO model (OUT/agent_failures.json)",
    )
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.analyse:
        found = {
            s: analyse(out / f"seed{s}", int(s), args.eval_tasks, args.orders, args.max_turns)
            for s in args.seeds.split(",")
        }
        (out / "agent_failures.json").write_text(json.dumps(found, indent=2))
        return 0
    lines = [run_seed(int(s), args, out) for s in args.seeds.split(",")]
    gains = [ln["gain_grpo_over_sft"]["points"] for ln in lines]
    verdict = {
        "mean_gain": sum(gains) / len(gains),
        "target_gain": TARGET_GAIN,
        "max_seconds": max(ln["seconds_total"] for ln in lines),
        "max_cpu_seconds": max(ln["cpu_seconds_total"] for ln in lines),
        "max_cpu_seconds_sft_grpo": max(ln["cpu_seconds_sft_grpo"] for ln in lines),
        "target_seconds": TARGET_SECONDS,
    }
    verdict["met"] = (
        not args.no_control
        and verdict["mean_gain"] >= TARGET_GAIN
        and verdict["max_cpu_seconds_sft_grpo"] <= TARGET_SECONDS
    )
    (out / "agent_target.json").write_text(
        json.dumps({"args": vars(args), "seeds": lines, "verdict": verdict}, indent=2)
    )
    print(json.dumps(verdict))
    return 0 if verdict["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
