"""bench/agent_target.py's --sft-from check: GRPO trials start from an earlier run's SFT only when that
SFT was trained with the same settings, so a comparison of GRPO settings is never against another SFT."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("agent_target")


CARD = {"orders": 900, "eval_tasks": 150, "worked": 80, "sft_steps": 300, "sft_lr": 2e-3, "seed": 0}


def test_reuses_an_sft_trained_with_the_same_settings(bench, tmp_path):
    (tmp_path / "bench_sft.json").write_text(json.dumps({**CARD, "seconds": 200.0, "cpu_seconds": 150.0}))
    assert bench.reused_sft(tmp_path, CARD) == tmp_path


def test_refuses_an_sft_trained_with_other_settings(bench, tmp_path):
    (tmp_path / "bench_sft.json").write_text(json.dumps({**CARD, "sft_steps": 100, "seconds": 1, "cpu_seconds": 1}))
    with pytest.raises(ValueError, match="sft_steps.*drop --sft-from"):
        bench.reused_sft(tmp_path, CARD)


def test_refuses_a_folder_without_its_card(bench, tmp_path):
    with pytest.raises(ValueError, match="bench_sft.json is missing"):
        bench.reused_sft(tmp_path, CARD)


def test_with_context_raises_the_positions_and_keeps_the_model(bench, tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    out = bench.with_context(tiny_model_dir, tmp_path / "start", 1024)
    before, after = AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoModelForCausalLM.from_pretrained(out)
    assert (before.config.max_position_embeddings, after.config.max_position_embeddings) == (256, 1024)
    ids = torch.tensor([[1, 5, 6, 7]])
    assert torch.equal(before(ids).logits, after(ids).logits)
