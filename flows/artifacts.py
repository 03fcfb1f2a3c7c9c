"""Prefect artifacts for the UI: stage counts, rejects by reason, the GX summary, tiers, eval, rewards,
the eval matrix, samples side by side and the DPO pairs.

The `*_rows` / `*_markdown` builders are pure (tested without Prefect); `publish_table`,
`publish_markdown` and `Progress` talk to the Prefect API and do nothing outside a flow or task
run, so plain stage calls (the CLI, unit tests) never need a server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def artifact_key(domain: str, what: str) -> str:
    """Prefect keys allow only lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{domain}-{what}".lower()).strip("-")


def _in_run() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def publish_table(key: str, rows: list[dict[str, Any]], description: str) -> None:
    if rows and _in_run():
        from prefect.artifacts import create_table_artifact

        create_table_artifact(table=rows, key=key, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    if markdown and _in_run():
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(markdown=markdown, key=key, description=description)


class Progress:
    """A progress artifact (0-100 %) updated while a long task runs; a no-op outside a run."""

    def __init__(self, key: str, description: str):
        self._id = None
        self._last = -1.0
        if _in_run():
            from prefect.artifacts import create_progress_artifact

            self._id = create_progress_artifact(progress=0.0, key=key, description=description)

    def __call__(self, fraction: float) -> None:
        pct = round(100.0 * min(max(fraction, 0.0), 1.0), 1)
        if self._id is None or pct - self._last < 1.0 and pct < 100.0:
            return  # at most ~100 updates per run
        from prefect.artifacts import update_progress_artifact

        update_progress_artifact(artifact_id=self._id, progress=pct)
        self._last = pct


# ----- pure builders ----------------------------------------------------------------------------


def stage_rows(manifests: dict[str, dict]) -> list[dict[str, Any]]:
    """One row per stage: rows in / kept / rejected, seconds, and whether it came from the cache."""
    rows = []
    for name, m in manifests.items():
        st = m.get("stats", {})
        rows.append(
            {
                "stage": name,
                "rows_in": st.get("rows_in", ""),
                "rows_kept": st.get("rows_kept", ""),
                "rows_rejected": st.get("rows_rejected", ""),
                "seconds": m.get("seconds", 0.0),
                "cached": bool(m.get("cached")),
                "why computed": m.get("reason", ""),
                "key": m.get("key", ""),
            }
        )
    return rows


def _substages(stats: dict) -> dict[str, dict]:
    """prepare's stats may hold per-substage stats (ingest, clean, validate); else the whole."""
    nested = {k: v for k, v in stats.get("stages", {}).items() if isinstance(v, dict)}
    return nested or {"": stats}


def rejects_rows(manifests: dict[str, dict]) -> list[dict[str, Any]]:
    """Rejected rows per stage and reason slug, largest first (one 'none' row when nothing was)."""
    rows = []
    for name, m in manifests.items():
        for sub, st in _substages(m.get("stats", {})).items():
            for reason, n in st.get("rejected_by_reason", {}).items():
                rows.append({"stage": f"{name}/{sub}" if sub else name, "reason": reason, "rows": int(n)})
    if not rows:
        return [{"stage": ", ".join(manifests) or "-", "reason": "none", "rows": 0}]
    return sorted(rows, key=lambda r: (-r["rows"], r["stage"], r["reason"]))


def validation_markdown(report: dict[str, Any]) -> str:
    """The Great Expectations summary: verdict, failures with their rows, one line per expectation."""
    if not report:
        return ""
    gx = report.get("great_expectations", report)
    lines = [f"# Great Expectations: {'passed' if report.get('success') else 'FAILED'}", ""]
    if "rows_checked" in report:
        lines += [
            f"{report['rows_checked']} rows checked, {report.get('rows_rejected', 0)} rejected "
            f"(at most {report.get('max_rejected_fraction', '?')} allowed). {report.get('reason', '')}",
            "",
        ]
    for f in report.get("failures", []):
        lines.append(
            f"- **{f.get('expectation')}({f.get('column') or 'table'})**: {f.get('reason')}, "
            f"{f.get('unexpected_count')} unexpected"
        )
    lines += ["", "| expectation | column | success | unexpected |", "|---|---|---|---|"]
    for res in gx.get("results", []):
        cfg = res.get("expectation_config", {})
        unexpected = res.get("result", {}).get("unexpected_count", "")
        lines.append(
            f"| {cfg.get('type', '?')} | {cfg.get('kwargs', {}).get('column', '')} | "
            f"{res.get('success')} | {unexpected} |"
        )
    return "\n".join(lines)


def read_json(path: str | Path | None) -> dict:
    if not path or not Path(path).is_file():
        return {}
    return json.loads(Path(path).read_text())


def sparkline(values: list[float]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(bars[int((v - lo) / span * (len(bars) - 1))] for v in values)


def reward_curve_markdown(metrics: list[dict[str, Any]], key: str = "reward_mean", trainer: str = "GRPO") -> str:
    """A training curve (GRPO's reward, DPO's loss) as a sparkline plus a step table (at most ~40 rows)."""
    points = [(m.get("step"), m.get(key)) for m in metrics if m.get(key) is not None]
    if not points:
        return ""
    values = [float(v) for _, v in points]
    stride = max(1, len(points) // 40)
    lines = [
        f"# {trainer} {key}",
        "",
        f"`{sparkline(values)}`  first {values[0]:.3f}, last {values[-1]:.3f}, max {max(values):.3f}",
        "",
        f"| step | {key} |",
        "|---|---|",
    ]
    lines += [f"| {s} | {float(v):.4f} |" for s, v in points[::stride]]
    return "\n".join(lines)


def pair_rows(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """The DPO stage's prompts: how many gave pairs (and how many pairs), and the others by drop reason."""
    if not stats:
        return []
    rows = [{"prompts": "gave pairs", "rows": int(stats.get("rows_kept", 0)), "pairs": int(stats.get("pairs", 0))}]
    rows += [
        {"prompts": reason, "rows": int(n), "pairs": 0}
        for reason, n in sorted(stats.get("rejected_by_reason", {}).items())
    ]
    return rows


def matrix_rows(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """training.eval_matrix rows as a flat table: percentages, regression sets with their change
    against SFT in points, which sets a model regressed on, and which model is best."""

    def pct(x):
        return None if x is None else round(100 * float(x), 1)

    out = []
    for r in matrix.get("rows", []):
        row = {
            "model": r["name"],
            "best": r["name"] == matrix.get("best"),
            "pass@1 greedy": pct(r["pass_at_1_greedy"]),
            "pass@1 sampled": pct(r["pass_at_1_sampled"]),
            f"pass@{r.get('k')}": pct(r["pass_at_k"]),
            "format": pct(r["format_rate"]),
            "length mean": _round(r["length_mean"], 1),
            "length p90": _round(r["length_p90"], 1),
            "stability variance": round(float(r["stability_variance"]), 4),
            "sometimes right": pct(r["sometimes_right"]),
            "robustness": pct(r["robustness"]),
        }
        for name, score in r.get("regression", {}).items():
            row[name] = pct(score)
            row[f"{name} change"] = r["regression_delta"].get(name)
        row["regressed on"] = ", ".join(r.get("regressed", []))
        out.append(row)
    return out


def category_rows(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """The eval matrix's `categories` as a flat table: a row per category (episode categories marked),
    each model's greedy pass@1 in %, and each checkpoint's gain over SFT with its 95% interval."""
    out = []
    for r in matrix.get("categories") or []:
        row: dict[str, Any] = {"category": r["category"], "kind": r["kind"], "prompts": r["n"]}
        for name, score in r["pass_at_1_greedy"].items():
            row[name] = round(100 * float(score), 1)
        for name, g in r["gain_vs_sft"].items():
            row[f"{name} vs sft"] = "-" if g is None else f"{g['points']:+.1f} [{g['low']:+.1f}, {g['high']:+.1f}]"
        out.append(row)
    return out


def _round(x, digits: int):
    return None if x is None else round(float(x), digits)  # the constant baseline's row has no lengths


def samples_pages(samples: dict[str, str]) -> dict[str, str]:
    """{checkpoint: markdown}: each checkpoint's eval samples beside SFT's (training.eval.samples_markdown);
    `samples` maps model name -> samples file, SFT among them."""
    from rlvrflow.training.eval import read_samples, samples_markdown

    if "sft" not in samples:
        return {}
    before = read_samples(samples["sft"])
    return {
        name: samples_markdown(before, read_samples(path), "sft", name)
        for name, path in samples.items()
        if name != "sft"
    }


def publish_eval(domain: str, evaluate_dir: str | Path, matrix_file: str | Path, samples: dict[str, str]) -> None:
    """The evaluate stage's artifacts: the eval matrix table, the per-category table (episode categories
    included) and one samples page per checkpoint (whole episode transcripts among them)."""
    matrix = read_json(matrix_file)
    best = matrix.get("best")
    publish_table(
        artifact_key(domain, "eval-matrix"),
        matrix_rows(matrix),
        f"eval matrix (SFT and every checkpoint; best: {best}; a checkpoint that lost more than "
        f"{matrix.get('max_regression')} points on a regression set is never best); {evaluate_dir}",
    )
    publish_table(
        artifact_key(domain, "eval-categories"),
        category_rows(matrix),
        f"greedy pass@1 per category and each checkpoint's gain over SFT (paired 95% interval); episode "
        f"categories count {matrix.get('headline_scope', 'apart')}",
    )
    for name, markdown in samples_pages(samples).items():
        publish_markdown(
            artifact_key(domain, f"samples-{name}"),
            markdown,
            f"held-out samples: sft vs {name} (the same prompts at every checkpoint)",
        )


def promotion_markdown(model: dict, champion: dict | None, verdict: str, decision: dict) -> str:
    """The `<domain>-promotion` page: tonight's model, the champion it met, the verdict and why."""

    def score(m: dict | None) -> str:
        value = (m or {}).get("score")
        return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "?"

    lines = [
        f"## {model['id']}: {verdict}",
        "",
        "| | model | held-out greedy pass@1 (its own run) |",
        "|---|---|---|",
        f"| tonight | `{model['id']}` ({model.get('best')}) | {score(model)} |",
    ]
    if champion is not None:
        lines.append(f"| champion | `{champion['id']}` ({champion.get('best')}) | {score(champion)} |")
    gain = decision.get("gain")
    if gain:
        lines += [
            "",
            f"On tonight's {gain['prompts']} held-out prompts: {gain['points']:+.1f} points over the champion "
            f"({100 * gain['level']:.0f}% paired interval {gain['low']:+.1f} to {gain['high']:+.1f}).",
        ]
    for label, drop in (decision.get("regressions") or {}).items():
        lines.append(f"- {label}: {-drop:+.1f} points against the champion")
    lines += ["", "**Why:** " + "; ".join(decision.get("reasons") or [])]
    return "\n".join(lines)
