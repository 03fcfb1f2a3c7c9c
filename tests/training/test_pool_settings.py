"""The verifier pool's settings reach every training-side caller: eval, GRPO rewards, GRPO's and DPO's evals.

A plugin verifier that sleeps 2 s shows that `timeout_s` reaches the pool (a short one turns every
verdict into `timeout`, a long one lets it answer); a spy on `verifiers.score_many` shows that
train_grpo and train_dpo hand their `workers` and `timeout_s` to every scoring call they make.
"""

from __future__ import annotations

import textwrap

import polars as pl
import pytest

from rlvrflow import verifiers
from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.engines import Completion
from rlvrflow.training.config import EvalConfig, GRPOConfig
from rlvrflow.training.eval import evaluate_engine, read_samples, select_eval_tasks
from rlvrflow.training.grpo import collect_groups
from rlvrflow.training.scoring import tasks_from_df
from rlvrflow.verifiers import RewardConfig

SLOW = "slow_pool_checks:slow_copy"
SLOW_PLUGIN = textwrap.dedent('''
    """A verifier that takes 2 s before answering like `math` would on "Answer: d"."""
    import time

    from rlvrflow.verifiers.verdict import Verdict


    def slow_copy(response, reference, params):
        time.sleep(2)
        ok = response.strip().endswith(reference.strip())
        return Verdict(float(ok), "correct" if ok else "wrong", response[-8:], "slow check")
''')


@pytest.fixture
def slow_rows(toy, tmp_path, monkeypatch):
    """Two copy rows judged by the slow plugin verifier (importable in the pool's workers)."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "slow_pool_checks.py").write_text(SLOW_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    rows = toy.copy_rows(2, 0).with_columns(
        pl.Series("prompt", ["Copy 1\n", "Copy 2\n"]),
        pl.Series("reference", ["1", "2"]),
        pl.Series("id", ["p1", "p2"]),
        pl.lit(SLOW).alias("verifier"),
    )
    return rows


class EchoEngine:
    """Every completion answers the prompt's digit: right under any verifier that gets to answer."""

    def generate(self, prompts, n, sampling, seed):
        return [[Completion(f"Answer: {p.split()[1]}", (5, 6, 7), (0.0,) * 3, "stop")] * n for p in prompts]


@pytest.mark.parametrize(("timeout_s", "status"), [(0.3, "timeout"), (30.0, "correct")])
def test_eval_timeout_s_reaches_the_pool(slow_rows, tmp_path, timeout_s, status):
    tasks = select_eval_tasks(slow_rows, EvalConfig())
    cfg = EvalConfig(k=1, n_samples=1, samples_per_category=2)
    m = evaluate_engine(
        EchoEngine(), tasks, cfg, seed=0, workers=2, timeout_s=timeout_s, samples_path=tmp_path / "s.jsonl"
    )
    assert {r["status"] for r in read_samples(tmp_path / "s.jsonl")} == {status}
    assert m["pass_at_1_greedy"] == (1.0 if status == "correct" else 0.0)


def test_grpo_rewards_time_out_with_a_short_timeout_s(slow_rows, base_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    tasks = {t.id: t for t in tasks_from_df(slow_rows)}
    g = GRPOConfig(prompts_per_step=2, num_generations=2, max_refill_rounds=0, filter_zero_variance=False)

    class Sampler:
        def next_batch(self, n=None):
            return ["p1", "p2"][:n]

        def report(self, ids, rates):
            pass

    groups, info = collect_groups(
        EchoEngine(), Sampler(), tasks, tok, g, RewardConfig(), 0, 0, workers=2, timeout_s=0.3
    )
    assert {s for grp in groups for s in grp.statuses} == {"timeout"} and info["correct_rate"] == 0.0


@pytest.fixture
def spy(monkeypatch):
    """Records (workers, timeout_s) of every `verifiers.score_many` call and scores for real."""
    calls, real = [], verifiers.score_many

    def score_many(items, workers=None, timeout_s=30.0, progress=None):
        calls.append((workers, timeout_s))
        return real(items, workers=workers, timeout_s=timeout_s, progress=progress)

    monkeypatch.setattr(verifiers, "score_many", score_many)
    return calls


def test_train_grpo_scores_rewards_and_evals_with_its_pool_settings(spy, sft_model, toy, tmp_path):
    from rlvrflow.training.grpo import train_grpo

    cfg = toy.cfg(grpo={"max_steps": 1, "prompts_per_step": 2, "num_generations": 2}, checkpoint={"every": 1})
    train_grpo(
        sft_model,
        toy.copy_rows(8, 1),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(2, 3, split="eval"),
        EvalConfig(k=1, n_samples=2),
        tmp_path / "g",
        seed=0,
        workers=1,
        timeout_s=7.5,
    )
    assert len(spy) >= 3 and set(spy) == {(1, 7.5)}  # baseline eval, the step's rollouts, the step-1 eval


def test_train_grpo_without_workers_sizes_one_pool_by_the_cores_for_rewards_and_evals(spy, sft_model, toy, tmp_path):
    from rlvrflow.training.grpo import train_grpo

    cfg = toy.cfg(grpo={"max_steps": 1, "prompts_per_step": 2, "num_generations": 2}, checkpoint={"every": 1})
    train_grpo(
        sft_model,
        toy.copy_rows(8, 1),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(2, 3, split="eval"),
        EvalConfig(k=1, n_samples=2),
        tmp_path / "g",
        seed=0,
    )
    assert len(spy) >= 3 and set(spy) == {(None, 30.0)}  # score_many's None: one process per core, one pool


def test_train_dpo_evaluates_with_its_pool_settings(spy, sft_model, toy, tmp_path):
    from rlvrflow.training.dpo import train_dpo

    cfg = toy.cfg(algorithm="dpo", dpo={"max_steps": 1, "batch_size": 2, "warmup_steps": 0}, checkpoint={"every": 1})
    pairs = [{"prompt": f"Copy {d}\n", "chosen": f"Answer: {d}", "rejected": f"Answer: {d + 1}"} for d in range(3)]
    train_dpo(
        sft_model,
        pairs,
        cfg,
        toy.copy_rows(2, 3, split="eval"),
        EvalConfig(k=1, n_samples=2),
        tmp_path / "d",
        seed=0,
        workers=1,
        timeout_s=7.5,
    )
    assert len(spy) == 2 and set(spy) == {(1, 7.5)}  # the SFT baseline and the step-1 checkpoint
