"""The `sft` flow: build (or check) the base model and run cold-start SFT on the train split.

python -c "from rlvrflow.flows.sft import sft; sft('examples/retail/spec.yaml', 'runs/demo', verified, split)"
"""

from __future__ import annotations

from prefect import flow

from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow


@flow(name="sft", log_prints=True)
def sft(
    spec_path: str,
    out: str,
    verified: dict,
    split: dict,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """Cold-start SFT from the spec's base model; returns the stage manifest (the `model` folder)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    return run_in_flow("sft", spec, out, {"attach": verified, "split": split}, force).to_dict()
