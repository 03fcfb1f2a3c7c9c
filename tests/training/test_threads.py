"""The default torch thread count: one per two usable cores, 1 to 4, so a shared machine stays fast."""

import os

import pytest
import torch

from rlvrflow.training import modeling
from rlvrflow.training.config import TrainingConfig


@pytest.mark.parametrize("cores,threads", [(1, 1), (2, 1), (3, 1), (4, 2), (8, 4), (64, 4)])
def test_auto_threads_is_half_the_cores_within_one_to_four(monkeypatch, cores, threads):
    monkeypatch.setattr(modeling, "usable_cores", lambda: cores)
    assert modeling.auto_threads() == threads


def test_a_cgroup_cpu_quota_caps_the_usable_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("250000 100000\n")  # docker --cpus=2.5
    assert modeling.usable_cores(cpu_max) == 3
    cpu_max.write_text("max 100000\n")
    assert modeling.usable_cores(cpu_max) == 32
    assert modeling.usable_cores(tmp_path / "absent") == 32


def test_zero_threads_sets_the_auto_count_and_a_number_sets_itself(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(modeling, "usable_cores", lambda: 8)
    try:
        assert TrainingConfig().torch_threads == 0
        assert modeling.set_threads(0) == 4 and torch.get_num_threads() == 4
        assert modeling.set_threads(3) == 3 and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
