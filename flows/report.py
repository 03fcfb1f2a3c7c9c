"""The run report: training.build_report over the eval results, the eval matrix and the best model,
the samples files, the doctor's findings, and where every stage's output is.

Written to the run's own folder (`OUT/runs/<time>-<run id>/report.json`, with `run.json`: seconds and
cache use), so concurrent runs never overwrite each other; `OUT/latest.json` names the newest one.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from rlvrflow.flows.cache import Manifest
from rlvrflow.io import write_json


def new_run_dir(root: Path, run_id: str) -> Path:
    """A fresh folder for one run, unique by UTC time and run id."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_dir = root / "runs" / f"{stamp}-{run_id[:8]}"
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def trained_stage(manifests: dict) -> str:
    """The training stage of a run: dpo when it ran, else grpo (training.algorithm picks one)."""
    return "dpo" if "dpo" in manifests else "grpo"


def write_run_report(
    run_dir: str, domain: str, spec_path: str, manifests: dict[str, dict], notices: list[dict] | None = None
) -> dict:
    """Build report.json (training.build_report) from the stage manifests; return what the CLI prints.

    The final checkpoint is the training stage's last; the best model is the eval matrix's choice
    (training.eval_matrix.choose_best: never a checkpoint that regressed on a regression set, SFT
    when nothing beats it). `eval_matrix` and `max_regression` are what training/doctor.py reads.
    `notices`: what flows/preflight.py said of the data before the run ({kind, message}), first among
    the warnings."""
    from rlvrflow.training.eval_categories import format_categories
    from rlvrflow.training.eval_matrix import format_matrix
    from rlvrflow.training.report import build_report, comparison_table, gain_line, write_report

    m = {name: Manifest.from_dict(d) for name, d in manifests.items()}
    ev, trained = m["evaluate"], trained_stage(m)
    table = json.loads(ev.path("table").read_text())
    matrix = json.loads(ev.path("matrix").read_text())
    results = {row["name"]: json.loads(ev.path(row["name"]).read_text()) for row in table}
    samples = {
        row["name"]: str(ev.path(f"{row['name']}.samples")) for row in table if f"{row['name']}.samples" in ev.outputs
    }
    names = [row["name"] for row in table]
    st = m[trained].stats
    final_ckpt = st.get("final_checkpoint") or str(m["sft"].path("model"))
    final_name = Path(final_ckpt).name if Path(final_ckpt).name in results else "sft"
    stages = {
        name: {
            "key": x.key,
            "cached": x.cached,
            "seconds": x.seconds,
            "cpu_seconds": x.cpu_seconds,
            "dir": str(x.dir),
            "reason": x.reason,
        }
        for name, x in m.items()
    }
    report = build_report(
        baseline=results["sft"],
        final=results[final_name],
        tiers=m["tier"].stats.get("tiers", {}),
        zero_variance_fraction=float(st.get("zero_variance_fraction") or 0.0),
        checkpoint=final_ckpt,
        extra={
            "domain": domain,
            "spec": spec_path,
            "run_dir": run_dir,
            "evals": table,
            "algorithm": trained,
            "best_model": matrix["best"],
            "best_checkpoint": matrix["best_model"],
            "best_decision": matrix.get("decision"),
            "constant_baseline": next((r for r in matrix["rows"] if r.get("is_constant")), None),
            "gain_vs_constant": next(
                (r.get("gain_vs_constant") for r in matrix["rows"] if r["name"] == final_name), None
            ),
            "trainer_best_checkpoint": st.get("best_checkpoint"),
            "training_steps": st.get("steps"),
            **({"grpo_steps": st.get("steps")} if trained == "grpo" else {"dpo_pairs": st.get("pairs")}),
            "eval_matrix": matrix["rows"],
            **episode_report(matrix, results, final_name),
            "max_regression": matrix["max_regression"],
            "samples": samples,
            "curves": str(m[trained].dir / "curves.png"),
            "stages": stages,
            "tier_histogram": str(m["tier"].dir / "tier_histogram.png"),
            "counts": {name: x.stats for name, x in m.items() if name in ("prepare", "attach", "split", "tier")},
            "sft_rows": m["sft"].stats.get("rows_used") if "sft" in m else None,
            "warnings": run_warnings(m, results, final_name, notices),
            # tonight's best against the registry's champion, measured (flows/promotion.py); the
            # decision is added as `promotion` when the model is registered
            "champion_comparison": json.loads(m["compare"].path("compare").read_text()) if "compare" in m else None,
        },
    )
    path = write_report(Path(run_dir) / "report.json", report)
    warned = report["warnings"]
    # the gain over SFT is the console's last line; the gain over the constant baseline stands above it
    gain = (
        constant_gain_line(matrix, final_name)
        + f"{trained.upper()} over SFT, held-out {gain_line(report['gain']['greedy'])}"
        if final_name != "sft"
        else f"no {trained.upper()} checkpoint was evaluated: nothing to compare with SFT"
    )
    if final_name != "sft" and (report["episodes"] or {}).get("gain"):
        gain = episodes_gain_line(report["episodes"]["gain"], trained) + gain
    if any(w["kind"] == "answer_collapse" for w in warned):
        gain += (
            "; its hits include a constant answer, not skill: the final checkpoint gives one answer, mostly "
            "wrong, to most prompts of some categories (warnings above)"
        )
    # the category table's gain column is the final model's, as per_category and the gain line above
    tables = (format_matrix(matrix["rows"]), format_categories(matrix.get("categories") or [], names, final_name))
    return {
        "report": str(path),
        "checkpoint": final_ckpt,
        "comparison": comparison_table(results["sft"], results[final_name]),
        "stages": stages,
        "run_dir": run_dir,
        "algorithm": trained,
        "matrix": "\n".join(x for x in tables if x),
        "best": best_line(matrix),
        "doctor": doctor_text(run_dir),
        "warnings": warnings_text(warned),
        "gain": gain,
    }


