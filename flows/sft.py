"""The `sft` flow: build (or check) the base model and run cold-start SFT on the train split.

    python -c "from flows.sft import sft; sft('examples/retail/spec.yaml', 'runs/demo', verified, split)"
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows.cache import Manifest
from flows.common import cache_note, guarded, load_run_spec
from flows.model_stages import sft_stage
from flows.tasks import PrefectSteps


@flow(name="sft", log_prints=True)
def sft(spec_path: str, out: str, verified: dict, split: dict, force: bool = False, smoke: bool = False,
        runner: str | None = None,
        overrides: dict | None = None) -> dict:
    """Cold-start SFT from the spec's base model; returns the stage manifest (the `sft` folder)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = guarded("sft", spec, lambda: sft_stage(spec, Path(out), Manifest.from_dict(verified),
                                               Manifest.from_dict(split), force, PrefectSteps(spec)))
    get_run_logger().info("sft: %s steps, final loss %s (%s) in %s", m.stats.get("steps"),
                          m.stats.get("final_loss"), cache_note(m), m.dir)
    return m.to_dict()
