"""Async GRPO rollouts for real on the copy task: lockstep equals sync, staleness makes the clip bite,
the accounting adds up, unsupported combinations are refused at spec load."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.training.config import EvalConfig, GRPOConfig
from rlvrflow.training.grpo import train_grpo
from rlvrflow.verifiers import RewardConfig


def _metrics(out):
    return [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _train(toy, sft, out, **grpo):
    cfg = toy.cfg(grpo={"max_steps": 3, "learning_rate": 1e-2, **grpo}, checkpoint={"every": 3})
    return train_grpo(
        sft,
        toy.copy_rows(60, 1),
        cfg,
        CurriculumConfig(dedup_window=1),
        RewardConfig(),
        toy.copy_rows(4, 3, split="eval"),
        EvalConfig(k=1, n_samples=1, max_new_tokens=12),
        out,
        seed=3,
    )


@pytest.mark.slow
def test_staleness_0_reproduces_the_synchronous_run(tmp_path, sft_model, toy):
    sync = _train(toy, sft_model, tmp_path / "sync")
    lock = _train(toy, sft_model, tmp_path / "async", rollout_mode="async", max_staleness=0)
    a, b = _metrics(tmp_path / "sync"), _metrics(tmp_path / "async")
    assert [m["step"] for m in b] == [1, 2, 3] and any("loss" in y for y in b)  # at least one update compared
    for x, y in zip(a, b):
        for key in ("reward_mean", "correct_rate", "groups_seen", "groups_zero_variance", "completion_tokens"):
            assert x[key] == pytest.approx(y[key], abs=1e-6), (key, x, y)
        assert x.get("loss", 0.0) == pytest.approx(y.get("loss", 0.0), abs=1e-5)
        assert y.get("clip_fraction", 0.0) == 0.0 and y["groups_stale"] == 0 and y["staleness_mean"] == 0
    assert sync["final"]["pass_at_1_greedy"] == lock["final"]["pass_at_1_greedy"]
    assert lock["rollout_mode"] == "async" and lock["groups_stale"] == 0
    assert not list((tmp_path / "async" / "rollout_queue").iterdir())  # the epoch folder is removed at the end


@pytest.mark.slow
def test_a_stale_run_clips_and_counts_every_group(tmp_path, sft_model, toy):
    result = _train(toy, sft_model, tmp_path, rollout_mode="async", max_staleness=2, max_steps=5, learning_rate=3e-2)
    m = _metrics(tmp_path)
    assert max(x["staleness_mean"] for x in m) > 0
    assert max(x.get("clip_fraction", 0.0) for x in m) > 0  # the ratio to the generator's policy is clipped
    assert result["groups_seen"] == (
        result["groups_trained"] + result["groups_zero_variance"] + result["groups_stale"] + m[-1]["groups_waiting"]
    )
    keys = [k for x in m for k in x["trained"]]
    assert len(keys) == len(set(keys)) == result["groups_trained"]


def _run(sft, out, kill_after, who):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("async_rollouts_runner.py")),
            str(sft),
            str(out),
            str(kill_after),
            who,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _gone(pid: int) -> bool:
    """True once `pid` has exited (polled: the kernel delivers the parent-death signal asynchronously). A
    zombie has exited: the orphan's new parent may not have reaped it yet."""
    import time

    for _ in range(200):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _generator_pid(out: Path) -> int:
    (pid_file,) = (out / "rollout_queue").glob("*/generator.pid")
    return int(pid_file.read_text())


def _check_lineage(out: Path, summary: dict) -> None:
    """No group trained twice, every consumed group accounted for, the sampler's window and tiers in step."""
    from rlvrflow.training import checkpoint as ckpt

    m = _metrics(out)
    assert [x["step"] for x in m] == list(range(1, STEPS + 1))  # each step once in the resumed lineage
    keys = [k for x in m for k in x["trained"]]
    assert len(keys) == len(set(keys)) == summary["groups_trained"]
    state = ckpt.load_state(out / f"step_{STEPS:06d}")
    run, sampler = state["run"], state["sampler"]
    waiting = len(run["queue"]["buffer"])
    assert run["groups_seen"] == run["groups_trained"] + run["groups_zero_variance"] + run["groups_stale"] + waiting
    # every draw of the lineage became one request; every consumed group was reported to the sampler once
    assert sampler["batches"] == run["queue"]["next_seq"]
    assert sum(len(h) - 1 for h in sampler["history"].values()) == run["groups_seen"]
    if run["queue"]["pending"]:  # the window was saved with the requests it drew
        assert sampler["recent"][-1] == run["queue"]["pending"][-1]["ids"]
    bounds = CurriculumConfig().boundaries
    for pid, hist in sampler["history"].items():  # tiers follow the reports
        if len(hist) > 1:
            assert sampler["tier"][pid] == bounds.tier_of(sum(hist) / len(hist)), pid


