"""The chain's own stages on an environment category: SFT learns the worked transcripts beside the
single replies, tiering plays episodes for pass@k, GRPO draws, plays and trains on them, DPO leaves
them out. The environment, its database and its scripted agent are tests/verifiers' own."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from rlvrflow.flows.runner import Job
from rlvrflow.flows.spec import spec_data, spec_from_dict
from rlvrflow.training.doctor_rules import zero_variance_share
from rlvrflow.verifiers.attaching import attach
from rlvrflow.verifiers.config import EPISODE, VerifierConfig

from ..verifiers.test_environment_spec import _minimal_spec, _rows, _rules, db  # noqa: F401

TRAINING = {
    "model": "embedded",
    "torch_threads": 1,
    "tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "max_positions": 1024},
    "sft": {"max_steps": 3, "batch_size": 4, "max_length": 1024, "warmup_steps": 1},
    "grpo": {
        "max_steps": 2,
        "prompts_per_step": 4,
        "num_generations": 2,
        "warmup_steps": 1,
        "beta": 0.0,
        "log_samples_every": 1,
    },
    "checkpoint": {"every": 2},
}


def _spec(db: Path, **training):  # noqa: F811
    data = {
        **_minimal_spec(_rules(db)),
        "training": {**TRAINING, **training},
        "curriculum": {"n_samples": 2, "k": 1, "eval_fraction": 0.25},
        "generation": {"max_new_tokens": 6, "episode_max_new_tokens": 12},
        "eval": {"n_samples": 1, "k": 1, "max_prompts": 4},
    }
    return spec_from_dict(data, base_dir=db.parent)


def _job(spec, stage: str, tmp: Path, inputs: dict, item=None) -> Job:
    out = tmp / stage
    out.mkdir(exist_ok=True)
    return Job(stage, json.dumps(spec_data(spec)), str(spec.base_dir), str(tmp), str(out), inputs, item)


@pytest.fixture
def split_rows(db, tmp_path):  # noqa: F811
    """attach + split of 12 refund tickets (6 with a worked transcript) and 40 arithmetic rows."""
    from rlvrflow.flows.stage_calls import split

    spec = _spec(db)
    math = [
        {"id": f"n{k}", "category": "arithmetic", "prompt": f"{k}+1?", "reference": str(k + 1), "solution": f"{k + 1}"}
        for k in range(40)
    ]
    env = spec.verifiers.rule_for("refunds").resolved_environment(spec.base_dir)
    rows = pl.concat([_rows(env, worked=6), pl.DataFrame(math)])
    kept, _, _ = attach(rows, VerifierConfig.model_validate(_rules(db)), db.parent, workers=1)
    kept.write_parquet(tmp_path / "attach.parquet")
    result = split(_job(spec, "split", tmp_path, {"attach": {"rows": str(tmp_path / "attach.parquet")}}))
    files = {k: str(tmp_path / "split" / v) for k, v in result.files.items()}
    return {"attach": {"rows": str(tmp_path / "attach.parquet")}, "split": files}


def _sft(spec, tmp: Path, inputs: dict) -> dict:
    from rlvrflow.flows.stage_calls import sft

    result = sft(_job(spec, "sft", tmp, inputs))
    return {**inputs, "sft": {"model": str(tmp / "sft" / result.files["model"])}}, result.stats


def test_sft_learns_the_worked_transcripts_of_the_train_episodes(db, split_rows, tmp_path):  # noqa: F811
    episodes = pl.read_parquet(split_rows["split"]["episodes"])
    worked = episodes.filter((pl.col("split") == "train") & (pl.col("solution") != ""))
    assert worked.height > 0 and set(episodes["verifier"]) == {EPISODE}
    _, stats = _sft(_spec(db), tmp_path, split_rows)
    # the agent's tool calls hold newlines: written on one line for PLAIN, they still replay to the reference
    assert stats["transcripts_used"] == worked.height and stats["transcripts_dropped"] == {}
    assert stats["rows_used"] == 40 - pl.read_parquet(split_rows["split"]["eval"]).height

    off = tmp_path / "off"
    off.mkdir()
    _, stats = _sft(_spec(db, episodes=False), off, split_rows)
    assert stats["transcripts_used"] == 0


def test_a_transcript_longer_than_max_length_is_left_out_with_a_warning(db, split_rows, tmp_path):  # noqa: F811
    spec = _spec(db, sft={**TRAINING["sft"], "max_length": 100})
    _, stats = _sft(spec, tmp_path, split_rows)
    assert stats["transcripts_used"] == 0 and stats["transcripts_dropped"]["over_max_length"] > 0
    assert "transcripts_too_long" in [w["kind"] for w in stats["warnings"]]


def _tier(spec, tmp: Path, inputs: dict):
    """tier_plan, then tier on each chunk, as the runner fans it out: (tiers, rollouts, chunks)."""
    from rlvrflow.flows.stage_calls import tier, tier_plan

    job = _job(spec, "tier", tmp, inputs)
    plan = tier_plan(job)
    results = [tier(_job(spec, "tier", tmp, inputs, item)) for item in plan]
    tiers = pl.concat([r.kept for r in results], how="diagonal_relaxed")
    rollouts = pl.concat([r.tables["rollouts"][1] for r in results])
    return tiers, rollouts, plan


def test_tiering_plays_the_train_episodes_and_dpo_leaves_them_out(db, split_rows, tmp_path):  # noqa: F811
    from rlvrflow.training.config import DPOConfig
    from rlvrflow.training.dpo_data import build_pairs

    spec = _spec(db)
    inputs, _ = _sft(spec, tmp_path, split_rows)
    tiers, rollouts, plan = _tier(spec, tmp_path, inputs)
    episodes = pl.read_parquet(split_rows["split"]["episodes"]).filter(pl.col("split") == "train")
    outcome_only = episodes.filter(pl.col("solution") == "")  # rl_rows auto: the rows SFT never saw
    tiered = tiers.filter(pl.col("verifier") == EPISODE)
    assert sorted(tiered["id"]) == sorted(outcome_only["id"]) and set(tiered["category"]) == {"refunds"}
    assert tiered["n_samples"].to_list() == [2] * tiered.height and tiered["tier"].null_count() == 0
    # a chunk holds one kind of row: episodes are played in calls of their own
    kinds = [{i in set(tiered["id"]) for i in item["ids"]} for item in plan]
    assert kinds == [{False}, {True}] and tiers.height > tiered.height
    played = rollouts.filter(pl.col("id").is_in(tiered["id"].to_list()))
    assert played.height == 2 * tiered.height
    assert set(played["finish_reason"]) <= {"final_reply", "max_turns"}
    assert json.loads(played["response"][0])[0]["role"] == "assistant"
    # each message is capped by generation.episode_max_new_tokens (12 characters here), not by the
    # single replies' max_new_tokens (6)
    said = [m["content"] for r in played["response"] for m in json.loads(r) if m["role"] == "assistant"]
    assert max(len(t) for t in said) == 12

    pairs, stats = build_pairs(tiers, rollouts, DPOConfig(tiers=("learnable", "too_hard", "too_easy")), 0)
    assert stats["rejected_by_reason"]["episode_row"] == tiered.height
    assert not {p["id"] for p in pairs} & set(tiered["id"])


def test_under_dpo_tiering_leaves_the_episode_rows_out_and_counts_them(db, split_rows, tmp_path):  # noqa: F811
    """DPO pairs single replies, so its tiering plays no episode (each costs turns of generation); the
    rows left out are counted where the tier stage reports its pool, and the stage key tells the two apart."""
    from rlvrflow.curriculum.rl_rows import describe
    from rlvrflow.flows.stage_calls import tier_pool
    from rlvrflow.flows.stages import STAGES

    spec = _spec(db, algorithm="dpo")
    inputs, _ = _sft(spec, tmp_path, split_rows)
    tiers, rollouts, plan = _tier(spec, tmp_path, inputs)
    train_episodes = pl.read_parquet(split_rows["split"]["episodes"]).filter(pl.col("split") == "train")
    assert train_episodes.height > 0 and tiers.height > 0
    assert tiers.filter(pl.col("verifier") == EPISODE).height == 0 and len(plan) == 1
    assert not set(rollouts["id"]) & set(train_episodes["id"])
    info = tier_pool(_job(spec, "tier", tmp_path, inputs))[1]
    assert info["episode_rows_left_out"] == train_episodes.height
    assert f"{train_episodes.height} episode rows left out" in describe(info)
    key = STAGES["tier"].extra_key  # a part of the tier stage's cache key: a GRPO run never reuses these tiers
    assert key(spec, {})["episodes_tiered"] is False and key(_spec(db), {})["episodes_tiered"] is True


def _grpo(spec, tmp: Path, inputs: dict, tiers: pl.DataFrame):
    from rlvrflow.flows.stage_calls import grpo

    tiers.write_parquet(tmp / "tiers.parquet")
    job = _job(spec, "grpo", tmp, {**inputs, "tier": {"rows": str(tmp / "tiers.parquet")}})
    grpo(job)
    return [json.loads(line) for line in (tmp / "grpo" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("lora", [None, {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}])
def test_grpo_draws_plays_and_trains_on_the_tiered_episodes(db, split_rows, tmp_path, lora):  # noqa: F811
    import torch
    from transformers import AutoModelForCausalLM

    # the untrained tiny model's episodes all score alike: keep their groups so the step trains on them
    grpo = {**TRAINING["grpo"], "filter_zero_variance": False}
    spec = _spec(db, grpo=grpo, lora=lora)
    inputs, _ = _sft(spec, tmp_path, split_rows)
    tiers, _, _ = _tier(spec, tmp_path, inputs)
    metrics = _grpo(spec, tmp_path, inputs, tiers)
    assert len(metrics) == 2
    assert sum(m.get("episode_groups_seen", 0) for m in metrics) > 0
    played = [m for m in metrics if m.get("episode_groups_used")]
    assert played and all(m["episode_policy_tokens"] > 0 and m["episode_turns_mean"] >= 1 for m in played)
    for key in ("episode_malformed_rate", "episode_tool_calls_mean", "episode_success_rate", "episode_reward_mean"):
        assert key in played[0], key
    samples = [json.loads(line) for line in (tmp_path / "grpo" / "rollout_samples.jsonl").read_text().splitlines()]
    transcripts = [r for r in samples if "transcript" in r]  # the episode groups' best and worst, whole
    whole = transcripts[0]["transcript"]  # as evaluate's samples: the doctor reads its tool runs
    assert transcripts and {"messages", "tool_runs", "stop", "verdict"} <= set(whole)
    assert [m["role"] for m in whole["messages"]][-1] == "assistant" and transcripts[0]["mode"] == "episode"
    assert transcripts[0]["task_id"] in set(tiers.filter(pl.col("verifier") == EPISODE)["id"])
    # the loop's held-out evals play the held-out episodes beside the single replies' headline
    held = pl.read_parquet(split_rows["split"]["episodes"]).filter(pl.col("split") == "eval").height
    evals = [json.loads(line) for line in (tmp_path / "grpo" / "evals.jsonl").read_text().splitlines()]
    assert held and all(e["episodes"]["n_prompts"] == min(held, 4) and "headline_scope" not in e for e in evals)
    if lora is None:
        sft = AutoModelForCausalLM.from_pretrained(inputs["sft"]["model"])
        final = AutoModelForCausalLM.from_pretrained(tmp_path / "grpo" / "step_000002")
        assert any(not torch.equal(a, b) for a, b in zip(sft.state_dict().values(), final.state_dict().values()))
    else:  # the checkpoint holds the adapter, trained
        assert (tmp_path / "grpo" / "step_000002" / "adapter_config.json").is_file()


def test_episodes_where_the_loop_cannot_play_them_are_an_error_before_sft(db, split_rows, tmp_path):  # noqa: F811
    """Found by the sft stage too (a launcher's ranks are only known there; the spec's own settings are
    refused when it is read, test below), not after SFT and tiering have run; DPO is left alone."""
    spec = _spec(db)  # model_copy skips the spec's validation, as a launcher's environment would
    grpo = spec.training.grpo.model_copy(update={"rollout_mode": "async"})
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"grpo": grpo})})
    with pytest.raises(ValueError, match="rollout_mode 'async' does not play episodes yet.*training.episodes: false"):
        _sft(spec, tmp_path, split_rows)
    assert not (tmp_path / "sft" / "sft").exists()
    _sft(_spec(db, grpo={**TRAINING["grpo"], "rollout_mode": "async"}, algorithm="dpo"), tmp_path, split_rows)


def test_orchestration_max_rows_caps_the_episode_rows_of_each_split_too(db, tmp_path):  # noqa: F811
    from rlvrflow.flows.stage_calls import split

    spec = _spec(db)
    spec = spec.model_copy(update={"orchestration": spec.orchestration.model_copy(update={"max_rows": 3})})
    env = spec.verifiers.rule_for("refunds").resolved_environment(spec.base_dir)
    math = [{"id": f"n{k}", "category": "arithmetic", "prompt": f"{k}+1?", "reference": str(k + 1)} for k in range(20)]
    rows = pl.concat([_rows(env), pl.DataFrame(math)], how="diagonal_relaxed").with_columns(
        pl.col("solution").fill_null("")
    )
    kept, _, _ = attach(rows, VerifierConfig.model_validate(_rules(db)), db.parent, workers=1)
    kept.write_parquet(tmp_path / "attach.parquet")
    result = split(_job(spec, "split", tmp_path, {"attach": {"rows": str(tmp_path / "attach.parquet")}}))
    episodes = pl.read_parquet(tmp_path / "split" / "episodes.parquet")
    counts = dict(episodes["split"].value_counts().iter_rows())
    assert counts["train"] == 3 and sum(counts.values()) == result.stats["rows_episodes"]
    assert result.rejects.filter(pl.col("category") == "refunds")["reason"].to_list() == ["over_max_rows"] * (
        12 - sum(counts.values())
    )
    assert result.stats["rows_in"] == result.stats["rows_kept"] + result.stats["rows_rejected"]


def test_a_model_too_short_for_an_episode_opening_stops_before_sft_trains(db, split_rows, tmp_path):  # noqa: F811
    """An opening plus one message over the model's positions is an error in the sft stage, naming the way out."""
    spec = _spec(db, tiny={**TRAINING["tiny"], "max_positions": 96})
    with pytest.raises(ValueError, match="over the 96 positions the model.*training.episodes: false"):
        _sft(spec, tmp_path, split_rows)
    assert not (tmp_path / "sft" / "sft").exists()


