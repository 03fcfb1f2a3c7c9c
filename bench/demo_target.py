"""The demo target, measured: the whole chain on the retail sample domain, without Prefect.

    .venv/bin/python bench/demo_target.py [--spec examples/retail/spec.yaml] [--out runs/demo_target]

Stages: generate raw logs -> cleaning.prepare -> verifiers.attach -> curriculum.assign_split ->
resolve_base_model -> run_sft -> curriculum.tier_rows -> train_grpo (evaluates the SFT baseline and
every checkpoint on the held-out split) -> report.json. Prints the wall time of each stage, SFT vs
final held-out metrics, and whether the targets hold: at most 10 minutes in all on a 2-core machine
and at least +20 points of greedy pass@1 over the run's own SFT checkpoint. Exit status 0 when both
hold, 1 otherwise. `--set training.grpo.steps=60` style overrides are for tuning experiments.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_SECONDS = 600.0
TARGET_GAIN = 0.20


def _override(spec, assignments: list[str]):
    """A copy of the spec with dotted-path overrides (e.g. training.grpo.steps=60) applied."""
    import yaml

    from flows.spec import spec_data

    data = spec_data(spec)  # without generation's filled-in values: --set generation.max_new_tokens=N reaches them
    for item in assignments:
        key, _, raw = item.partition("=")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = yaml.safe_load(raw)
    new = type(spec).model_validate(data)
    new._base_dir, new._path = spec.base_dir, spec.path
    return new


class Stages:
    """Wall and CPU seconds per stage (CPU of this process says what an idle 2-core box would see)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.t0 = time.perf_counter()

    @contextmanager
    def __call__(self, name: str):
        print(f"[demo] {name} ...", flush=True)
        w, c = time.perf_counter(), time.process_time()
        yield
        self.wall[name], self.cpu[name] = time.perf_counter() - w, time.process_time() - c
        print(f"[demo] {name}: {self.wall[name]:.1f} s wall, {self.cpu[name]:.1f} s CPU", flush=True)

    def total(self) -> float:
        return time.perf_counter() - self.t0


def data_stages(spec, out: Path, seed: int, n_rows: int, stage: Stages):
    """generate -> prepare -> attach -> split; returns (all rows, train rows, eval rows)."""
    from cleaning import prepare
    from curriculum import assign_split
    from verifiers import attach

    with stage("generate"):
        cmd = [sys.executable, str(spec.base_dir / "generate.py"), "--out", str(spec.base_dir / "raw"),
               "--seed", str(seed)] + (["--rows", str(n_rows)] if n_rows else [])
        subprocess.run(cmd, check=True, capture_output=True)
    with stage("prepare"):
        prepared = prepare(spec.sources, spec.cleaning, spec.validation, spec.domain, spec.base_dir, out / "prepare")
    with stage("attach"):
        attached = attach(prepared.kept, spec.verifiers, spec.base_dir)
    rows = assign_split(attached.kept, spec.curriculum.eval_fraction, seed)
    train_df, eval_df = rows.filter(rows["split"] == "train"), rows.filter(rows["split"] == "eval")
    print(f"[demo] rows: {len(rows)} verifiable ({len(train_df)} train, {len(eval_df)} eval)")
    return rows, train_df, eval_df


