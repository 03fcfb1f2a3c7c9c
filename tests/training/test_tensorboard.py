"""`training.report_to: [tensorboard]`: SFT and GRPO write event files that TensorBoard reads back."""

import json

import pytest
from pydantic import ValidationError

from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.training.config import EvalConfig, TrainingConfig
from rlvrflow.training.grpo import train_grpo
from rlvrflow.training.progress import Scalars
from rlvrflow.training.sft import run_sft
from rlvrflow.verifiers import RewardConfig


def _scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_sft_writes_loss_and_lr_at_the_logged_steps(tmp_path, base_model, toy):
    cfg = toy.cfg(sft={"max_steps": 6, "logging_steps": 2}, report_to=["tensorboard"])
    out = run_sft(base_model, toy.copy_rows(20, 0), cfg, tmp_path / "sft", seed=0)
    assert list((out / "tb").glob("events.out.tfevents.*"))
    tags = _scalars(out / "tb")
    logged = [json.loads(line)["step"] for line in (out / "sft_metrics.jsonl").read_text().splitlines()]
    assert logged == [0, 2, 4, 5]
    for tag in ("sft/loss", "sft/lr", "sft/grad_norm", "sft/step_seconds", "sft/tokens"):
        assert tags[tag] == logged, tag
    assert not list(tmp_path.glob(".tmp-*"))  # the events were moved into the saved model's folder


def test_report_to_empty_writes_no_events(tmp_path, base_model, toy):
    out = run_sft(
        base_model, toy.copy_rows(20, 0), toy.cfg(sft={"max_steps": 2}, report_to=[]), tmp_path / "sft", seed=0
    )
    assert (out / "model.safetensors").exists() and not (out / "tb").exists()


def test_grpo_writes_step_and_eval_scalars(tmp_path, sft_model, toy):
    cfg = toy.cfg(grpo={"max_steps": 3}, checkpoint={"every": 2}, report_to=["tensorboard"])
    train_grpo(
        sft_model,
        toy.copy_rows(40, 1),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(4, 3, split="eval"),
        EvalConfig(k=1, n_samples=1, max_new_tokens=12),
        tmp_path,
        seed=0,
    )
    tags = _scalars(tmp_path / "tb")
    for tag in (
        "grpo/reward_mean",
        "grpo/correct_rate",
        "grpo/zero_variance_fraction",
        "grpo/completion_tokens",
        "grpo/completion_tokens_mean",
        "grpo/step_seconds",
        "grpo/lr",
    ):
        assert tags[tag] == [1, 2, 3], tag
    assert "grpo/step" not in tags
    assert tags["eval/pass_at_1_greedy"] == [0, 2, 3]  # the SFT baseline, then each checkpoint
    assert tags["eval/length_mean"] == [0, 2, 3]


def test_nested_records_get_their_own_tag_level(tmp_path):
    # a mixed run's eval record holds the held-out episodes' figures as a nested dict
    record = {
        "step": 4,
        "pass_at_1_greedy": 0.5,
        "episodes": {
            "pass_at_1_greedy": 0.25,
            "turns_mean": 2.5,
            "success_by_turns": {"3": [4, 1]},
            "tool_calls": {"refund": 3, "any name a model wrote": 1},
        },
        "per_category": {"refunds": {"pass_at_1_greedy": 0.25, "n": 4}},
        "headline_scope": "replies",
        "truncated": False,
        "nan": float("nan"),
    }
    with Scalars(["tensorboard"], tmp_path) as scalars:
        scalars.add("eval", record, step=4, leave_out=("tool_calls",))
    assert _scalars(tmp_path) == {
        "eval/pass_at_1_greedy": [4],
        "eval/episodes/pass_at_1_greedy": [4],
        "eval/episodes/turns_mean": [4],
        "eval/per_category/refunds/pass_at_1_greedy": [4],
        "eval/per_category/refunds/n": [4],
    }


@pytest.mark.parametrize("value", [["wandb"], ["tensorboard", "mlflow"]])
def test_unknown_report_to_is_a_spec_error_naming_the_choices(value):
    with pytest.raises(ValidationError) as err:
        TrainingConfig.model_validate({"report_to": value})
    assert "training.report_to has" in str(err.value) and "allowed values: tensorboard" in str(err.value)


def test_report_to_defaults_to_tensorboard():
    assert TrainingConfig().report_to == ["tensorboard"] and TrainingConfig(report_to=[]).report_to == []


def test_an_sft_rebuilt_with_other_logging_keeps_its_output_digest(tmp_path, base_model, toy):
    """Timings, the logging interval and TensorBoard events change only the SFT folder's run records,
    which the stage cache leaves out of the digest that tiering's, GRPO's and eval's keys hash."""
    from rlvrflow.flows.cache import RUN_RECORDS, output_digest, tree_digest

    rows = toy.copy_rows(20, 0)
    plain = run_sft(base_model, rows, toy.cfg(sft={"max_steps": 4, "logging_steps": 1}), tmp_path / "a", seed=0)
    logged = run_sft(
        base_model,
        rows,
        toy.cfg(sft={"max_steps": 4, "logging_steps": 3}, report_to=["tensorboard"]),
        tmp_path / "b",
        seed=0,
    )
    assert tree_digest(plain) != tree_digest(logged)  # the records do differ
    assert output_digest(plain) == output_digest(logged)
    assert {p.name for p in logged.iterdir()} ^ {p.name for p in plain.iterdir()} <= RUN_RECORDS
    # a model folder handed in from outside (`rlvrflow tier --model DIR`) is keyed the same way
    from rlvrflow.flows.stages import given_model

    assert given_model(plain).digests["model"] == given_model(logged).digests["model"] == output_digest(plain)
