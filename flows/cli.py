"""The `rlvrflow` command line: check a spec, clean logs, verify answers, tier prompts, run it all,
export DPO pairs, diagnose a run.

Every command imports its heavy modules lazily, so `rlvrflow --help` is fast. A user error (bad
spec, missing file, failed validation) prints one clear message and exits non-zero, never a
traceback; the exit code is the failure's kind from flows/errors.py (see the epilog).

    rlvrflow spec-check examples/retail/spec.yaml
    rlvrflow run examples/retail/spec.yaml --out runs/demo
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlvrflow.flows.errors import EXIT_CODES

EXIT_DATA = EXIT_CODES["data"]  # the data failed a check (validation report, canaries, missing sources)
EXIT_USAGE = EXIT_CODES["usage"]  # the spec or the command line is wrong
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command whose output reader went away

_EPILOG = """\
commands and examples:
  spec-check  validate a domain spec, print its sections and what its data implies
                rlvrflow spec-check examples/retail/spec.yaml
  clean       ingest + clean + validate the spec's sources; print per-stage counts
                rlvrflow clean examples/retail/spec.yaml --out runs/clean
  verify      score model responses in a JSONL file with one verifier
                rlvrflow verify --verifier math in.jsonl out.jsonl
                rlvrflow verify --verifier sql --params '{"database": "shop.db"}' --workers 4 in.jsonl out.jsonl
  tier        prepare + attach + split, then tier the train split by a model's pass@k
                rlvrflow tier examples/retail/spec.yaml --model runs/demo/model --out runs/tiers
  run         the whole retrain flow on Prefect's ephemeral API (no server needed)
                rlvrflow run examples/retail/spec.yaml --out runs/demo
                rlvrflow run examples/retail/spec.yaml --out runs/smoke --smoke
                rlvrflow run examples/retail/spec.yaml --out runs/demo --force   # ignore cached stages
                rlvrflow run examples/retail/spec.yaml --out runs/demo --set training.torch_threads=1
                rlvrflow run examples/retail/spec.yaml --out runs/dpo --set training.algorithm=dpo
  make-model  build a small random test model (Qwen2, BPE tokenizer trained on a corpus, chat template),
              or rebuild the pretrained tiny base that training.model: embedded-base starts from
                rlvrflow make-model --arch qwen2 --out runs/qwen2-tiny
                rlvrflow make-model --arch qwen2 --out runs/qwen2-tiny --corpus my_logs.jsonl
                rlvrflow make-model --arch tiny-base --out runs/tiny-base   # 40-60 min on one core
  export      a training checkpoint as a plain Hugging Face model (or its LoRA adapter)
                rlvrflow export runs/demo/stages/grpo/KEY/step_000180 --out models/mine --merge
  export-dpo  DPO pairs (chosen = correct, rejected = wrong sample of a prompt) from tiering's samples,
              as JSONL and a Hugging Face dataset (prompt, chosen, rejected); reuses a run's stages
                rlvrflow export-dpo examples/retail/spec.yaml --out runs/dpo-data --cache runs/demo
  import-model  a GGUF model file (llama.cpp's format) as a plain Hugging Face folder (float weights,
              tokenizer, chat template) for training.model; needs `pip install gguf`
                rlvrflow import-model SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
  doctor      name what went wrong in a run, with the evidence and the change to try
                rlvrflow doctor runs/demo            # the newest run in OUT, or a run folder
                rlvrflow doctor runs/demo/runs/20261201T040343Z-d58d00f4 --json