def model_stages(spec, rows, train_df, eval_df, out: Path, seed: int, stage: Stages):
    """base model -> SFT -> tiers -> GRPO (with eval); returns (train_grpo result, tier counts)."""
    import shutil

    from curriculum import HFEngine, tier_rows
    from flows.calls import corpus_texts
    from training import resolve_base_model, run_sft, train_grpo
    from training.modeling import load_model_and_tokenizer, pick_device

    tc = spec.training
    with stage("base_model"):
        # the same tokenizer corpus as `rlvrflow run` (every prompt, solution and reference), hence the
        # same vocabulary and initial weights: the tiny model's SFT result depends on them a lot
        base = resolve_base_model(tc, corpus_texts(rows), out / "base", seed)
    with stage("sft"):
        sft = run_sft(base, train_df, tc, out / "sft", seed)
    with stage("tier"):
        device = pick_device(tc.device)
        model, tok = load_model_and_tokenizer(sft, device, trainable=False)
        engine = HFEngine(model, tok, device=str(device), batch_size=spec.curriculum.engine_batch_size)
        tiered = tier_rows(train_df, engine, spec.curriculum, seed, workers=spec.eval.workers)
        tiers = dict(zip(*tiered["tier"].value_counts().to_dict(as_series=False).values()))
    print(f"[demo] tiers: {tiers}")
    t_grpo = time.perf_counter()

    def progress(step: int, total: int, m: dict) -> None:
        if step % 10 == 0 or step == total:
            print(f"[demo]   grpo step {step}/{total}: reward {m['reward_mean']:.3f} correct {m['correct_rate']:.3f} "
                  f"zero-var {m['zero_variance_fraction']:.2f} ({time.perf_counter() - t_grpo:.0f} s)", flush=True)

    with stage("grpo"):
        shutil.rmtree(out / "grpo", ignore_errors=True)  # the measurement is of a full GRPO run
        result = train_grpo(sft, tiered, tc, spec.curriculum, spec.verifiers.reward, eval_df, spec.eval,
                            out / "grpo", seed, on_progress=progress)
    return result, {str(k): int(v) for k, v in tiers.items()}


def verdict(result: dict, tiers: dict, stage: Stages, out: Path) -> bool:
    """Write report.json, print SFT vs final and whether both targets hold."""
    from training.report import build_report, comparison_table, write_report

    total = stage.total()
    baseline, final = result["baseline"], result["final"]
    report = build_report(baseline, final, tiers, result["zero_variance_fraction"], result["final_checkpoint"],
                          extra={"seconds": {**{k: round(v, 1) for k, v in stage.wall.items()}, "total": round(total, 1)},
                                 "cpu_seconds": {k: round(v, 1) for k, v in stage.cpu.items()},
                                 "best_checkpoint": result["best_checkpoint"], "warnings": result["warnings"],
                                 "grpo_steps_per_second": result["steps_per_second"]})
    write_report(out / "report.json", report)
    gain = final["pass_at_1_greedy"] - baseline["pass_at_1_greedy"]
    print("\n" + comparison_table(baseline, final))
    print(f"\n[demo] stage seconds: {json.dumps(report['seconds'])}")
    print(f"[demo] stage CPU seconds: {json.dumps(report['cpu_seconds'])}")
    print(f"[demo] zero-variance fraction: {result['zero_variance_fraction']:.3f}; "
          f"GRPO steps/s: {result['steps_per_second']:.3f}")
    ok_time, ok_gain = total <= TARGET_SECONDS, gain >= TARGET_GAIN
    print(f"[demo] target time  <= {TARGET_SECONDS:.0f} s : {total:.1f} s  -> {'PASS' if ok_time else 'FAIL'}")
    print(f"[demo] target gain >= +{TARGET_GAIN * 100:.0f} pts greedy pass@1: {gain * 100:+.1f} pts "
          f"({baseline['pass_at_1_greedy']:.3f} -> {final['pass_at_1_greedy']:.3f}) -> {'PASS' if ok_gain else 'FAIL'}")
    print(f"[demo] report: {out / 'report.json'}")
    return ok_time and ok_gain


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "examples/retail/spec.yaml"))
    ap.add_argument("--out", default=str(ROOT / "runs/demo_target"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=0, help="raw rows to generate (0: the generator's default)")
    ap.add_argument("--set", action="append", default=[], help="override a spec value: a.b.c=value")
    ap.add_argument("--fresh", action="store_true", help="delete --out first (no reuse of earlier stages)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("rlvrflow.training").setLevel(logging.INFO)

    import shutil

    from flows.spec import load_spec

    out = Path(args.out)
    if args.fresh:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    spec = _override(load_spec(args.spec), args.set)
    stage = Stages()
    rows, train_df, eval_df = data_stages(spec, out, args.seed, args.rows, stage)
    result, tiers = model_stages(spec, rows, train_df, eval_df, out, args.seed, stage)
    return 0 if verdict(result, tiers, stage, out) else 1


if __name__ == "__main__":
    raise SystemExit(main())
