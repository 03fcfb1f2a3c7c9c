"""The `tier` flow: each train prompt's pass@k under the SFT model, then its curriculum tier.

Sampling and scoring fan out in chunks of `orchestration.chunk_rows` prompts on the flow's task
runner (`retrain` swaps in Dask from `orchestration.runner`). Publishes the tier table.

    python -c "from flows.tier import tier; tier('examples/retail/spec.yaml', 'runs/demo', split, sft)"
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows import artifacts
from flows.cache import Manifest
from flows.common import cache_note, guarded, load_run_spec
from flows.model_stages import tier_stage
from flows.tasks import PrefectSteps


def tier_rows_for_artifact(table_csv: Path) -> list[dict]:
    import csv

    with table_csv.open(newline="") as fh:
        return [dict(row) for row in csv.DictReader(fh)]


@flow(name="tier", log_prints=True)
def tier(spec_path: str, out: str, split: dict, sft: dict, force: bool = False, smoke: bool = False,
         runner: str | None = None,
        overrides: dict | None = None) -> dict:
    """Tier the train split by the SFT model's pass@k; returns the stage manifest (tiers.parquet)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = guarded("tier", spec, lambda: tier_stage(spec, Path(out), Manifest.from_dict(split),
                                                 Manifest.from_dict(sft), force, PrefectSteps(spec)))
    get_run_logger().info("tier: %s (%s)", m.stats.get("tiers"), cache_note(m))
    artifacts.publish_table(artifacts.artifact_key(spec.domain, "tiers"), tier_rows_for_artifact(m.path("table")),
                            f"prompts per category and tier (pass@{spec.curriculum.k} of the SFT model)")
    return m.to_dict()
