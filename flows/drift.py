"""The `drift` stage: tonight's verified rows against the rows the champion was trained on
(cleaning/drift.py), before any training. Runs only when the registry has a champion.

The stage always writes drift.json (what changed since the champion's data, every check with its
verdict, tonight's profile); the retrain flow then stops the run with a data error naming the failed
checks when any failed (`drift.enabled: false` turns the stage off). The profile a run leaves for a
later night is written when its model is registered (`data_profile`, flows/models.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvrflow.flows.cache import file_digest, tree_digest
from rlvrflow.flows.errors import DataError
from rlvrflow.flows.runner import Job, Result

PROFILE_FILE = "data_profile.json"


class DriftStopped(DataError):
    """Tonight's rows moved beyond the `drift:` bounds; the message lists the failed checks."""


def data_files(spec_dir: Path, prepare_stats: dict) -> dict[str, dict]:
    """{file: {rows, rejected, sha256, source}} of the files the prepare stage read (paths as the spec names
    them; source: the spec source that read it)."""
    files = {}
    for f in prepare_stats.get("files", []):
        path = spec_dir / f["file"]
        digest = file_digest(path) if path.is_file() else tree_digest(path) if path.is_dir() else None
        files[f["file"]] = {
            "rows": f.get("rows"),
            "rejected": f.get("rejected"),
            "sha256": digest,
            "source": f.get("source"),
        }
    return files


def rejects_by_reason(prepare_stats: dict, attach_stats: dict) -> dict[str, int]:
    """Rows rejected on the way to training, by reason, over prepare's steps and attach."""
    out: dict[str, int] = {}
    for stats in (*prepare_stats.get("stages", {}).values(), attach_stats):
        for reason, n in (stats.get("rejected_by_reason") or {}).items():
            out[reason] = out.get(reason, 0) + n
    return out


def data_profile(prepare_dir: Path, attach_dir: Path, spec_dir: Path) -> dict[str, Any]:
    """A finished run's data profile: its verified rows, the files they came from, the rejects."""
    import polars as pl

    from rlvrflow.cleaning.drift import profile

    stats = json.loads((prepare_dir / "stats.json").read_text())
    attach_stats = attach_dir / "attach_stats.json"
    rejects = rejects_by_reason(stats, json.loads(attach_stats.read_text()) if attach_stats.is_file() else {})
    return profile(pl.read_parquet(attach_dir / "attach.parquet"), data_files(spec_dir, stats), rejects)


def drift(job: Job) -> Result:
    """check_drift of the attach stage's rows against the champion's profile (drift.json)."""
    import polars as pl

    from rlvrflow.cleaning.drift import check_drift

    spec, out = job.spec, Path(job.out)
    reference = json.loads(job.input("champion_data", "profile").read_text())
    prepare_stats = json.loads(job.input("prepare", "stats").read_text())
    attach_stats = json.loads(job.input("attach", "stats").read_text())
    report = check_drift(
        pl.read_parquet(job.input("attach", "rows")),
        data_files(spec.base_dir, prepare_stats),
        reference,
        spec.drift,
        rejects_by_reason(prepare_stats, attach_stats),
    )
    (out / "drift.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    c = report["changes"]
    return Result(
        {
            "failed": report["failed"],
            "checks": len(report["checks"]),
            "rows_then": c["rows"]["then"],
            "rows_now": c["rows"]["now"],
            "files_added": c["files_added"],
            "files_changed": c["files_changed"],
            "files_removed": c["files_removed"],
        },
        {"drift": "drift.json"},
    )


def drift_line(st: dict) -> str:
    files = ", ".join(
        f"{len(st.get(k) or [])} {k.split('_')[1]}" for k in ("files_added", "files_changed", "files_removed")
    )
    verdict = (
        f"{len(st['failed'])} of {st.get('checks')} checks failed"
        if st.get("failed")
        else f"all {st.get('checks')} checks passed"
    )
    return f"{st.get('rows_now')} rows against the champion's {st.get('rows_then')} (files: {files}); {verdict}"


def stop_if_drifted(drift_json: Path) -> None:
    """Raise DriftStopped, naming each failed check and the file to read, when any check failed."""
    report = json.loads(Path(drift_json).read_text())
    if report["failed"]:
        raise DriftStopped(
            f"tonight's rows drifted from the champion's data; no training ran. Failed checks:\n  - "
            + "\n  - ".join(report["failed"])
            + f"\nWhat changed and every check: {drift_json}. If the change is intended (a new source, a new "
            "category), widen the `drift:` bounds or set drift.enabled: false for this run; if a source broke, "
            "fix its field mapping and rerun."
        )


def drift_markdown(report: dict) -> str:
    """The `<domain>-drift` artifact: what changed and each check."""
    c = report["changes"]
    lines = [
        "## Tonight's data against the champion's",
        "",
        f"rows: {c['rows']['then']} then, {c['rows']['now']} now; files added: {c['files_added'] or 'none'}, "
        f"changed: {c['files_changed'] or 'none'}, removed: {c['files_removed'] or 'none'}",
        "",
        "| category | rows then | rows now |",
        "|---|---|---|",
    ]
    lines += [f"| {cat} | {v['then']} | {v['now']} |" for cat, v in c["rows_per_category"].items()]
    if c.get("rejects_by_reason"):
        lines += ["", "| rejected for | then | now |", "|---|---|---|"]
        lines += [f"| {r} | {v['then']} | {v['now']} |" for r, v in c["rejects_by_reason"].items()]
    lines += ["", "| check | result | share as expected |", "|---|---|---|"]
    lines += [
        f"| {x['check']} | {'pass' if x['ok'] else '**FAIL**'} | {x['share_expected']} |" for x in report["checks"]
    ]
    return "\n".join(lines)
