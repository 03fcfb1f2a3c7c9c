"""The `prepare` flow: ingest + clean + validate one domain's raw logs (cleaning.prepare).

Publishes the stage counts, rejects by reason and the Great Expectations summary as artifacts; a
failed validation fails the run with the GX summary in the message and in the artifact.

    python -c "from flows.prepare import prepare; prepare('examples/retail/spec.yaml', 'runs/demo')"
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows import artifacts
from flows.common import cache_note, guarded, load_run_spec
from flows.data_stages import prepare_stage
from flows.spec import DomainSpec
from flows.tasks import PrefectSteps


def publish_prepare(spec: DomainSpec, manifest: dict) -> None:
    folder = Path(manifest["dir"])
    artifacts.publish_table(artifacts.artifact_key(spec.domain, "prepare-rejects"),
                            artifacts.rejects_rows({"prepare": manifest}), "rejected rows by stage and reason")
    report = artifacts.read_json(folder / "validation.json")
    artifacts.publish_markdown(artifacts.artifact_key(spec.domain, "validation"),
                               artifacts.validation_markdown(report), "Great Expectations summary")


def run_prepare_stage(spec: DomainSpec, root: Path, force: bool) -> dict:
    """prepare_stage as tasks; a failure names the stage and spec, and a failed GX suite is published."""

    def on_error(exc: BaseException) -> None:
        report = getattr(exc, "report", None)
        if isinstance(report, dict):
            artifacts.publish_markdown(artifacts.artifact_key(spec.domain, "validation"),
                                       artifacts.validation_markdown(report), "Great Expectations summary (FAILED)")

    manifest = guarded("prepare", spec, lambda: prepare_stage(spec, root, force, PrefectSteps(spec)), on_error)
    get_run_logger().info("prepare: kept %s of %s rows (%s) in %s", manifest.stats.get("rows_kept"),
                          manifest.stats.get("rows_in"), cache_note(manifest), manifest.dir)
    publish_prepare(spec, manifest.to_dict())
    return manifest.to_dict()


@flow(name="prepare", log_prints=True)
def prepare(spec_path: str, out: str, force: bool = False, smoke: bool = False,
            runner: str | None = None,
        overrides: dict | None = None) -> dict:
    """Ingest, clean and validate the spec's sources; returns the stage manifest (paths + stats)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    return run_prepare_stage(spec, Path(out), force)
