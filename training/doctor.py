"""The run doctor: reads a finished (or stopped) run's records and names what went wrong, with evidence.

    python -m rlvrflow.training.doctor RUN_DIR [--json]
    findings = diagnose("runs/demo/runs/20261201T014416Z-7282a748")
    print(format_findings(findings))

RUN_DIR may be a run folder (`OUT/runs/<time>-<id>/`, with report.json: the GRPO and evaluate stage
folders are found through its `stages`, as the report found them), an output folder (with
latest.json: its newest run), or a GRPO stage folder (metrics.jsonl, evals.jsonl). The rules are in
training/doctor_rules.py (episode rules: training/doctor_episodes.py); each reads the GRPO metrics per step, the eval of SFT and every
checkpoint, the regression and robustness scores of report.json's `eval_matrix` when the run has
them, and the samples files next to the metrics or evals (`*samples*.jsonl`, `samples/*.jsonl`: rows
with `response` and `reward`, as training.eval writes them; episodes, whole). In a run folder the
split stage's episodes.parquet says which tools only read (their SQL is a SELECT), so tool_loops
can tell a look-up repeated from one read back after a write.
A missing file is reported as an `info` finding naming the file and the rules it silences.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rlvrflow.io import read_jsonl
from rlvrflow.training.checkpoint import latest_checkpoint
from rlvrflow.training.doctor_episodes import EPISODE_RULES
from rlvrflow.training.doctor_rules import DEFAULT_MAX_REGRESSION, RULES, Finding, RunRecords

# eval's samples_path files (`step_000100.samples.jsonl`), a trainer's `samples/step_NNNNNN.jsonl`
SAMPLE_GLOBS = ("*samples*.jsonl", "samples/*.jsonl")
MAX_SAMPLE_ROWS = 20_000  # enough to rank the best completions without reading a huge rollout log whole


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"doctor: {path} is not valid JSON ({exc})") from exc


def _step_of(name: str) -> int:
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else 0


def _name_of(step: int) -> str:
    return "sft" if step == 0 else f"step_{step:06d}"


def _samples(dirs: list[Path], rec: RunRecords) -> None:
    """Rows with a response and a reward from the samples files in `dirs` (training.eval's SAMPLE_FIELDS);
    a row's model is its `model` field or the file's name (`step_000100.samples.jsonl` -> step_000100).
    Episodes go to `rec.transcripts` instead: an evaluate record's `transcript` (mode `episode`), or a
    row that is a transcript itself (the earlier episode-only trainer's samples); an episode's final
    reply is not a single reply, so it never goes to `rec.samples`."""
    for d in dirs:
        for path in sorted({p for pattern in SAMPLE_GLOBS for p in d.glob(pattern)}):
            model = path.name.removesuffix(".jsonl").removesuffix(".samples")
            for row in read_jsonl(path, limit=MAX_SAMPLE_ROWS):
                name = row.get("model") or model
                transcript = row.get("transcript") or (row if "tool_runs" in row and "messages" in row else None)
                if isinstance(transcript, dict):  # a list is messages alone, without the runs tool_loops reads
                    rec.transcripts.append({"model": name, "transcript": transcript})
                if row.get("mode") == "episode" or transcript is not None:
                    continue
                if row.get("response") is None or row.get("reward") is None:
                    continue
                rec.samples.append({**row, "model": name})


def _read_only_tools(split_dir: Path) -> frozenset[str]:
    """The tools whose SQL is a SELECT in every environment of the split's episodes (episodes.parquet,
    `verifier_params`: the environment as JSON); empty when the split holds none."""
    import polars as pl

    path = split_dir / "episodes.parquet"
    if not path.is_file():
        return frozenset()
    reads: dict[str, bool] = {}
    for params in pl.read_parquet(path, columns=["verifier_params"])["verifier_params"].unique():
        try:
            tools = json.loads(params)["tools"]
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"doctor: {path} holds a verifier_params that is not an environment ({exc})") from None
        for tool in tools:
            sql = str(tool.get("sql") or "")
            reads[tool["name"]] = reads.get(tool["name"], True) and sql.lstrip().upper().startswith("SELECT")
    return frozenset(name for name, read in reads.items() if read)


def _sampler(grpo_dir: Path) -> str | None:
    """The curriculum.sampler GRPO drew with: its summary.json, or for a run stopped before it, the
    newest complete checkpoint's meta.json; None where neither records it (a run stopped before its first
    checkpoint, or one from before either recorded it)."""
    summary = grpo_dir / "summary.json"
    if summary.is_file():
        return _read_json(summary).get("sampler")
    newest = latest_checkpoint(grpo_dir)
    return _read_json(newest / "meta.json").get("sampler") if newest is not None else None


def _grpo_part(grpo_dir: Path | None, rec: RunRecords, with_evals: bool) -> None:
    if grpo_dir is None:
        rec.notes.append(
            "the run records no GRPO stage folder: training rules (reward, length, KL, "
            "zero-variance groups, NaN) were skipped"
        )
        return
    metrics = grpo_dir / "metrics.jsonl"
    if metrics.is_file():
        rec.metrics = read_jsonl(metrics)
    else:
        rec.notes.append(
            f"{metrics} not found: training rules (reward, length, KL, zero-variance groups, NaN) were skipped"
        )
    rec.sampler = _sampler(grpo_dir)
    evals = grpo_dir / "evals.jsonl"
    if with_evals:
        if evals.is_file():
            rec.evals = [{**e, "name": _name_of(int(e["step"]))} for e in read_jsonl(evals)]
        else:
            rec.notes.append(f"{evals} not found: eval rules (held-out pass@1, format rate) were skipped")
    _samples([grpo_dir], rec)


def _from_report(run_dir: Path) -> RunRecords:
    report = _read_json(run_dir / "report.json")
    stages = report.get("stages") or {}
    rec = RunRecords(
        max_regression=float(report.get("max_regression", DEFAULT_MAX_REGRESSION)),
        sft_rows=report.get("sft_rows"),
        tiers={str(k): int(v) for k, v in (report.get("tiers") or {}).items()},
    )
    trainer = "dpo" if report.get("algorithm") == "dpo" else "grpo"  # both write metrics.jsonl and evals.jsonl
    grpo_dir = Path(stages[trainer]["dir"]) if stages.get(trainer, {}).get("dir") else None
    eval_dir = Path(stages["evaluate"]["dir"]) if stages.get("evaluate", {}).get("dir") else None
    names = [str(row["name"]) for row in report.get("evals") or [] if "name" in row]
    if eval_dir is not None and names and all((eval_dir / f"{n}.json").is_file() for n in names):
        rec.evals = [{**_read_json(eval_dir / f"{n}.json"), "name": n, "step": _step_of(n)} for n in names]
        _grpo_part(grpo_dir, rec, with_evals=False)
        _samples([eval_dir], rec)
    else:
        rec.notes.append(
            f"the evaluate stage's results ({eval_dir or 'no folder in report.json'}: "
            f"{', '.join(f'{n}.json' for n in names) or 'no names'}) were not found; "
            "using GRPO's evals.jsonl"
        )
        _grpo_part(grpo_dir, rec, with_evals=True)
    if stages.get("split", {}).get("dir"):
        rec.read_only_tools = _read_only_tools(Path(stages["split"]["dir"]))
    for row in report.get("eval_matrix") or []:
        for set_name, score in (row.get("regression") or {}).items():
            rec.regression.setdefault(set_name, {})[row["name"]] = score
        if row.get("robustness") is not None:
            rec.robustness[row["name"]] = float(row["robustness"])
    if not report.get("eval_matrix"):
        rec.notes.append(f"{run_dir / 'report.json'} has no eval_matrix: regression and robustness rules were skipped")
    return rec


def load_records(run_dir: str | Path) -> RunRecords:
    """The records of a run folder, an output folder or a GRPO stage folder (see the module docstring)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"doctor: {root} is not a folder; pass a run folder (OUT/runs/<time>-<id>), an "
            "output folder with latest.json, or a GRPO stage folder with metrics.jsonl"
        )
    if not (root / "report.json").is_file() and (root / "latest.json").is_file():
        latest = _read_json(root / "latest.json")
        if not latest.get("run_dir") or not Path(latest["run_dir"]).is_dir():
            raise FileNotFoundError(
                f"doctor: {root / 'latest.json'} names run_dir {latest.get('run_dir')!r}, "
                "which does not exist; pass a run folder under OUT/runs/"
            )
        root = Path(latest["run_dir"])
    if (root / "report.json").is_file():
        return _from_report(root)
    if (root / "metrics.jsonl").is_file() or (root / "evals.jsonl").is_file():
        rec = RunRecords()
        _grpo_part(root, rec, with_evals=True)
        return rec
    raise FileNotFoundError(
        f"doctor: {root} has none of report.json, latest.json, metrics.jsonl, evals.jsonl; "
        "pass a run folder, an output folder or a GRPO stage folder"
    )