STEPS = 6  # async_rollouts_runner.STEPS


@pytest.mark.slow
def test_kill_9_of_the_trainer_takes_the_generator_with_it_and_a_rerun_resumes(tmp_path, sft_model):
    out = tmp_path / "run"
    crash = _run(sft_model, out, 3, "trainer")
    assert crash.returncode == -9, crash.stderr[-2000:]
    assert _gone(_generator_pid(out))  # no orphan: the generator died with its trainer
    assert sorted(p.name for p in out.glob("step_*")) == ["step_000002"]
    left = [json.loads(p.read_text()) for p in (out / "rollout_queue").glob("*/results/r*.json")]
    assert left  # the runner killed the trainer only once the generator had written a result
    resumed = _run(sft_model, out, 0, "trainer")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    _check_lineage(out, summary)
    assert summary["steps"] == STEPS
    assert summary["groups_discarded"] == sum(len(r["groups"]) for r in left)
    assert [p.name for p in (out / "rollout_queue").iterdir()] == []


@pytest.mark.slow
def test_a_killed_generator_is_restarted_and_nothing_is_lost(tmp_path, sft_model):
    out = tmp_path / "run"
    done = _run(sft_model, out, 2, "generator")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["generator_restarts"] == 1
    _check_lineage(out, summary)


@pytest.mark.parametrize(
    "over, field",
    [
        ({"rollout": "vllm"}, "rollout"),
        ({"backend": "deepspeed"}, "backend"),
        ({"max_staleness": 1, "sync_every": 3}, "sync_every"),
        ({"top_p": 0.9}, "top_p=0.9"),  # the generator's log-probs would be over the nucleus, the loss's not
    ],
)
def test_unsupported_async_combinations_are_refused_at_load(over, field):
    with pytest.raises(ValidationError, match=field):
        GRPOConfig(rollout_mode="async", **over)
    GRPOConfig(rollout_mode="sync", **over)  # each is fine in sync mode
    GRPOConfig(rollout_mode="async", max_staleness=2, sync_every=3)  # the largest sync_every staleness 2 allows
    assert GRPOConfig(rollout_mode="async", max_staleness=3, sync_every=2).lookahead_batches == 2


def test_the_generator_receives_the_merged_lora_weights(tmp_path, sft_model, toy):
    """With LoRA the trainer publishes W + scale * B @ A under plain names; the generator's plain model loaded
    with them computes what the adapter model computes."""
    import torch

    from rlvrflow.training.async_rollouts import AsyncRollouts, _load_weights
    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.modeling import load_model_and_tokenizer, load_policy

    cfg = toy.cfg(grpo={"rollout_mode": "async"}, lora={"r": 4, "alpha": 8})
    policy, tok = load_policy(sft_model, torch.device("cpu"), torch.float32, cfg.lora, base=sft_model)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # adapters that change the output (fresh ones start at B = 0)
    rollouts = AsyncRollouts(
        tmp_path, sft_model, cfg, {}, RewardConfig(), 0, torch.device("cpu"), torch.float32, 1, 5.0
    )
    from rlvrflow.training.rollout_queue import RolloutQueue

    rollouts.queue, _ = RolloutQueue.fresh(tmp_path / "q")
    rollouts.publish(make_backend(policy, cfg.grpo, torch.float32, lora=True), 7)
    version, path = rollouts.queue.newest_weights()
    plain, _ = load_model_and_tokenizer(sft_model, torch.device("cpu"), trainable=False)
    _load_weights(plain, torch.load(path))
    ids = torch.tensor([tok("Copy 3\nAnswer: 3").input_ids])
    policy.eval()
    with torch.no_grad():
        want, got = policy(input_ids=ids).logits, plain(input_ids=ids).logits
    assert version == 7 and torch.allclose(want, got, atol=1e-5)
    with torch.no_grad(), policy.disable_adapter():
        base = policy(input_ids=ids).logits
    assert not torch.allclose(base, got, atol=1e-3)  # the adapters mattered


