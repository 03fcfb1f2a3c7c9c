"""The `compare` flow: the registry's champion against tonight's best model on tonight's held-out
prompts, regression sets and robustness set (flows/promotion.py); runs only when there is a champion.

    python -c "from rlvrflow.flows.compare import compare; compare('examples/retail/spec.yaml', 'runs/demo', split, evaluate, champion)"
"""
from __future__ import annotations

from prefect import flow

from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow


@flow(name="compare", log_prints=True)
def compare(spec_path: str, out: str, split: dict, evaluate: dict, champion: dict, force: bool = False,
            smoke: bool = False, runner: str | None = None, overrides: dict | None = None) -> dict:
    """Evaluate the champion beside tonight's best; returns the stage manifest (compare.json)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = run_in_flow("compare", spec, out, {"split": split, "evaluate": evaluate, "champion": champion}, force)
    return m.to_dict()