exit codes: 0 ok, 1 data failed a check, 2 bad spec or arguments, 75 a transient failure outlasted
its retries (a worker died, a connection dropped: run again), 70 a bug (with its traceback), 141 the
reader of the output went away (`rlvrflow doctor RUN | head`: nothing is wrong).
Two `rlvrflow run` on the same --out take turns: the second waits, then reuses the first's stages.
"""


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""

    def __init__(self, message: str, code: int = EXIT_DATA):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvrflow",
        description="From raw domain logs to a GRPO-trained checkpoint, with every step verifiable.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "spec-check",
        help="validate a domain spec",
        description="Validate a domain spec, "
        "print its sections, then what its data implies (no worked rows, prompts longer than the "
        "model's positions, settings the model ignores). Example: rlvrflow spec-check "
        "examples/retail/spec.yaml",
    )
    p.add_argument("spec", type=Path, help="domain spec YAML")
    p.set_defaults(func=cmd_spec_check)

    p = sub.add_parser(
        "clean",
        help="ingest + clean + validate",
        description="Ingest, clean and validate "
        "the spec's sources into DIR (clean.parquet, rejects.parquet, stats.json, "
        "validation.json). Example: rlvrflow clean examples/retail/spec.yaml --out runs/clean",
    )
    p.add_argument("spec", type=Path, help="domain spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser(
        "verify",
        help="score responses with a verifier",
        description="Score each JSONL "
        "line ({response, reference}) with one verifier and write verdicts. Example: "
        "rlvrflow verify --verifier math in.jsonl out.jsonl",
    )
    p.add_argument("--verifier", required=True, help="verifier name (math, choice, sql, code, json, regex, ...)")
    p.add_argument("--params", default="{}", help="verifier params as a JSON object (default {})")
    p.add_argument("--workers", type=int, default=2, help="scoring processes (default 2)")
    p.add_argument("input", type=Path, help="input JSONL")
    p.add_argument("output", type=Path, help="output JSONL")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "tier",
        help="tier prompts by a model's pass@k",
        description="Prepare, attach "
        "verifiers, split, then tier the train rows tiering and GRPO use (curriculum.rl_rows, "
        "curriculum.max_rows) by MODEL's pass@k into DIR. Example: "
        "rlvrflow tier examples/retail/spec.yaml --model runs/demo/model --out runs/tiers",
    )
    p.add_argument("spec", type=Path, help="domain spec YAML")
    p.add_argument("--model", type=Path, required=True, help="local Hugging Face causal-LM directory")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=cmd_tier)

    p = sub.add_parser(
        "run",
        help="run the whole retrain flow locally",
        description="Run the retrain "
        "flow (prepare, attach, split, SFT, tier, GRPO or DPO by training.algorithm, evaluate, report) "
        "on Prefect's ephemeral API. Finished stages with unchanged inputs are reused from DIR. "
        "Ends with the final and the best checkpoint, the eval matrix and the run doctor's "
        "findings. "
        "Example: rlvrflow run examples/retail/spec.yaml --out runs/demo",
    )
    p.add_argument("spec", type=Path, help="domain spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder (stage cache + run folders)")
    p.add_argument("--force", action="store_true", help="recompute every stage, ignoring the cache")
    p.add_argument("--smoke", action="store_true", help="tiny budget (few rows and steps) to check the chain")
    p.add_argument(
        "--runner",
        choices=["threads", "dask"],
        default=None,
        help="task runner for the fan-out stages (default: the spec's orchestration.runner)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a spec field by dotted path, VALUE read as YAML; repeatable, e.g. "
        "--set training.grpo.max_steps=20 --set training.torch_threads=1",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "make-model",
        help="build a small test model or the tiny base",
        description="qwen2: build a "
        "randomly initialized model with a byte-level BPE tokenizer trained on the corpus and a ChatML "
        "chat template, saved as a Hugging Face directory (training/qwen_model.py). tiny-base: train the "
        "embedded architecture on generic arithmetic and number reading (training/tiny_base.py; the "
        "shipped base that training.model: embedded-base uses was built this way). Examples: "
        "rlvrflow make-model --arch qwen2 --out runs/qwen2-tiny; "
        "rlvrflow make-model --arch tiny-base --out runs/tiny-base",
    )
    p.add_argument("--arch", choices=["qwen2", "tiny-base"], default="qwen2", help="architecture (default qwen2)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=None,
        metavar="FILE",
        help="JSONL or text file to train the tokenizer on; repeatable (default: the retail sample)",
    )
    p.add_argument("--vocab-size", type=int, default=None, help="qwen2: BPE vocabulary size, at most (default 2048)")
    p.add_argument("--seed", type=int, default=0, help="weight init seed; tiny-base: the corpus's too (default 0)")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="tiny-base: training steps of 64 sequences (default 20000, 40-60 min on one CPU core)",
    )
    p.set_defaults(func=cmd_make_model)

    p = sub.add_parser(
        "export",
        help="checkpoint -> plain Hugging Face model",
        description="Write a "
        "checkpoint as a plain Hugging Face directory without the training state; a LoRA "
        "checkpoint as its adapter, or with --merge as a full model (training/export.py). "
        "Example: rlvrflow export runs/x/step_000100 --out models/mine --merge",
    )
    p.add_argument("checkpoint", type=Path, help="a step_NNNNNN/ checkpoint (or an SFT model) directory")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--merge", action="store_true", help="fold a LoRA adapter into the base weights")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "export-dpo",
        help="DPO pairs from tiering's samples",
        description="Run (or reuse) "
        "prepare, attach, split, SFT and tier through the stage cache, then write DPO pairs "
        "(training/dpo_data.py: chosen = a correct sample, rejected = a wrong one of the same "
        "prompt; tiers, pairs per prompt and length matching from training.dpo) into DIR: "
        "dpo_pairs.jsonl, dataset/ (datasets.load_from_disk: prompt, chosen, rejected, ids, "
        "verdicts) and dpo_stats.json. No pairs is a data error. Example: rlvrflow export-dpo "
        "examples/retail/spec.yaml --out runs/dpo-data --cache runs/demo",
    )
    p.add_argument("spec", type=Path, help="domain spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder for the pairs")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="stage cache to reuse, e.g. an `rlvrflow run --out` folder (default: --out)",
    )
    p.add_argument("--smoke", action="store_true", help="the smoke budget, to reuse an `rlvrflow run --smoke` cache")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a spec field as `rlvrflow run --set` does (the same overrides reuse its stages)",
    )
    p.set_defaults(func=cmd_export_dpo)

    p = sub.add_parser(
        "doctor",
        help="diagnose a run",
        description="Read a run's metrics, evals, eval matrix "
        "and samples and name what went wrong, each finding with its evidence and the change to "
        "try (training/doctor.py). Example: rlvrflow doctor runs/demo",
    )
    p.add_argument(
        "run_dir",
        type=Path,
        help="a run folder (OUT/runs/<time>-<id>), an output folder (its newest run) or a GRPO stage folder",
    )
    p.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser(
        "models",
        help="the model registry: list, show, register, promote, rollback",
        description="The registry under OUT/registry/ (flows/models.py): every registered "
        "run's best model, and the champion, the model in use. Example: rlvrflow models "
        "--out runs/retail promote 20261204T010000Z-1a2b3c4d --reason 'beats last week'",
    )
    p.add_argument("--out", type=Path, required=True, help="the --out folder of the runs")
    p.add_argument(
        "--spec",
        type=Path,
        help="a domain spec whose `registry:` section (backend: mlflow) says to "
        "apply every change to MLflow's model registry too",
    )
    p.add_argument("--mlflow-uri", help="an MLflow tracking URI: keep its model registry in step (backend: mlflow)")
    p.add_argument(
        "--mlflow-model",
        help="the registered model's name in MLflow (default: the spec's registry.model_name, else rlvrflow-<domain>)",
    )
    msub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    msub.add_parser("list", help="registered models, oldest first; * marks the champion")
    q = msub.add_parser("show", help="one model's record as JSON (default: the champion)")
    q.add_argument("model", nargs="?", help="a model id (the run folder's name)")
    q = msub.add_parser("register", help="export a finished run's best model into the registry")
    q.add_argument("run_dir", type=Path, help="OUT/runs/<time>-<run id>/")
    q = msub.add_parser("promote", help="make a registered model the champion")
    q.add_argument("model", help="a model id (the run folder's name)")
    q.add_argument("--reason", required=True, help="why, kept in the registry's events")
    q = msub.add_parser("rollback", help="make the previous champion current again")
    q.add_argument("--reason", required=True, help="why, kept in the registry's events")
    msub.add_parser(
        "check", help="MLflow backend: does MLflow's champion alias name the local champion? (exit 1 when not)"
    )
    msub.add_parser(
        "sync",
        help="MLflow backend: apply the local record to MLflow (each model as a version, "
        "the champion alias), e.g. after MLflow was unreachable",
    )
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "import-model",
        help="GGUF file -> plain Hugging Face model",
        description="Load a GGUF "
        "file with transformers' GGUF support (dequantized to float) and write a Hugging Face "
        "folder: safetensors weights, tokenizer with its chat template, generation config "
        "(training/import_model.py). Needs the gguf package. Example: rlvrflow import-model "
        "model.Q4_1.gguf --out models/mine",
    )
    p.add_argument("gguf_file", type=Path, help="a .gguf model file")
    p.add_argument("--out", type=Path, required=True, help="output folder (must be empty or absent)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="weight dtype to save")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    p.set_defaults(func=cmd_import_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe prints a traceback
        return code
    except BrokenPipeError:
        return closed_pipe()


def closed_pipe() -> int:
    """The reader of stdout went away (`rlvrflow doctor RUN | head`): stop quietly, as a command killed
    by SIGPIPE does. stdout is pointed at devnull so the interpreter's last flush cannot fail again;
    the exit status is the shell's for SIGPIPE (141), which `set -o pipefail` sees and plain pipes ignore."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_PIPE


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except UserError as exc:
        print(f"rlvrflow {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        raise  # stdout closed under us: main() stops quietly
    except KeyboardInterrupt:
        print(f"rlvrflow {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception:  # a bug (flows/errors.py): the traceback is what a report needs
        import traceback

        traceback.print_exc()
        print(f"rlvrflow {args.command}: failed on a bug (the traceback above); please report it", file=sys.stderr)
        return EXIT_CODES["bug"]


# ----- commands -------------------------------------------------------------------------------


def _load(path: Path):
    from rlvrflow.flows.spec import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None


def cmd_spec_check(args) -> int:
    """Validate the spec, then print every section in full as YAML, with its defaults filled in and
    generation.* resolved: exactly what the stages will read (docs/spec.md says what each field means)."""
    import yaml

    spec = _load(args.spec)
    print(f"{args.spec}: ok (domain {spec.domain!r}, {len(spec.sources)} source(s), base_dir {spec.base_dir})")
    data = spec.model_dump(mode="json")
    for name in type(spec).model_fields:
        if name in ("domain", "description"):
            continue
        text = yaml.safe_dump({name: data[name]}, sort_keys=False, allow_unicode=True, width=100)
        print("\n".join(f"  {line}" for line in text.rstrip().splitlines()))
    print("every field, its default and its rules: docs/spec.md")
    print_preflight(spec)
    return 0


def print_preflight(spec) -> None:
    """What the data and the spec imply before anything trains (flows/preflight.py): no worked rows,
    prompts longer than the model's positions, settings the model ignores, a 16-bit dtype this CPU
    emulates; one line each."""
    from rlvrflow.flows.preflight import preflight

    notices = preflight(spec)
    if notices:
        print(f"what the data and the spec imply ({len(notices)}):")
    for n in notices:
        print(f"  [{n.kind}] {n.message}")


def format_stats(stats: dict) -> str:
    """One line per sub-stage (ingest, clean, dedup, validate): rows in / kept / rejected and why."""
    rows = stats.get("stages", {"": stats})
    lines = []
    for name, st in rows.items():
        if not isinstance(st, dict) or "rows_in" not in st:
            continue
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(st.get("rejected_by_reason", {}).items()))
        lines.append(
            f"{name or 'total':>10}: in {st['rows_in']:>6}  kept {st['rows_kept']:>6}  "
            f"rejected {st['rows_rejected']:>5}" + (f"  ({reasons})" if reasons else "")
        )
    return "\n".join(lines) or json.dumps(stats, indent=1, default=str)


def publish(manifest, names: dict[str, str], out: Path) -> None:
    """Copy a stage's outputs into OUT under the names a command documents (atomically)."""
    import os
    import shutil

    for output, filename in names.items():
        if output in manifest.outputs:
            tmp = out / f".{filename}.tmp"
            shutil.copyfile(manifest.path(output), tmp)
            os.replace(tmp, out / filename)


def cmd_clean(args) -> int:
    from rlvrflow.flows import stages

    spec = _load(args.spec)
    m = _guard(lambda: stages.run("prepare", spec, args.out, {}))
    publish(
        m,
        {"rows": "clean.parquet", "rejects": "rejects.parquet", "stats": "stats.json", "validation": "validation.json"},
        args.out,
    )
    print(format_stats(m.stats))
    print(f"wrote {args.out} (the stage folder: {m.dir})")
    return 0


def cmd_verify(args) -> int:
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise UserError(
            f'--params: not JSON ({exc.msg} at column {exc.colno}); pass an object like \'{{"database": "shop.db"}}\'',
            EXIT_USAGE,
        ) from None
    if not isinstance(params, dict):
        raise UserError('--params: must be a JSON object like \'{"database": "shop.db"}\'', EXIT_USAGE)
    if not args.input.is_file():
        raise UserError(f"{args.input}: input file not found", EXIT_USAGE)
    from rlvrflow.verifiers.cli import verify_file

    code = _guard(lambda: verify_file(args.verifier, json.dumps(params), args.input, args.output, args.workers))
    if code == 0:
        print(f"wrote {args.output}")
    return code


def cmd_tier(args) -> int:
    spec = _load(args.spec)
    if not args.model.is_dir():
        raise UserError(f"--model {args.model}: not a directory; pass a local Hugging Face model folder", EXIT_USAGE)
    m = _guard(lambda: tier_with_model(spec, args.model, args.out))
    print(json.dumps(m.stats, indent=1, default=str))
    print(f"wrote {args.out}/tiers.parquet and the tier report (the stage folder: {m.dir})")
    return 0


def tier_with_model(spec, model: Path, out: Path):
    """prepare, attach, split, then tier with MODEL in place of the SFT stage's model: the same
    table rows and runner as `rlvrflow run`, so the same spec and seed give the same tiers."""
    from rlvrflow.flows import stages

    m = {"prepare": stages.run("prepare", spec, out, {})}
    m["attach"] = stages.run("attach", spec, out, m)
    m["split"] = stages.run("split", spec, out, m)
    m["sft"] = stages.given_model(model)
    tier = stages.run("tier", spec, out, m)
    publish(
        tier,
        {
            "rows": "tiers.parquet",
            "rejects": "tiers_rejects.parquet",
            "stats": "tiers_stats.json",
            "rollouts": "tier_rollouts.parquet",
            "table": "tier_table.csv",
            "markdown": "tier_report.md",
            "histogram": "tier_histogram.png",
        },
        out,
    )
    return tier


def parse_overrides(items: list[str]) -> dict:
    """`--set a.b=VALUE` pairs as {"a.b": value}, each VALUE read as YAML (20, 1e-3, true, [a, b])."""
    import yaml

    out = {}
    for item in items:
        field, sep, raw = item.partition("=")
        if not sep or not field.strip():
            raise UserError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set training.grpo.max_steps=20", EXIT_USAGE)
        try:
            out[field.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise UserError(f"--set {item!r}: VALUE is not YAML ({exc})", EXIT_USAGE) from None
    return out


def cmd_run(args) -> int:
    from rlvrflow.flows.common import with_overrides
    from rlvrflow.flows.run_in_process import run_local
    from rlvrflow.flows.spec import SpecError

    spec = _load(args.spec)  # fail fast on a bad spec or override, before Prefect starts
    overrides = parse_overrides(args.overrides)
    try:
        with_overrides(spec, overrides)
    except SpecError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    from rlvrflow.flows import ranks

    rank, world = ranks.world()
    if world > 1:  # torchrun / deepspeed launcher: rank 0 runs the flow, the others train with it
        ranks.join(with_overrides(spec, overrides))
        if rank != 0:
            code = ranks.follow()  # a failure exits with its collectives as they are: NCCL could wait on them
            ranks.leave()
            return code
    ok = False
    try:
        outcome = _guard(
            lambda: run_local(
                args.spec, args.out, force=args.force, smoke=args.smoke, runner=args.runner, overrides=overrides
            )
        )
        ok = outcome.ok
    finally:
        ranks.close(ok)
        ranks.leave()
    print(outcome.summary(spec.domain))
    return 0 if outcome.ok else EXIT_CODES[outcome.kind]


def cmd_make_model(args) -> int:
    from rlvrflow.training.qwen_model import Qwen2Dims, make_model

    if args.arch == "tiny-base":
        if args.corpus:
            raise UserError(
                "--corpus: the tiny base trains on its own generic corpus (training/tiny_base.py); "
                "drop --corpus, or use --arch qwen2",
                EXIT_USAGE,
            )
        if args.vocab_size is not None:
            raise UserError("--vocab-size: the tiny base's vocabulary is its corpus's characters; drop it", EXIT_USAGE)
        steps = 20000 if args.steps is None else args.steps
        if steps < 1:
            raise UserError(f"--steps {steps}: at least 1", EXIT_USAGE)
        from rlvrflow.training.tiny_base import build_base_model

        out = build_base_model(args.out, steps=steps, seed=args.seed)
        print((out / "rlvrflow_model.json").read_text())
        print(f"wrote {args.out}")
        return 0
    if args.steps is not None:
        raise UserError(
            "--steps: qwen2 builds a random model (no training); drop it, or use --arch tiny-base", EXIT_USAGE
        )
    for f in args.corpus or []:
        if not f.is_file():
            raise UserError(f"--corpus {f}: file not found", EXIT_USAGE)
    dims = Qwen2Dims() if args.vocab_size is None else Qwen2Dims(vocab_size=args.vocab_size)
    try:
        card = make_model(args.arch, args.out, args.corpus, args.seed, dims)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    print(json.dumps(card, indent=1))
    print(f"wrote {args.out}")
    return 0


def cmd_export(args) -> int:
    from rlvrflow.training.export import export_checkpoint

    if not args.checkpoint.is_dir():
        raise UserError(f"{args.checkpoint}: not a directory; pass a step_NNNNNN/ checkpoint", EXIT_USAGE)
    try:
        result = export_checkpoint(args.checkpoint, args.out, merge=args.merge)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    print(json.dumps(result, indent=1))
    print(f"wrote {args.out} ({result['kind']})")
    return 0


def registry_backend(args):
    """The `registry:` section for `rlvrflow models`: the spec's, with --mlflow-uri/--mlflow-model on top."""
    from rlvrflow.flows.config import RegistryConfig

    cfg = RegistryConfig()
    if args.spec:
        from rlvrflow.flows.spec import SpecError, load_spec

        try:
            cfg = load_spec(args.spec).registry
        except SpecError as exc:
            raise UserError(str(exc), EXIT_USAGE) from None
    if args.mlflow_uri or args.mlflow_model:
        cfg = RegistryConfig(
            backend="mlflow",
            tracking_uri=args.mlflow_uri or cfg.tracking_uri,
            model_name=args.mlflow_model or cfg.model_name,
        )
    return cfg


def cmd_models(args) -> int:
    from rlvrflow.flows.models import Registry, RegistryError, describe

    try:
        registry = Registry(args.out, registry_backend(args))
        if args.action == "check":
            agree, text = registry.check()
            print(text)
            return 0 if agree else 1
        if args.action == "sync":
            print("\n".join(registry.sync()) or "no models registered locally; nothing to apply")
        elif args.action == "list":
            models = registry.models()
            print("\n".join(describe(m) for m in models) if models else f"no models registered in {registry.dir}")
        elif args.action == "show":
            model = registry.get(args.model) if args.model else registry.champion()
            if model is None:
                raise RegistryError(
                    f"no champion in {registry.dir} yet; `rlvrflow models --out {args.out} "
                    "promote ID --reason ...` makes one"
                )
            print(json.dumps(model, indent=1))
        elif args.action == "register":
            print(describe(registry.register(args.run_dir)))
        elif args.action == "promote":
            print("champion: " + describe(registry.promote(args.model, args.reason)))
        else:
            print("champion again: " + describe({**registry.rollback(args.reason), "champion": True}))
    except RegistryError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    return 0


def cmd_import_model(args) -> int:
    from rlvrflow.training.import_model import GGUFImportError, import_gguf

    try:
        result = import_gguf(args.gguf_file, args.out, dtype=args.dtype, force=args.force)
    except GGUFImportError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    print(
        f"wrote {result['out']}: {result['architecture']} ({result['model_type']}), "
        f"{result['parameters'] / 1e6:.1f}M parameters, {result['dtype']}, vocab {result['vocab_size']}, "
        f"chat template {'yes' if result['chat_template'] else 'no'}, tensor types "
        f"{', '.join(result['tensor_types'])}, {result['seconds']} s"
    )
    return 0


def export_dpo_pairs(spec, out: Path, cache: Path) -> dict:
    """prepare, attach, split, SFT and tier through the stage table (reused from `cache` when their
    keys match), then training.dpo_data.export_dpo of the tier stage into `out`; returns its stats."""
    import polars as pl

    from rlvrflow.flows import stages
    from rlvrflow.flows.errors import DataError
    from rlvrflow.training.dpo_data import build_pairs, export_dpo

    m = {"prepare": stages.run("prepare", spec, cache, {})}
    for name in ("attach", "split", "sft", "tier"):
        m[name] = stages.run(name, spec, cache, m)
    tier = m["tier"]
    _, stats = build_pairs(
        pl.read_parquet(tier.path("rows")),
        pl.read_parquet(tier.path("rollouts")),
        spec.training.dpo,
        spec.training.seed,
    )
    if not stats["pairs"]:
        raise DataError(
            f"export-dpo: no prompt of tiers {list(spec.training.dpo.tiers)} has both a correct and an "
            f"incorrect sample (of {stats['rows_in']} tiered prompts, dropped: "
            f"{stats['rejected_by_reason']}); widen training.dpo.tiers (--set 'training.dpo.tiers="
            "[learnable, too_hard]'), raise curriculum.n_samples, or train SFT longer"
        )
    return export_dpo(tier.dir, out, spec.training.dpo, spec.training.seed)


def cmd_export_dpo(args) -> int:
    from rlvrflow.flows.common import SMOKE_OVERRIDES, with_overrides
    from rlvrflow.flows.spec import SpecError

    spec = _load(args.spec)
    changes = {**(SMOKE_OVERRIDES if args.smoke else {}), **parse_overrides(args.overrides)}
    try:
        spec = with_overrides(spec, changes) if changes else spec
    except SpecError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    stats = _guard(lambda: export_dpo_pairs(spec, args.out, args.cache or args.out))
    reasons = ", ".join(f"{k}={v}" for k, v in sorted(stats["rejected_by_reason"].items())) or "none"
    print(
        f"{stats['pairs']} pairs from {stats['rows_kept']} of {stats['rows_in']} tiered prompts "
        f"(tiers {', '.join(stats['tiers'])}, at most {stats['max_pairs_per_prompt']} per prompt, "
        f"length matching {'on' if stats['length_match'] else 'off'})"
    )
    print(f"prompts without pairs: {reasons}")
    print(
        f"wrote {args.out}: {stats['files']['jsonl']}, {stats['files']['dataset']}/ "
        f"(datasets.load_from_disk), dpo_stats.json"
    )
    return 0


def cmd_doctor(args) -> int:
    from rlvrflow.training.doctor import main as doctor

    return doctor([str(args.run_dir)] + (["--json"] if args.json else []))


def _guard(fn):
    """Run fn; a usage, data or transient failure (flows/errors.py) becomes a UserError with that
    kind's exit code and no traceback. A bug propagates: its traceback is what a report needs."""
    from rlvrflow.flows.errors import EXIT_CODES, classify

    try:
        return fn()
    except Exception as exc:
        kind = classify(exc)
        if kind == "bug":
            raise
        raise UserError(_message(exc), EXIT_CODES[kind]) from None


def _message(exc: BaseException) -> str:
    from rlvrflow.cleaning.validate import ValidationFailed

    cause = exc
    while cause is not None and not isinstance(cause, (ValidationFailed, FileNotFoundError)):
        cause = cause.__cause__
    if isinstance(cause, ValidationFailed):
        report = getattr(cause, "report", None)
        text = json.dumps(report, indent=1, default=str) if report is not None else ""
        return f"validation failed: {cause}\n{text}".rstrip()
    if isinstance(cause, FileNotFoundError) and cause is exc:
        return f"file not found: {exc.filename or exc}"
    return str(exc)


if __name__ == "__main__":
    sys.exit(main())