def run_rules(rec: RunRecords) -> list[Finding]:
    """Every rule's finding, critical first; missing records as one `info` finding at the end."""
    found = [f for f in (rule(rec) for rule in (*RULES, *EPISODE_RULES)) if f is not None]
    found.sort(key=lambda f: f.severity != "critical")
    if rec.notes:
        found.append(
            Finding(
                "records_missing",
                "info",
                "some records could not be read",
                tuple(rec.notes),
                "the rules named above were skipped: rerun the stage that writes the missing file "
                "(rlvrflow run resumes), or set eval.regression_sets / eval.robustness_set to measure "
                "those",
            )
        )
    return found


def diagnose(run_dir: str | Path) -> list[Finding]:
    """Load a run's records and apply every rule of training/doctor_rules.py."""
    return run_rules(load_records(run_dir))


def format_findings(findings: list[Finding]) -> str:
    """Terminal text: each finding's title, its evidence and the change to try."""
    problems = [f for f in findings if f.severity != "info"]
    lines = [f"run doctor: {len(problems)} finding(s)" if problems else "run doctor: no symptoms found"]
    for f in findings:
        lines.append(f"[{f.severity}] {f.title} ({f.name})")
        lines += [f"    - {e}" for e in f.evidence]
        lines.append(f"    try: {f.change}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m rlvrflow.training.doctor RUN_DIR [--json]`; exit status 0, or 2 when the records cannot be read."""
    parser = argparse.ArgumentParser(
        prog="rlvrflow doctor", description="Name what went wrong in a run, with the evidence and the change to try."
    )
    parser.add_argument("run_dir", help="a run folder (OUT/runs/<time>-<id>), an output folder or a GRPO stage folder")
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    args = parser.parse_args(argv)
    try:
        findings = diagnose(args.run_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(json.dumps([f.to_dict() for f in findings], indent=2) if args.json else format_findings(findings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
