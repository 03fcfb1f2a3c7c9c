"""Outcome-only logs from another system, run through the whole chain the way a newcomer would.

    python bench/outside_logs.py --out bench/out/outside            # write logs + spec, run, print the end
    python bench/outside_logs.py --out bench/out/outside --write-only   # only the logs and the spec

The logs are reasoning-gym's procedural tasks (Apache-2.0; `pip install reasoning-gym`): eight
kinds of math question with a gold answer and no worked solution, 250 rows each by default. The
spec is written from the README's "Your own domain" and docs/spec.md alone: a jsonl source, the
`math` verifier for every category, `training.model: embedded-base`, and a short GRPO budget so the
run takes minutes on two cores. With no worked rows SFT has nothing to learn from: the run starts
GRPO from the base, and on these prompts the base solves almost none. What this bench is for is
what the run then says: its first lines, the warnings in report.json and the doctor's findings
(the policy tends to settle on one answer per kind, such as `2` for every gcd question).

Not measured here: whether a larger model gains on these logs (this bench uses the embedded base).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

# reasoning-gym dataset names: arithmetic, sums, decimals, fraction simplification, gcd, lcm,
# products and a word-problem set (GSM-style templates, the longest prompts)
KINDS = (
    "basic_arithmetic",
    "chain_sum",
    "decimal_arithmetic",
    "fraction_simplification",
    "gcd",
    "lcm",
    "products",
    "gsm_symbolic",
)

SPEC = """\
# Outcome-only logs from another system (reasoning-gym's procedural math, Apache-2.0):
# a question, a gold answer and a kind per row, no worked solution. Written by bench/outside_logs.py.
domain: outside-math
description: procedural math questions with gold answers only (reasoning-gym)

sources:
  - name: outside
    path: logs.jsonl
    format: jsonl
    fields: {{id: id, question: question, reference: answer, category: kind, solution: null}}

validation:
  categories: [{kinds}]
  min_rows: 100

verifiers:
  rules:
{rules}

generation:
  max_new_tokens: 24

curriculum:
  max_rows: {tier_rows}
  n_samples: 4
  k: 2

training:
  model: embedded-base
  sft: {{max_steps: 200}}
  grpo: {{max_steps: {steps}, prompts_per_step: 8, num_generations: 8, learning_rate: 3e-4, warmup_steps: 5, max_refill_rounds: 2}}
  checkpoint: {{every: {every}, keep_last: 2}}
  seed: 0

eval:
  k: 2
  n_samples: 2
  max_prompts: {eval_prompts_or_null}
"""


def write_logs(path: Path, per_kind: int, seed: int) -> int:
    """reasoning-gym's questions and gold answers as one JSONL file; returns the row count."""
    try:
        import reasoning_gym
    except ImportError:
        sys.exit("bench/outside_logs.py needs reasoning-gym: pip install reasoning-gym")
    rows = []
    for j, kind in enumerate(KINDS):
        for i, item in enumerate(reasoning_gym.create_dataset(kind, size=per_kind, seed=seed + j)):
            rows.append(
                {"id": f"{kind}-{i:04d}", "kind": kind, "question": item["question"], "answer": str(item["answer"])}
            )
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def write_spec(path: Path, steps: int, tier_rows: int, eval_prompts: int) -> None:
    rules = "\n".join(f"    - {{category: {k}, verifier: math}}" for k in KINDS)
    path.write_text(
        SPEC.format(
            kinds=", ".join(KINDS),
            rules=rules,
            steps=steps,
            every=max(1, steps // 2),
            tier_rows=tier_rows,
            eval_prompts_or_null=eval_prompts or "null",
        ),
        encoding="utf-8",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the logs, the spec and the run")
    parser.add_argument("--per-kind", type=int, default=250, help="rows per kind (default 250: 2,000 rows)")
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps (default 60)")
    parser.add_argument("--tier-rows", type=int, default=400, help="curriculum.max_rows (default 400)")
    parser.add_argument("--eval-prompts", type=int, default=200, help="eval.max_prompts (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="reasoning-gym's seed (default 0)")
    parser.add_argument("--write-only", action="store_true", help="write the logs and the spec, do not run")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="passed on to rlvrflow run --set",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n = write_logs(args.out / "logs.jsonl", args.per_kind, args.seed)
    spec = args.out / "spec.yaml"
    write_spec(spec, args.steps, args.tier_rows, args.eval_prompts)
    print(f"wrote {n} rows to {args.out / 'logs.jsonl'} and {spec}")
    if args.write_only:
        return 0
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cli = [sys.executable, "-m", "rlvrflow.flows.cli"]
    subprocess.run(cli + ["spec-check", str(spec)], env=env, check=False)
    run = subprocess.run(
        cli + ["run", str(spec), "--out", str(args.out / "run")] + [x for o in args.overrides for x in ("--set", o)],
        env=env,
        check=False,
    )
    report = (
        json.loads((args.out / "run" / "latest.json").read_text())["report"]
        if (args.out / "run" / "latest.json").is_file()
        else None
    )
    if report:
        data = json.loads(Path(report).read_text())
        print(f"\nreport.json warnings ({len(data.get('warnings') or [])}):")
        for w in data.get("warnings") or []:
            print(f"  [{w.get('stage')}] {w.get('message')}")
        print(f"zero_variance_fraction {data.get('zero_variance_fraction')}; gain {data.get('gain', {}).get('greedy')}")
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