def episode_report(matrix: dict, results: dict[str, dict], final_name: str) -> dict:
    """report.json's `headline_scope` (how episodes count: training.eval_categories.EPISODES_COUNTED),
    `per_category` (every category's SFT and final greedy pass@1 with the paired gain, episode
    categories included) and `episodes` (SFT's and the final model's episode figures and their gain;
    {"skipped": why} when training.episodes is false; None when the split held no episode rows)."""
    from rlvrflow.training.eval_categories import EPISODES_COUNTED, episodes_summary, per_category_report

    return {
        "headline_scope": matrix.get("headline_scope", EPISODES_COUNTED),
        "per_category": per_category_report(matrix.get("categories") or [], final_name),
        "episodes": episodes_summary(results, final_name)
        or ({"skipped": matrix["episodes_skipped"]} if matrix.get("episodes_skipped") else None),
    }


def episodes_gain_line(gain: dict, trained: str) -> str:
    """`... held-out episodes (counted apart) ...\n`: the final model's gain in episode success over SFT,
    a line above the headline gain, which is over single replies."""
    from rlvrflow.training.report import gain_line

    return f"{trained.upper()} over SFT, held-out episodes (counted apart from the line below): {gain_line(gain)}\n"


def warnings_text(warned: list[dict]) -> str:
    """report.json's warnings for the terminal, one per line; empty when there are none."""
    if not warned:
        return ""
    return "\n".join(
        [f"warnings ({len(warned)}, also in report.json):"]
        + [f"  [{w['stage']}: {w['kind']}] {w['message']}" for w in warned]
    )


def best_line(matrix: dict) -> str:
    """Which model the eval matrix chose, and why SFT when it is SFT."""
    rows, best = matrix["rows"], matrix["best"]
    if best != "sft":
        return f"best:       {best} ({matrix['best_model']})"
    flagged = [r["name"] for r in rows if r["regressed"]]
    why = "no checkpoint beat the SFT baseline on greedy pass@1"
    if flagged:
        why += (
            f" among those within max_regression={matrix['max_regression']} points on every regression set "
            f"({', '.join(flagged)} lost more)"
        )
    decision = matrix.get("decision") or {}
    if decision.get("beats_constant") is not None:
        explained = [n for n in decision["beats_sft"] if n not in decision["beats_constant"]]
        if explained:
            why += (
                f" and the constant baseline ({', '.join(explained)} did not beat one answer per category: "
                "a constant answer explains its gain)"
            )
    return f"best:       sft: {why}; keep the SFT model ({matrix['best_model']})"


def constant_gain_line(matrix: dict, name: str) -> str:
    """`... over the constant baseline ...\n`: the model's gain over one answer per category
    (training.baseline), a line above the gain over SFT; "" when the matrix has no constant row."""
    from rlvrflow.training.report import gain_line

    row = next((r for r in matrix["rows"] if r["name"] == name), {})
    gain = row.get("gain_vs_constant")
    if not gain:
        return ""
    if gain.get("low") is None:
        return (
            f"{name} over the constant baseline: {gain['points']:+.1f} points (no per-prompt scores for an interval)\n"
        )
    return f"{name} over the constant baseline, held-out {gain_line(gain)}\n"


def doctor_text(run_dir: str) -> str:
    """The run doctor's findings (training.doctor) on the report just written; a run whose records
    the doctor cannot read still finishes, with the reason in place of the findings."""
    from rlvrflow.training.doctor import diagnose, format_findings

    try:
        return format_findings(diagnose(run_dir))
    except (FileNotFoundError, ValueError) as exc:
        return f"run doctor: could not read the run's records: {exc}"


