"""The `attach` flow: attach a verifier to every clean row, then split train / held-out eval.

Verification fans out in chunks of `orchestration.chunk_rows` rows on the flow's task runner
(threads by default; `retrain` swaps in Dask from `orchestration.runner`). A crashed verifier
worker is retried; a row whose reference fails its own verifier is rejected with a reason.

    python -c "from flows.attach import attach; attach('examples/retail/spec.yaml', 'runs/demo', clean)"
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows import artifacts
from flows.cache import Manifest
from flows.common import cache_note, guarded, load_run_spec
from flows.data_stages import attach_stage, split_stage
from flows.spec import DomainSpec
from flows.tasks import PrefectSteps


def run_attach_stages(spec: DomainSpec, root: Path, clean: dict, force: bool) -> dict[str, dict]:
    """attach then split as tasks; returns both manifests (as dicts)."""
    steps = PrefectSteps(spec)
    logger = get_run_logger()
    verified = guarded("attach", spec, lambda: attach_stage(spec, root, Manifest.from_dict(clean), force, steps))
    logger.info("attach: kept %s of %s rows (%s)", verified.stats.get("rows_kept"), verified.stats.get("rows_in"),
                cache_note(verified))
    split = guarded("split", spec, lambda: split_stage(spec, root, verified, force, steps))
    logger.info("split: %s train, %s eval rows", split.stats.get("rows_train"), split.stats.get("rows_eval"))
    out = {"attach": verified.to_dict(), "split": split.to_dict()}
    artifacts.publish_table(artifacts.artifact_key(spec.domain, "attach-rejects"),
                            artifacts.rejects_rows({"attach": out["attach"]}), "rows without a usable verifier")
    return out


@flow(name="attach", log_prints=True)
def attach(spec_path: str, out: str, clean: dict, force: bool = False, smoke: bool = False,
           runner: str | None = None,
        overrides: dict | None = None) -> dict:
    """Attach verifiers to the `prepare` flow's clean rows and split them; returns the manifests."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    return run_attach_stages(spec, Path(out), clean, force)
