"""The `prepare` flow: ingest + clean + validate one domain's raw logs (the table's `prepare` row).

Publishes the rejects by reason and the Great Expectations summary as artifacts; a failed
validation fails the run with the GX summary in the message and in the artifact.

    python -c "from rlvrflow.flows.prepare import prepare; prepare('examples/retail/spec.yaml', 'runs/demo')"
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow


@flow(name="prepare", log_prints=True)
def prepare(
    spec_path: str,
    out: str,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """Ingest, clean and validate the spec's sources; returns the stage manifest (paths + stats)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    key = artifacts.artifact_key(spec.domain, "validation")
    try:
        m = run_in_flow("prepare", spec, out, {}, force)
    except Exception as exc:
        report = getattr(exc.__cause__, "report", None)
        if isinstance(report, dict):
            artifacts.publish_markdown(
                key, artifacts.validation_markdown(report), "Great Expectations summary (FAILED)"
            )
        raise
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "prepare-rejects"),
        artifacts.rejects_rows({"prepare": m.to_dict()}),
        "rejected rows by stage and reason",
    )
    report = artifacts.read_json(Path(m.dir) / "validation.json")
    artifacts.publish_markdown(key, artifacts.validation_markdown(report), "Great Expectations summary")
    return m.to_dict()