def test_episodes_without_room_stop_at_context_full_and_the_run_goes_on(db, split_rows, tmp_path, monkeypatch):  # noqa: F811
    """Where the model's positions cannot hold another message (here: the engines are told the longest
    opening has no room for one; the untrained model ends its episodes on its first message), tiering
    records `context_full`, and GRPO counts the cut episodes, warns and trains to its last step."""
    from transformers import AutoTokenizer

    from rlvrflow.training import episodes, grpo_episodes
    from rlvrflow.training.episode_format import PLAIN

    grpo = {**TRAINING["grpo"], "filter_zero_variance": False}
    spec = _spec(db, grpo=grpo)
    inputs, _ = _sft(spec, tmp_path, split_rows)
    env = spec.verifiers.rule_for("refunds").resolved_environment(spec.base_dir)
    tok = AutoTokenizer.from_pretrained(inputs["sft"]["model"])
    rows = pl.read_parquet(split_rows["split"]["episodes"]).to_dicts()
    opening = [
        [{"role": "system", "content": env.instructions}, {"role": "user", "content": r["prompt"]}] for r in rows
    ]
    lengths = sorted({len(tok(PLAIN.prompt(m, env.schemas())).input_ids) for m in opening})
    assert len(lengths) > 1  # two tickets of different lengths: one kind plays, the other has no room
    monkeypatch.setattr(episodes, "context_limit", lambda engine: lengths[-1] - 1 + 12 + 1)
    # GRPO's check before its first step refuses such a run (an opening without room for one message);
    # in a real run cut episodes come from conversations that grew, which this untrained model cannot
    # write, so the check is lifted here: the loop's handling of cut episodes is what is tested
    monkeypatch.setattr(grpo_episodes, "check_fits", lambda *args: None)
    tiers, rollouts, _ = _tier(spec, tmp_path, inputs)
    assert {"context_full", "final_reply"} <= set(rollouts["finish_reason"])
    metrics = _grpo(spec, tmp_path, inputs, tiers)
    assert len(metrics) == 2 and sum(m.get("episode_context_full", 0) for m in metrics) > 0
    summary = json.loads((tmp_path / "grpo" / "summary.json").read_text())
    assert any("context_full" in w for w in summary["warnings"])
    # the steps' group counts cover both kinds and add up to the run's (the doctor reads them so)
    assert (
        summary["groups_seen"]
        == sum(m["groups_seen"] for m in metrics)
        > sum(m.get("episode_groups_seen", 0) for m in metrics)
    )
    assert zero_variance_share(metrics) == (summary["zero_variance_fraction"], summary["groups_seen"])


