"""GRPO's readable outputs: the best and worst rollouts every N steps, and one log line per logged step."""

import json
import logging
from types import SimpleNamespace

from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.training.config import EvalConfig
from rlvrflow.training.grpo import Group, train_grpo
from rlvrflow.training.grpo_logs import rollout_samples, step_line
from rlvrflow.verifiers import RewardConfig


def _group(task_id, rewards, texts, statuses):
    return Group(task_id, [1, 2], [[3]] * len(rewards), rewards, [s == "correct" for s in statuses], texts, statuses)


def test_best_and_worst_of_the_first_groups():
    tasks = {
        "a": SimpleNamespace(prompt="Copy 1\n"),
        "b": SimpleNamespace(prompt="Copy 2\n"),
        "c": SimpleNamespace(prompt="Copy 3\n"),
    }
    groups = [
        _group(
            "a", [0.1, 1.0, 0.0, 1.0], ["x", "Answer: 1", "", "Answer:1"], ["wrong", "correct", "unparsed", "correct"]
        ),
        _group("b", [0.0, 1.0], ["Answer: 9", "Answer: 2"], ["wrong", "correct"]),
        _group("c", [0.0, 1.0], ["no", "Answer: 3"], ["wrong", "correct"]),
    ]
    recs = rollout_samples(groups, tasks, step=10)
    assert [(r["task_id"], r["kind"], r["response"], r["reward"], r["status"]) for r in recs] == [
        ("a", "best", "Answer: 1", 1.0, "correct"),  # the first of two equal best
        ("a", "worst", "", 0.0, "unparsed"),
        ("b", "best", "Answer: 2", 1.0, "correct"),
        ("b", "worst", "Answer: 9", 0.0, "wrong"),
    ]
    assert recs[0]["prompt"] == "Copy 1\n" and recs[0]["step"] == 10 and recs[0]["group_reward_mean"] == 0.525


def test_step_line_names_the_numbers_a_person_watches():
    m = {
        "step": 4,
        "reward_mean": 0.5,
        "correct_rate": 0.375,
        "zero_variance_fraction": 0.25,
        "kl": 0.0123,
        "entropy": 0.4567,
        "loss": -0.01,
        "step_seconds": 1.234,
        "completion_tokens": 96,
    }
    assert step_line(m, 10) == (
        "grpo step 4/10 reward 0.500 correct 37.5% zero-variance 25% kl 0.0123 "
        "entropy 0.457 loss -0.0100 1.23s 96 tokens"
    )
    skipped = {**{k: v for k, v in m.items() if k not in ("kl", "entropy", "loss")}, "skipped": 1}
    assert "no update (no group had reward variance)" in step_line(skipped, 10)


def test_grpo_writes_rollout_samples_and_step_lines(tmp_path, sft_model, toy, caplog):
    cfg = toy.cfg(
        grpo={"max_steps": 4, "logging_steps": 2, "log_samples_every": 2, "filter_zero_variance": False},
        checkpoint={"every": 4},
        report_to=[],
    )
    with caplog.at_level(logging.INFO, logger="rlvrflow.training"):
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
    recs = [json.loads(line) for line in (tmp_path / "rollout_samples.jsonl").read_text().splitlines()]
    assert [(r["step"], r["kind"]) for r in recs] == [
        (s, k) for s in (2, 4) for _ in range(2) for k in ("best", "worst")
    ]
    for best, worst in zip(recs[::2], recs[1::2]):
        assert best["task_id"] == worst["task_id"] and best["reward"] >= worst["reward"]
        assert best["prompt"].startswith("Copy ") and isinstance(best["response"], str)
        assert best["status"] in ("correct", "wrong", "unparsed") and worst["status"] in (
            "correct",
            "wrong",
            "unparsed",
        )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("grpo step ")]
    assert [line.split()[2] for line in lines] == ["2/4", "4/4"]
    assert all(
        " reward " in line and " correct " in line and " zero-variance " in line and " tokens" in line for line in lines
    )
    assert not (tmp_path / "tb").exists()  # report_to: [] writes no events


def test_log_samples_every_zero_writes_none(tmp_path, sft_model, toy):
    cfg = toy.cfg(grpo={"max_steps": 2, "log_samples_every": 0}, checkpoint={"every": 2}, report_to=[])
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
    assert not (tmp_path / "rollout_samples.jsonl").exists()
