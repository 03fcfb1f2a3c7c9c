"""The skeleton SFT, DPO and GRPO share: one schedule rule, each section's floor, and what a resume refuses.

Resume itself (bitwise, after kill -9, over several ranks) is tested through the loops: test_dpo.py,
test_grpo_loop.py, test_async_rollouts.py and tests/training_scale/."""

import pytest
import torch

from rlvrflow.training.config import DPOConfig, GRPOConfig, SFTConfig
from rlvrflow.training.trainer import Optim, warmup_cosine


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 10, 110, 0.1) == pytest.approx(0.1)
    assert warmup_cosine(9, 10, 110, 0.1) == pytest.approx(1.0)
    assert warmup_cosine(10, 10, 110, 0.1) == pytest.approx(1.0)
    assert warmup_cosine(60, 10, 110, 0.1) == pytest.approx(0.55)
    assert warmup_cosine(110, 10, 110, 0.1) == pytest.approx(0.1)
    assert warmup_cosine(500, 0, 110, 0.0) == pytest.approx(0.0)


def test_each_section_gives_its_floor_and_grpo_counts_updates():
    assert Optim.of(SFTConfig(max_steps=40)).min_lr_ratio == 0.1  # SFT's fixed floor
    assert Optim.of(DPOConfig(min_lr_ratio=0.0)).min_lr_ratio == 0.0
    g = GRPOConfig(max_steps=10, warmup_steps=3, num_iterations=2, min_lr_ratio=0.2)
    o = Optim.of(g, g.num_iterations)
    assert (o.total_steps, o.warmup_steps, o.min_lr_ratio) == (20, 6, 0.2)
    opt = o.adamw([torch.nn.Parameter(torch.zeros(1))])
    sched = o.schedule(opt)
    rates = []
    for _ in range(20):
        rates.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert rates[0] == pytest.approx(g.learning_rate / 6) and max(rates) == pytest.approx(g.learning_rate)
    assert sched.get_last_lr()[0] == pytest.approx(0.2 * g.learning_rate)  # the floor after the last update


def test_a_checkpoint_without_backend_state_is_refused_with_the_fix(tmp_path):
    from rlvrflow.training.trainer import Trainer

    old = tmp_path / "step_000002"
    old.mkdir()
    torch.save({"optimizer": {}, "scheduler": {}, "rng": {}, "run": {"step": 2}}, old / "state.pt")  # an older DPO's

    class Backend:
        is_main = True

    trainer = Trainer("dpo", tmp_path, None, Backend(), None, None, None, 4, 1, str, "cpu")
    with pytest.raises(ValueError, match="new output directory"):
        trainer.start(old)
