"""The `tier` flow: each train prompt's pass@k under the SFT model, then its curriculum tier.

Sampling and scoring fan out in chunks of whole engine calls (about `orchestration.chunk_rows`
prompts each) on the flow's task runner; the tiers do not depend on the chunking or the runner.
Publishes the tier table and the histogram (as a link).

    python -c "from rlvrflow.flows.tier import tier; tier('examples/retail/spec.yaml', 'runs/demo', split, sft)"
"""

from __future__ import annotations

import csv

from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow


@flow(name="tier", log_prints=True)
def tier(
    spec_path: str,
    out: str,
    split: dict,
    sft: dict,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """Tier the train split by the SFT model's pass@k; returns the stage manifest (tiers.parquet, tier_rollouts.parquet)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = run_in_flow("tier", spec, out, {"split": split, "sft": sft}, force)
    with m.path("table").open(newline="") as fh:
        rows = [dict(row) for row in csv.DictReader(fh)]
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "tiers"),
        rows,
        f"prompts per category and tier (pass@{spec.curriculum.k} of the SFT model)",
    )
    return m.to_dict()
