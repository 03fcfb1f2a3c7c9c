"""The `attach` flow: attach a verifier to every clean row, then split train / held-out eval.

Verification fans out over row ranges of `orchestration.chunk_rows` on the flow's task runner
(threads by default; `retrain` swaps in Dask from `orchestration.runner`). A crashed verifier
worker is retried; a row whose reference fails its own verifier is rejected with a reason.

    python -c "from rlvrflow.flows.attach import attach; attach('examples/retail/spec.yaml', 'runs/demo', clean)"
"""

from __future__ import annotations

from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow


@flow(name="attach", log_prints=True)
def attach(
    spec_path: str,
    out: str,
    clean: dict,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """Attach verifiers to the `prepare` flow's clean rows and split them; returns both manifests."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    verified = run_in_flow("attach", spec, out, {"prepare": clean}, force).to_dict()
    split = run_in_flow("split", spec, out, {"attach": verified}, force).to_dict()
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "attach-rejects"),
        artifacts.rejects_rows({"attach": verified, "split": split}),
        "rows without a usable verifier, and rows over orchestration.max_rows",
    )
    return {"attach": verified, "split": split}
