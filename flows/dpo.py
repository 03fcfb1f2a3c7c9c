"""The `dpo` flow: DPO from the SFT model on pairs of the tier stage's own samples (training.algorithm: dpo).

Pairs (chosen = a correct sample, rejected = a wrong one of the same prompt) come from the tier
stage's rows and rollouts (training/dpo_data.py); the stage keeps them in `dpo_pairs.jsonl` beside
its checkpoints. The stage's progress artifact moves while training; the loss curve and the pair
counts are published when done. A crashed run resumes from its newest checkpoint on the next run.

    python -c "from rlvrflow.flows.dpo import dpo; dpo('examples/retail/spec.yaml', 'runs/demo', split, sft, tiers)"
"""

from __future__ import annotations


from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.io import read_jsonl
from rlvrflow.flows.tasks import run_in_flow


@flow(name="dpo", log_prints=True)
def dpo(
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
    """DPO training; returns the stage manifest (checkpoints, dpo_pairs.jsonl, metrics.jsonl, summary.json)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = run_in_flow("dpo", spec, out, {"split": split, "sft": sft, "tier": tiers}, force)
    metrics = read_jsonl(m.path("metrics"))
    artifacts.publish_markdown(
        artifacts.artifact_key(spec.domain, "dpo-loss"),
        artifacts.reward_curve_markdown(metrics, "loss", "DPO"),
        "DPO loss per step",
    )
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "dpo-pairs"),
        artifacts.pair_rows(m.stats.get("pairs", {})),
        "tiered prompts that gave DPO pairs, and why the others gave none",
    )
    return m.to_dict()
