"""The `evaluate` flow: the SFT baseline and every GRPO checkpoint on the held-out split.

Each model is one task (in parallel on the flow's runner). Publishes the eval table: each
checkpoint's headline metrics (held-out episode success too) beside the SFT baseline's, with the difference.

    python -c "from rlvrflow.flows.evaluate import evaluate; evaluate('examples/retail/spec.yaml', 'runs/demo', split, sft, grpo)"
"""

from __future__ import annotations

import json

from prefect import flow

from rlvrflow.flows import artifacts
from rlvrflow.flows.common import load_run_spec
from rlvrflow.flows.tasks import run_in_flow

# episode_success: greedy success on the held-out episodes (eval_table.json has it, None without episodes)
HEADLINE = ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate", "episode_success")


def eval_rows(table: list[dict]) -> list[dict]:
    """Each model's headline metrics and its difference to the first row (the SFT baseline); a metric a
    model lacks (episode_success in a run without episodes) is left out of its row."""
    if not table:
        return []
    base = table[0]
    rows = []
    for r in table:
        row = {"model": r["name"], **{k: round(float(r[k]), 4) for k in HEADLINE if r.get(k) is not None}}
        row.update(
            {
                f"delta_{k}": round(float(r[k]) - float(base[k]), 4)
                for k in HEADLINE
                if r.get(k) is not None and base.get(k) is not None
            }
        )
        rows.append(row)
    return rows


@flow(name="evaluate", log_prints=True)
def evaluate(
    spec_path: str,
    out: str,
    split: dict,
    sft: dict,
    grpo: dict,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """Evaluate the SFT model and each GRPO checkpoint; returns the stage manifest (eval_table.json)."""
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    m = run_in_flow("evaluate", spec, out, {"split": split, "sft": sft, "grpo": grpo}, force)
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "eval"),
        eval_rows(json.loads(m.path("table").read_text())),
        "held-out eval: SFT baseline (first row) and each GRPO checkpoint",
    )
    return m.to_dict()