# a figure larger than this is linked, not inlined: the artifact lives in the Prefect database
MAX_INLINE_BYTES = 2_000_000


def figures_markdown(report_path: str | Path) -> str:
    """The run's figures for a markdown artifact: the training curves and the tier histogram inlined as
    base64 `data:` images, which the Prefect UI shows wherever the browser runs (a `file://` link to the
    worker's disk is refused by the browser), with the files' paths and where report.json is."""
    import base64

    report = json.loads(Path(report_path).read_text())
    lines = [f"# {report.get('domain')}: run figures", "", f"report: `{report_path}`", ""]
    trainer = str(report.get("algorithm") or "grpo").upper()
    for title, key in ((f"{trainer} training and eval curves", "curves"), ("Prompts per tier", "tier_histogram")):
        path = report.get(key)
        lines += [f"## {title}", ""]
        if not path or not Path(path).is_file():
            lines += ["not drawn in this run (no matplotlib, or no data)", ""]
            continue
        data = Path(path).read_bytes()
        if len(data) > MAX_INLINE_BYTES:
            lines += [f"`{Path(path).resolve()}` ({len(data):,} bytes: too large to inline)", ""]
            continue
        lines += [
            f"![{title}](data:image/png;base64,{base64.b64encode(data).decode()})",
            "",
            f"file: `{Path(path).resolve()}`",
            "",
        ]
    return "\n".join(lines)


# GRPO steps that updated nothing, as a share of the steps, from which report.json warns: a few are a
# normal step whose prompts all went one way; a tenth of the run is compute spent on nothing
IDLE_STEPS_SHARE = 0.1


def run_warnings(
    m: dict[str, Manifest],
    results: dict[str, dict] | None = None,
    final_name: str | None = None,
    notices: list[dict] | None = None,
) -> list[dict]:
    """Every warning the run logged, as {stage, kind, message}, so report.json says what a person should
    look at, not only the terminal: the preflight `notices` (stage `preflight`), each stage's own
    `warnings` in its stats (SFT skipped for want of worked rows, prompts or solutions cut by max_length;
    the trainer's plain strings, GRPO's reward-hacking check, get the kind `<stage>_warning`), GRPO steps
    that updated nothing, and a final checkpoint whose held-out answers collapsed to one string (the
    doctor's answer_collapse, on the evaluate stage's results)."""
    from rlvrflow.training.answer_collapse import collapse_line, collapsed_answers

    out = [{"stage": "preflight", "kind": str(n["kind"]), "message": str(n["message"])} for n in notices or []]
    for name, x in m.items():
        for w in x.stats.get("warnings") or []:
            w = w if isinstance(w, dict) else {"kind": f"{name}_warning", "message": str(w)}
            out.append({"stage": name, "kind": str(w.get("kind") or f"{name}_warning"), "message": str(w["message"])})
    st = m["grpo"].stats if "grpo" in m else {}
    idle, steps = int(st.get("steps_without_update") or 0), int(st.get("steps") or 0)
    if steps and idle >= IDLE_STEPS_SHARE * steps:
        out.append(
            {
                "stage": "grpo",
                "kind": "steps_without_update",
                "message": (
                    f"GRPO: {idle} of {steps} steps updated nothing (every group's rewards were equal: all right or all "
                    "wrong); `rlvrflow doctor` says which, and what to change"
                ),
            }
        )
    collapse = collapsed_answers((results or {}).get(final_name, {}).get("by_prompt")) if final_name != "sft" else None
    if collapse is not None:
        out.append(
            {
                "stage": "evaluate",
                "kind": "answer_collapse",
                "message": (
                    f"{collapse_line(final_name, collapse)}: there the model gives one answer whatever it is asked, so its "
                    "hits are the golds that equal it, not skill (`rlvrflow doctor`)"
                ),
            }
        )
    return out


def point_latest(root: Path, summary: dict) -> None:
    """Write the run's record (paths, seconds in the flow, cache use) to RUN_DIR/run.json and to
    OUT/latest.json, which names the newest finished run (atomic; the last finisher wins)."""
    stages = summary.get("stages", {})
    record = {
        "run_dir": summary["run_dir"],
        "report": summary["report"],
        "checkpoint": summary["checkpoint"],
        "seconds": summary.get("seconds"),
        "stages": len(stages),
        "stages_cached": sum(1 for st in stages.values() if st.get("cached")),
    }
    write_json(Path(summary["run_dir"]) / "run.json", record, indent=1, sort_keys=True)
    write_json(root / "latest.json", record, indent=1, sort_keys=True)
