"""Prefect artifacts for the UI: stage counts, rejects by reason, the GX summary, tiers, eval, rewards.

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
        rows.append({"stage": name, "rows_in": st.get("rows_in", ""), "rows_kept": st.get("rows_kept", ""),
                     "rows_rejected": st.get("rows_rejected", ""), "seconds": m.get("seconds", 0.0),
                     "cached": bool(m.get("cached")), "why computed": m.get("reason", ""),
                     "key": m.get("key", "")})
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
        lines += [f"{report['rows_checked']} rows checked, {report.get('rows_rejected', 0)} rejected "
                  f"(at most {report.get('max_rejected_fraction', '?')} allowed). {report.get('reason', '')}", ""]
    for f in report.get("failures", []):
        lines.append(f"- **{f.get('expectation')}({f.get('column') or 'table'})**: {f.get('reason')}, "
                     f"{f.get('unexpected_count')} unexpected")
    lines += ["", "| expectation | column | success | unexpected |", "|---|---|---|---|"]
    for res in gx.get("results", []):
        cfg = res.get("expectation_config", {})
        unexpected = res.get("result", {}).get("unexpected_count", "")
        lines.append(f"| {cfg.get('type', '?')} | {cfg.get('kwargs', {}).get('column', '')} | "
                     f"{res.get('success')} | {unexpected} |")
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


def reward_curve_markdown(metrics: list[dict[str, Any]], key: str = "reward_mean") -> str:
    """The GRPO reward curve as a sparkline plus a step table (at most ~40 rows)."""
    points = [(m.get("step"), m.get(key)) for m in metrics if m.get(key) is not None]
    if not points:
        return ""
    values = [float(v) for _, v in points]
    stride = max(1, len(points) // 40)
    lines = [f"# GRPO {key}", "", f"`{sparkline(values)}`  first {values[0]:.3f}, last {values[-1]:.3f}, "
             f"max {max(values):.3f}", "", f"| step | {key} |", "|---|---|"]
    lines += [f"| {s} | {float(v):.4f} |" for s, v in points[::stride]]
    return "\n".join(lines)