@pytest.mark.slow
def test_a_chat_model_runs_the_episode_stages_through_its_template(db, split_rows, tmp_path):  # noqa: F811
    """The in-project Qwen2 test model (ChatML, BPE): the run's prompts are chat, so its episodes render
    through `chat_format` in SFT, tiering and GRPO (random weights: the plumbing is what is tested)."""
    from rlvrflow.training.qwen_model import Qwen2Dims, build_qwen2_model

    rows = pl.read_parquet(split_rows["attach"]["rows"])
    corpus = [t for col in ("prompt", "solution", "reference") for t in rows[col].to_list() if t] * 3
    # the template lists the tools' schemas in the system message: a conversation is ~1,500 tokens
    model = build_qwen2_model(corpus, tmp_path / "qwen", seed=0, dims=Qwen2Dims(max_positions=4096))
    grpo = {**TRAINING["grpo"], "filter_zero_variance": False}
    sft = {**TRAINING["sft"], "max_length": 4096}
    spec = _spec(db, model=str(model), grpo=grpo, sft=sft)
    inputs, stats = _sft(spec, tmp_path, split_rows)
    assert stats["prompt_format"] == "chat" and stats["transcripts_used"] > 0
    tiers, rollouts, _ = _tier(spec, tmp_path, inputs)
    assert tiers.filter(pl.col("verifier") == EPISODE)["tier"].null_count() == 0
    metrics = _grpo(spec, tmp_path, inputs, tiers)
    assert any(m.get("episode_policy_tokens") for m in metrics)


def test_episode_settings_the_loop_cannot_play_fail_when_the_spec_is_read(db):  # noqa: F811
    """Not after prepare, attach, split and SFT: the spec names the field and the two ways out; vLLM
    rollouts play episodes (tests/training/test_grpo_vllm_episodes.py), so a spec may ask for them."""
    from rlvrflow.flows.spec import SpecError

    grpo = {**TRAINING["grpo"], "rollout_mode": "async"}
    with pytest.raises(SpecError, match="rollout_mode 'async' does not play episodes yet.*training.episodes: false"):
        _spec(db, grpo=grpo)
    assert _spec(db, grpo=grpo, episodes=False).training.episodes is False
    assert _spec(db, grpo={**TRAINING["grpo"], "rollout": "vllm"}).training.grpo.rollout == "vllm"
