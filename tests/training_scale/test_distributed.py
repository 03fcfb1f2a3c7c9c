"""CPU tests of training.distributed: data-parallel padding, ZeRO config templates, launcher env, gathers.

None of these need DeepSpeed; the one place that would (`init_deepspeed`) is checked for its install
message, and the ZeRO-3 gather branch is checked against a stand-in `deepspeed.zero.GatheredParameters`.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from rlvrflow.training.distributed import (
    DistEnv,
    deepspeed_config,
    dist_env,
    dp_loss_denominator,
    gathered_state_dict,
    init_deepspeed,
    iter_gathered_params,
    pad_for_data_parallel,
    shard_rows,
)


def grpo_batch(n: int) -> dict:
    return {
        "input_ids": torch.arange(n * 3).reshape(n, 3),
        "completion_mask": torch.ones(n, 3),
        "advantages": torch.linspace(-1, 1, n),
        "ids": [f"p{i}" for i in range(n)],
        "rewards": np.arange(n, dtype=np.float32),
    }


@pytest.mark.parametrize(
    ("n", "world", "micro", "expected"),
    [(6, 2, 1, 6), (6, 4, 1, 8), (5, 2, 2, 8), (3, 8, 1, 8), (16, 4, 2, 16), (1, 3, 1, 3)],
)
def test_padding_reaches_the_next_multiple(n, world, micro, expected):
    padded = pad_for_data_parallel(grpo_batch(n), world, micro_batch=micro)
    assert padded.n_rows == expected
    assert padded.n_real == n and padded.n_pad == expected - n
    for key, value in padded.batch.items():
        assert len(value) == expected, key
    assert padded.row_weight.tolist() == [1.0] * n + [0.0] * (expected - n)


def test_padding_rows_are_cycled_copies_of_real_rows():
    batch = grpo_batch(3)
    padded = pad_for_data_parallel(batch, world_size=8)  # 3 -> 8: needs more copies than real rows
    assert padded.batch["ids"] == ["p0", "p1", "p2", "p0", "p1", "p2", "p0", "p1"]
    assert torch.equal(padded.batch["input_ids"][3:6], batch["input_ids"])
    assert padded.batch["rewards"].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert padded.batch["advantages"].dtype == batch["advantages"].dtype


def test_no_padding_when_already_divisible_keeps_inputs():
    batch = grpo_batch(8)
    padded = pad_for_data_parallel(batch, world_size=4)
    assert padded.n_pad == 0
    assert padded.batch["input_ids"] is batch["input_ids"]


def test_padding_adds_nothing_to_a_masked_token_mean_loss():
    batch = grpo_batch(5)
    per_token = torch.rand(5, 3, generator=torch.Generator().manual_seed(0))
    ref = (per_token * batch["completion_mask"]).sum() / batch["completion_mask"].sum()
    padded = pad_for_data_parallel({**batch, "per_token": per_token}, world_size=4)
    mask = padded.batch["completion_mask"] * padded.row_weight[:, None]
    got = (padded.batch["per_token"] * mask).sum() / mask.sum()
    assert torch.allclose(got, ref)
    unweighted = (padded.batch["per_token"] * padded.batch["completion_mask"]).sum() / padded.batch[
        "completion_mask"
    ].sum()
    assert not torch.allclose(unweighted, ref)  # the weight is what keeps the copies out


def test_shards_are_equal_and_cover_every_row():
    padded = pad_for_data_parallel(grpo_batch(7), world_size=4)
    shards = [shard_rows({**padded.batch, "w": padded.row_weight}, r, 4) for r in range(4)]
    assert [len(s["ids"]) for s in shards] == [2, 2, 2, 2]
    assert sum(s["w"].sum().item() for s in shards) == 7
    assert torch.equal(torch.cat([s["input_ids"] for s in shards]), padded.batch["input_ids"])


def test_shard_rows_refuses_unpadded_batches():
    with pytest.raises(ValueError, match="pad_for_data_parallel"):
        shard_rows(grpo_batch(7), 0, 2)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ({}, "no entries"),
        ({"a": torch.zeros(0, 3)}, "0 rows"),
        ({"a": torch.zeros(3, 2), "b": [1, 2]}, "disagree"),
        ({"a": torch.tensor(1.0)}, "0-d tensor"),
    ],
)
def test_bad_batches_say_what_is_wrong(batch, message):
    with pytest.raises(ValueError, match=message):
        pad_for_data_parallel(batch, world_size=2)


def test_bad_world_size_is_rejected():
    with pytest.raises(ValueError, match="world_size=0"):
        pad_for_data_parallel(grpo_batch(2), world_size=0)


def test_loss_denominator_single_process_is_the_token_count():
    assert dp_loss_denominator(12.0, 1) == 12.0
    with pytest.raises(ValueError, match="no real completion tokens"):
        dp_loss_denominator(0.0, 1)


def test_dist_env_reads_torchrun_and_slurm_variables():
    assert dist_env({}) == DistEnv(rank=0, local_rank=0, world_size=1)
    env = dist_env({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
    assert (env.rank, env.local_rank, env.world_size, env.is_main, env.is_distributed) == (3, 1, 4, False, True)
    assert dist_env({"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}).world_size == 2
    with pytest.raises(ValueError, match="RANK='x'"):
        dist_env({"RANK": "x"})
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        dist_env({"RANK": "2", "WORLD_SIZE": "2"})


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_config_fills_every_auto_field(stage):
    cfg = deepspeed_config(stage=stage, micro_batch=4, grad_accum=2, lr=1e-5, world_size=8, bf16=False)
    assert cfg["train_batch_size"] == 64
    assert cfg["train_micro_batch_size_per_gpu"] == 4 and cfg["gradient_accumulation_steps"] == 2
    assert cfg["zero_optimization"]["stage"] == stage
    assert cfg["bf16"] == {"enabled": False}
    assert cfg["rlvrflow"] == {"lr": 1e-5, "weight_decay": 0.0}
    assert "auto" not in repr(cfg)
    assert cfg["zero_optimization"]["offload_optimizer"]["device"] == "none"


def test_deepspeed_config_cpu_offload_allows_the_torch_optimizer():
    cfg = deepspeed_config(stage=3, micro_batch=1, grad_accum=1, lr=1e-5, world_size=1, offload="cpu")
    assert cfg["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert cfg["zero_force_ds_cpu_optimizer"] is False


def test_deepspeed_config_world_size_defaults_to_the_launcher(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert deepspeed_config(stage=2, micro_batch=3, grad_accum=1, lr=1e-5)["train_batch_size"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"stage": 1}, "stage 2 or 3"),
        ({"micro_batch": 0}, "micro_batch=0"),
        ({"offload": "nvme"}, "'none' or 'cpu'"),
    ],
)
def test_deepspeed_config_rejects_bad_arguments(args, message):
    kwargs = {"stage": 2, "micro_batch": 1, "grad_accum": 1, "lr": 1e-5, "world_size": 1, **args}
    with pytest.raises(ValueError, match=message):
        deepspeed_config(**kwargs)


def test_a_template_auto_field_without_a_value_is_named(tmp_path):
    (tmp_path / "zero2.json").write_text('{"zero_optimization": {"stage": 2, "sub_group_size": "auto"}}')
    with pytest.raises(ValueError, match="zero_optimization.sub_group_size"):
        deepspeed_config(stage=2, micro_batch=1, grad_accum=1, lr=1e-5, world_size=1, template_dir=tmp_path)


def test_init_deepspeed_without_deepspeed_gives_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # makes `import deepspeed` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'rlvrflow\[gpu\]'"):
        init_deepspeed(torch.nn.Linear(2, 2), {"train_batch_size": 1})


def tiny_hf_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=16,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg)


def test_gathered_state_dict_without_zero3_is_the_full_state_on_main_only():
    model = tiny_hf_model()
    state = gathered_state_dict(model, is_main=True)
    expected = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to embeddings
    assert set(state) == set(expected)
    assert all(torch.equal(state[k], expected[k]) for k in expected)
    assert gathered_state_dict(model, is_main=False) is None


def test_a_gathered_state_dict_saves_as_a_checkpoint_that_reloads(tmp_path):
    """What DeepSpeedBackend.save_checkpoint writes: the gathered weights through save_pretrained."""
    from transformers import LlamaForCausalLM

    model = tiny_hf_model()
    model.save_pretrained(tmp_path / "ckpt", state_dict=gathered_state_dict(model, is_main=True))
    loaded = LlamaForCausalLM.from_pretrained(tmp_path / "ckpt")
    ids = torch.tensor([[1, 2, 3]])
    assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)


def test_zero3_params_are_gathered_one_at_a_time_read_only(monkeypatch):
    calls = []

    @contextmanager
    def gathered(params, modifier_rank=-1):
        calls.append((len(params), modifier_rank))
        yield

    fake = types.ModuleType("deepspeed")
    fake.zero = types.SimpleNamespace(GatheredParameters=gathered)
    monkeypatch.setitem(sys.modules, "deepspeed", fake)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    model[0].weight.ds_id = 0  # only this one looks ZeRO-3 partitioned
    names = [name for name, _ in iter_gathered_params(model)]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert calls == [(1, None)]
