"""The `grpo` flow: GRPO from the SFT model on the tiered prompts, with verifier rewards.

Publishes a progress artifact while training and the reward curve when done. A crashed run resumes
from its newest checkpoint on the next run with the same inputs.

    python -c "from flows.grpo import grpo; grpo('examples/retail/spec.yaml', 'runs/demo', split, sft, tiers)"
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows import artifacts
from flows.cache import Manifest
from flows.common import cache_note, guarded, load_run_spec
from flows.model_stages import grpo_stage
from flows.tasks import PrefectSteps


def reward_curve(metrics_path: Path) -> str:
    rows = []
    if metrics_path.is_file():
        import json

        rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    return artifacts.reward_curve_markdown(rows)


@flow(name="grpo", log_prints=True)
def grpo(spec_path: str, out: str, split: dict, sft: dict, tiers: dict, force: bool = False,
         smoke: bool = False, runner: str | None = None,
        overrides: dict | None = None) -> dict:
    """GRPO training; returns the stage manifest (checkpoints, metrics.jsonl, summary.json)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    progress = artifacts.Progress(artifacts.artifact_key(spec.domain, "grpo-progress"),
                                  f"GRPO steps done of {spec.training.grpo.steps}")
    m = guarded("grpo", spec, lambda: grpo_stage(spec, Path(out), Manifest.from_dict(split), Manifest.from_dict(sft),
                                                 Manifest.from_dict(tiers), force, PrefectSteps(spec), progress))
    progress(1.0)
    get_run_logger().info("grpo: %s steps, final checkpoint %s (%s)", m.stats.get("steps"),
                          m.stats.get("final_checkpoint"), cache_note(m))
    artifacts.publish_markdown(artifacts.artifact_key(spec.domain, "reward-curve"), reward_curve(m.path("metrics")),
                               "GRPO training reward per step")
    return m.to_dict()
