"""Outcome-only rows are RL's, not SFT's: attach leaves them without a made-up target, SFT skips
them, and tiering (hence GRPO) draws from them only, saying so on the console."""

from __future__ import annotations

import json

import polars as pl
import pytest

import rlvrflow.curriculum.tiering as tiering
from rlvrflow.flows import stages
from rlvrflow.flows.runner import LocalSteps, counts_line
from rlvrflow.flows.spec import load_spec
from rlvrflow.training.config import TinyModelConfig
from rlvrflow.training.tiny_model import build_tiny_model


def _outcome_only_every_other_row(raw) -> set[str]:
    """Drop the worked reply of two rows in three; returns their ids."""
    rows = [json.loads(line) for line in raw.read_text().splitlines()]
    dropped = set()
    for i, r in enumerate(rows):
        if i % 3:
            r["s"], _ = "", dropped.add(r["qid"])
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dropped


@pytest.mark.slow
def test_tiering_draws_only_from_rows_sft_did_not_train_on(tmp_path, toy_spec, monkeypatch):
    outcome_only = _outcome_only_every_other_row(toy_spec.parent / "raw" / "part-0.jsonl")
    monkeypatch.setattr(tiering, "default_score_fn", lambda workers, timeout_s=None: lambda items: [0.0 for _ in items])
    spec, root, steps = load_spec(toy_spec), tmp_path / "out", LocalSteps()
    m = {"prepare": stages.run("prepare", spec, root, {}, steps)}
    m["attach"] = stages.run("attach", spec, root, m, steps)
    assert m["attach"].stats["outcome_only_rows"] == len(outcome_only)
    assert m["attach"].stats["answer_only_targets"] == 0
    assert "26 outcome-only rows" in counts_line("attach", m["attach"], stages.STAGES["attach"].summary)
    m["split"] = stages.run("split", spec, root, m, steps)
    corpus = (toy_spec.parent / "raw" / "part-0.jsonl").read_text().splitlines() + ["Answer: 0123456789"]
    model = build_tiny_model(
        corpus,
        tmp_path / "model",
        seed=0,
        dims=TinyModelConfig(hidden_size=32, num_layers=1, num_heads=1, intermediate_size=32),
    )
    m["sft"] = stages.given_model(model)
    tier = stages.run("tier", spec, root, m, steps)

    train = pl.read_parquet(m["split"].path("train"))
    unseen = set(train.filter(pl.col("solution") == "")["id"])
    assert unseen and unseen < set(train["id"]) and unseen <= outcome_only
    assert set(pl.read_parquet(tier.path("rows"))["id"]) == unseen
    pool = tier.stats["rl_pool"]
    assert (pool["rl_rows"], pool["pool_rows"], pool["sft_rows_in_pool"]) == ("unseen", len(unseen), 0)
    assert "none SFT trained on" in counts_line("tier", tier, stages.STAGES["tier"].summary)

    # asked for every row, the run says how many SFT trained on too; the key changes with the choice
    every = spec.model_copy(update={"curriculum": spec.curriculum.model_copy(update={"rl_rows": "all"})})
    tier_all = stages.run("tier", every, root, m, steps)
    assert tier_all.key != tier.key and tier_all.stats["rl_pool"]["pool_rows"] == train.height
    assert f"{train.height - len(unseen)} of them SFT trained on" in counts_line(
        "tier", tier_all, stages.STAGES["tier"].summary
    )

    # with answer-only targets on, attach builds `Answer: gold` for them and says how many
    built = spec.model_copy(update={"verifiers": spec.verifiers.model_copy(update={"answer_only_targets": True})})
    attach_built = stages.run("attach", built, root, {"prepare": m["prepare"]}, steps)
    assert attach_built.key != m["attach"].key
    assert (attach_built.stats["answer_only_targets"], attach_built.stats["outcome_only_rows"]) == (
        len(outcome_only),
        0,
    )
    assert f"{len(outcome_only)} answer-only SFT targets built" in counts_line(
        "attach", attach_built, stages.STAGES["attach"].summary
    )