def test_the_rollout_mode_is_in_the_grpo_stage_key_and_reaches_train_grpo():
    """`--set training.grpo.rollout_mode=async` on the retail spec gives the GRPO stage a new cache key, and
    the config its call passes to train_grpo carries the mode (flows/stage_calls.py `training_config`)."""
    from rlvrflow.flows.cache import Manifest
    from rlvrflow.flows.stage_calls import training_config
    from rlvrflow.flows.common import with_overrides
    from rlvrflow.flows.runner import stage_key_of
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.flows.stages import STAGES

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "retail" / "spec.yaml")
    mode = with_overrides(spec, {"training.grpo.rollout_mode": "async"})
    stale = with_overrides(mode, {"training.grpo.max_staleness": 3})
    outputs = {"sft": ("model",), "tier": ("rows",), "split": ("eval", "episodes")}
    upstream = {
        name: Manifest(name, "k", None, {o: o for o in outs}, {o: f"{name}-{o}" for o in outs})
        for name, outs in outputs.items()
    }
    keys = [stage_key_of(STAGES["grpo"], s, upstream) for s in (spec, mode, stale)]
    assert len(set(keys)) == 3
    assert training_config(mode).grpo.rollout_mode == "async"


@pytest.mark.slow
def test_a_generator_that_raises_stops_the_run_with_its_traceback(tmp_path, toy):
    """A generator that cannot load its model writes its traceback to the queue; the trainer raises it
    instead of waiting for a result that will never come (or restarting it over and over)."""
    import torch

    from rlvrflow.training.async_rollouts import AsyncRollouts, GeneratorFailed
    from rlvrflow.training.grpo import GRPORun

    class NoWeights:  # a backend with nothing to publish
        def named_parameters(self):
            return iter(())

    rollouts = AsyncRollouts(
        tmp_path,
        tmp_path / "no_such_model",
        toy.cfg(grpo={"rollout_mode": "async"}),
        {},
        RewardConfig(),
        0,
        torch.device("cpu"),
        torch.float32,
        1,
        5.0,
    )
    run = GRPORun()
    with rollouts, pytest.raises(GeneratorFailed, match="no_such_model"):
        rollouts.start(run, NoWeights())
        rollouts.queue.put_request({"seq": 0, "ids": ["x"], "seed": 0, "min_version": 0})
        rollouts._wait(0, run)
    assert run.generator_restarts == 0 and rollouts.proc.poll() is not None


UNGUARDED = """
import importlib.util, sys
from pathlib import Path

import torch

from rlvrflow.training.async_rollouts import AsyncRollouts
from rlvrflow.training.grpo import GRPORun
from rlvrflow.verifiers import RewardConfig

print("top level ran", flush=True)
spec = importlib.util.spec_from_file_location("toy_conftest", sys.argv[1])
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)


class NoWeights:
    def named_parameters(self):
        return iter(())


out = Path(sys.argv[2])
cfg = toy.training_cfg(grpo={"rollout_mode": "async"})
rollouts = AsyncRollouts(out, out / "no_such_model", cfg, {}, RewardConfig(), 0, torch.device("cpu"), torch.float32,
                         1, 5.0)
run = GRPORun()
with rollouts:
    rollouts.start(run, NoWeights())
    rollouts.queue.put_request({"seq": 0, "ids": ["x"], "seed": 0, "min_version": 0})
    rollouts._wait(0, run)
"""


@pytest.mark.slow
def test_a_script_without_a_main_guard_starts_the_generator_once(tmp_path):
    """The generator is a fresh `python -m rlvrflow.training.async_rollouts`, not a multiprocessing spawn: a script
    without `if __name__ == "__main__":` is not re-run in it, and the generator's own error reaches the trainer
    (a spawn would re-run the script's top level in the child, which then dies without a word)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).with_name("conftest.py")), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.count("top level ran") == 1, done.stdout
    assert "GeneratorFailed" in done.stderr and "no_such_model" in done.stderr, done.stderr[-3000:]
    assert "died" not in done.stderr


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_async_lora_in_a_16_bit_dtype_is_refused_before_a_model_loads(tmp_path, toy, dtype):
    """The generator would get merged weights rounded to the 16-bit base: small adapter updates vanish and its
    log-probs (old_logp) differ from the trainer's unmerged policy. train_grpo refuses before loading anything."""
    import torch

    from rlvrflow.training.async_rollouts import check_dtype

    with pytest.raises(ValidationError, match="dtype: float32"):  # a 16-bit dtype named in the spec: at load
        toy.cfg(grpo={"rollout_mode": "async"}, lora={"r": 4, "alpha": 8}, dtype=dtype)
    # `auto` resolves to bf16 on a GPU: train_grpo checks the resolved dtype before a model loads
    cfg = toy.cfg(grpo={"rollout_mode": "async"}, lora={"r": 4, "alpha": 8}, dtype="auto")
    with pytest.raises(ValueError, match="training.dtype float32"):
        check_dtype(cfg, getattr(torch, dtype))
    check_dtype(cfg, torch.float32)  # LoRA in float32, and full fine-tuning in any dtype, run async
    check_dtype(toy.cfg(grpo={"rollout_mode": "async"}), getattr(torch, dtype))
