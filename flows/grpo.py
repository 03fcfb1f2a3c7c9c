"""The `grpo` flow: GRPO from the SFT model on the tiered prompts, with verifier rewards.

The stage's progress artifact (`<domain>-grpo-progress`) moves while training; the reward curve is
published when done. A crashed run resumes from its newest checkpoint on the next run.

    python -c "from rlvrflow.flows.grpo import grpo; grpo('examples/retail/spec.yaml', 'runs/demo', split, sft, tiers)"
"""

from __future__ import annotations


from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.io import read_jsonl
from rlvrflow.flows.tasks import run_in_flow


@flow(name="grpo", log_prints=True)
def grpo(
    spec_path: str,
    out: str,
    split: dict,
    sft: dict,
    tiers: dict,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """GRPO training; returns the stage manifest (checkpoints, metrics.jsonl, summary.json)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = run_in_flow("grpo", spec, out, {"split": split, "sft": sft, "tier": tiers}, force)
    metrics = read_jsonl(m.path("metrics"))
    artifacts.publish_markdown(
        artifacts.artifact_key(spec.domain, "reward-curve"),
        artifacts.reward_curve_markdown(metrics),
        "GRPO training reward per step",
    )
    return m.to_dict()
