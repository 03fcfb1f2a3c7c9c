"""The GRPO loop for real on the copy task: refill of zero-variance groups, learning, kill -9 and resume."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.engines import Completion
from rlvrflow.training.config import EvalConfig, GRPOConfig
from rlvrflow.training.grpo import Group, collect_groups, train_grpo
from rlvrflow.training.scoring import tasks_from_df
from rlvrflow.verifiers import RewardConfig


class DigitEngine:
    """Even digits: every completion correct (a zero-variance group); odd: half right, half wrong."""

    def generate(self, prompts, n, sampling, seed):
        out = []
        for p in prompts:
            d = int(p.split()[1])
            texts = [f"Answer: {d}" if d % 2 == 0 or j % 2 == 0 else f"Answer: {(d + 1) % 10}" for j in range(n)]
            out.append([Completion(t, (5, 6, 7), (0.0, 0.0, 0.0), "stop") for t in texts])
        return out


class ListSampler:
    def __init__(self, ids):
        self.ids, self.reports = list(ids), []

    def next_batch(self, n=None):
        batch, self.ids = self.ids[:n], self.ids[n:]
        return batch

    def report(self, ids, rates):
        self.reports.append((list(ids), list(rates)))


def _digit_tasks(toy, digits):
    import polars as pl

    rows = toy.copy_rows(len(digits), 0).with_columns(
        pl.Series("prompt", [f"Copy {d}\n" for d in digits]),
        pl.Series("reference", [str(d) for d in digits]),
        pl.Series("id", [f"p{d}" for d in digits]),
    )
    return {t.id: t for t in tasks_from_df(rows)}


@pytest.fixture
def tokenizer(base_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_model)


def test_zero_variance_groups_are_filtered_and_refilled(toy, tokenizer):
    tasks = _digit_tasks(toy, [0, 2, 1, 3, 5])
    sampler = ListSampler(["p0", "p2", "p1", "p3", "p5"])
    g = GRPOConfig(prompts_per_step=2, num_generations=4, max_refill_rounds=1)
    groups, info = collect_groups(DigitEngine(), sampler, tasks, tokenizer, g, RewardConfig(), 0, 0)
    assert [grp.task_id for grp in groups] == ["p1", "p3"]
    assert info["groups_seen"] == 4 and info["groups_zero_variance"] == 2 and info["zero_variance_fraction"] == 0.5
    assert info["groups_zero_solved"] == 2  # p0 and p2 were all correct, not all wrong
    assert sampler.reports == [(["p0", "p2"], [1.0, 1.0]), (["p1", "p3"], [0.5, 0.5])]  # re-tiering sees all
    assert groups[0].correct == [True, False, True, False]
    assert groups[0].rewards[0] > groups[0].rewards[1]
    assert groups[0].prompt_ids == tokenizer("Copy 1\n").input_ids


def test_refill_is_bounded_and_filtering_can_be_off(toy, tokenizer):
    tasks = _digit_tasks(toy, [0, 2, 4, 6, 1])
    g = GRPOConfig(prompts_per_step=2, num_generations=2, max_refill_rounds=1)
    groups, info = collect_groups(
        DigitEngine(), ListSampler(["p0", "p2", "p4", "p6", "p1"]), tasks, tokenizer, g, RewardConfig(), 0, 0
    )
    assert groups == [] and info["groups_seen"] == 4  # two rounds only, all zero-variance
    g_keep = GRPOConfig(prompts_per_step=2, num_generations=2, filter_zero_variance=False)
    groups, info = collect_groups(
        DigitEngine(), ListSampler(["p0", "p2"]), tasks, tokenizer, g_keep, RewardConfig(), 0, 0
    )
    assert [grp.task_id for grp in groups] == ["p0", "p2"] and info["groups_zero_variance"] == 0


def test_an_empty_draw_ends_the_rounds_instead_of_failing(toy, tokenizer):
    """A short_batch sampler can return no ids at all: the step has no groups, nothing crashes."""
    tasks = _digit_tasks(toy, [0, 1])
    g = GRPOConfig(prompts_per_step=2, num_generations=2, max_refill_rounds=2)
    sampler = ListSampler(["p0", "p2"][:1])  # one zero-variance prompt, then nothing
    groups, info = collect_groups(DigitEngine(), sampler, tasks, tokenizer, g, RewardConfig(), 0, 0)
    assert groups == [] and info["groups_seen"] == 1 and info["groups_zero_variance"] == 1
    groups, info = collect_groups(DigitEngine(), ListSampler([]), tasks, tokenizer, g, RewardConfig(), 0, 1)
    assert groups == [] and info["groups_seen"] == 0 and info["zero_variance_fraction"] == 0.0


class CutEngine(DigitEngine):
    """DigitEngine whose odd-indexed completions ran into max_new_tokens."""

    def generate(self, prompts, n, sampling, seed):
        return [
            [dataclasses.replace(c, finish_reason="length") if j % 2 else c for j, c in enumerate(grp)]
            for grp in super().generate(prompts, n, sampling, seed)
        ]


def test_truncated_completions_are_marked_counted_and_masked_out_of_the_loss(toy, tokenizer, sft_model):
    """mask_truncated_completions (TRL's name; DAPO's overlong filtering): a completion cut at
    max_new_tokens keeps its reward in the group's advantages and adds nothing to the loss."""
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.grpo import update_policy
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.trainer import Optim

    tasks = _digit_tasks(toy, [1, 3])
    g = GRPOConfig(
        prompts_per_step=2, num_generations=4, mask_truncated_completions=True, learning_rate=1e-3, warmup_steps=0
    )
    groups, info = collect_groups(CutEngine(), ListSampler(["p1", "p3"]), tasks, tokenizer, g, RewardConfig(), 0, 0)
    assert [grp.truncated for grp in groups] == [[False, True, False, True]] * 2
    assert info["truncated_fraction"] == 0.5

    model, tok = load_model_and_tokenizer(sft_model, torch.device("cpu"))
    prompt, comp = tok("Copy 7\n").input_ids, tok("Answer: 7", add_special_tokens=False).input_ids
    all_cut = Group("t", prompt, [comp, comp[:2]], [1.0, 0.0], [True, False], truncated=[True, True])
    stats = update_policy(
        TorchBackend(model, Optim.of(g, 1)), None, [all_cut], g, tok.pad_token_id, torch.device("cpu")
    )
    assert stats["masked_truncated"] == 2 and stats["grad_norm"] == 0.0  # nothing of theirs reached the gradient
    half_cut = Group("t", prompt, [comp, comp[:2]], [1.0, 0.0], [True, False], truncated=[False, True])
    stats = update_policy(
        TorchBackend(model, Optim.of(g, 1)), None, [half_cut], g, tok.pad_token_id, torch.device("cpu")
    )
    assert stats["masked_truncated"] == 1 and stats["grad_norm"] > 0.0
    unmasked = g.model_copy(update={"mask_truncated_completions": False})
    stats = update_policy(
        TorchBackend(model, Optim.of(unmasked, 1)), None, [all_cut], unmasked, tok.pad_token_id, torch.device("cpu")
    )
    assert stats["masked_truncated"] == 0 and stats["grad_norm"] > 0.0


def _metrics(out):
    return [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_grpo_raises_reward_on_the_copy_task(tmp_path, base_model, toy):
    from rlvrflow.training.sft import run_sft

    # SFT on noisy demonstrations (90% random digits) leaves the model right ~20% of the time
    rows = toy.copy_rows(200, 1, noise=0.9, digits=(7,))
    sft = run_sft(base_model, rows, toy.cfg(), tmp_path / "sft", seed=0)
    cfg = toy.cfg(grpo={"max_steps": 12, "prompts_per_step": 8, "num_generations": 8}, checkpoint={"every": 12})
    result = train_grpo(
        sft,
        toy.copy_rows(200, 1, digits=(7,)),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(40, 3, split="eval", digits=(7,)),
        EvalConfig(k=2, n_samples=4, max_new_tokens=12),
        tmp_path / "grpo",
        seed=0,
    )
    m = _metrics(tmp_path / "grpo")
    # step 1 samples the SFT model (before any update); the last steps sample the trained policy
    first, last = m[0]["correct_rate"], sum(x["correct_rate"] for x in m[-4:]) / 4
    assert last > first + 0.1, [round(x["correct_rate"], 2) for x in m]
    assert result["final"]["pass_at_1_sampled"] > result["baseline"]["pass_at_1_sampled"]
    assert (tmp_path / "grpo" / "curves.png").exists() and result["steps"] == 12


def test_beta_loads_a_reference_and_logs_kl(tmp_path, sft_model, toy):
    cfg = toy.cfg(
        grpo={"max_steps": 3, "beta": 0.1, "loss_agg": "sequence", "gradient_accumulation_steps": 2},
        checkpoint={"every": 3},
    )
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
    kls = [x["kl"] for x in _metrics(tmp_path) if "kl" in x]
    assert kls and kls[-1] > 0  # the policy has moved away from the reference by the last step


def test_the_entropy_bonus_keeps_the_policy_spread(tmp_path, sft_model, toy):
    """Same seed, same rollouts at step 1: with entropy_coef the logged entropy ends above the run without,
    and every update logs it."""
    ends = {}
    for coef in (0.0, 0.5):
        out = tmp_path / f"coef{coef}"
        cfg = toy.cfg(
            grpo={"max_steps": 6, "filter_zero_variance": False, "entropy_coef": coef}, checkpoint={"every": 6}
        )
        train_grpo(
            sft_model,
            toy.copy_rows(40, 1, noise=0.5),
            cfg,
            CurriculumConfig(dedup_window=0),
            RewardConfig(),
            toy.copy_rows(4, 3, split="eval"),
            EvalConfig(k=1, n_samples=1, max_new_tokens=12),
            out,
            seed=0,
        )
        m = _metrics(out)
        assert all(x["entropy"] > 0 for x in m if "kl" in x), m
        ends[coef] = m[-1]["entropy"]
        start = m[0]["entropy"]
    assert ends[0.5] > ends[0.0], ends
    assert ends[0.5] > start, (start, ends)  # the bonus alone, at this weight, raises it


def test_logged_entropy_is_the_token_mean_over_uneven_and_empty_micro_batches(sft_model):
    """3 rows over grad_accum 4: micro-batches of 1, 1, 1 and 0 rows with different lengths. The logged
    entropy is the mean over all completion tokens under the policy before the update, not a mean of
    micro-batch means (nor one that counts the empty micro-batch)."""
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.trainer import Optim
    from rlvrflow.training.config import GRPOConfig
    from rlvrflow.training.grpo import Group, update_policy
    from rlvrflow.training.modeling import completion_logprobs, load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(sft_model, torch.device("cpu"))
    prompt = tok("Copy 7\n").input_ids
    comps = [
        tok("Answer: 7", add_special_tokens=False).input_ids,
        tok("7", add_special_tokens=False).input_ids,
        tok("Answer: 77777777", add_special_tokens=False).input_ids,
    ]
    with torch.no_grad():
        _, mask, ent = completion_logprobs(
            model, [prompt] * 3, comps, tok.pad_token_id, torch.device("cpu"), entropy="value"
        )
    want = float(ent[mask].mean())
    g = GRPOConfig(num_generations=3, gradient_accumulation_steps=4, learning_rate=1e-3, warmup_steps=0)
    group = Group("t", prompt, comps, [1.0, 0.0, 0.5], [True, False, False])
    backend = TorchBackend(model, Optim.of(g, g.num_iterations))
    stats = update_policy(backend, None, [group], g, tok.pad_token_id, torch.device("cpu"))
    assert stats["entropy"] == pytest.approx(want, rel=1e-4)
    assert len({len(c) for c in comps}) == 3  # uneven, so a mean of per-micro-batch means would differ


def _run(sft, out, kill_after, *mode):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, str(Path(__file__).with_name("grpo_runner.py")), str(sft), str(out), str(kill_after), *mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_and_matches_an_uninterrupted_run(tmp_path, sft_model):
    from safetensors.torch import load_file

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert _run(sft_model, straight, 0).returncode == 0
    crash = _run(sft_model, killed, 3)
    assert crash.returncode == -9, crash.stderr[-2000:]
    assert sorted(p.name for p in killed.glob("step_*")) == ["step_000002"]  # step 3 was never saved
    resumed = _run(sft_model, killed, 0)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [x["step"] for x in _metrics(killed)] == [1, 2, 3, 4, 5]  # step 3 redone once, not twice
    evals = [json.loads(line)["step"] for line in (killed / "evals.jsonl").read_text().splitlines()]
    assert evals == [0, 2, 4, 5]
    a = load_file(straight / "step_000005" / "model.safetensors")
    b = load_file(killed / "step_000005" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(straight) == _metrics(killed)
    # TensorBoard: the events up to the checkpoint were flushed before the kill, the resume hid the rest
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(killed / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("grpo/reward_mean")] == [1, 2, 3, 4, 5]
    assert [e.step for e in acc.Scalars("eval/pass_at_1_greedy")] == [0, 2, 4, 5]


class _ShardedParams:
    """A stand-in for DeepSpeedBackend under ZeRO-3 that holds `iter_gathered_params`' contract to the
    letter: a yielded tensor is valid only inside the loop body (here its storage is emptied as soon as
    the iteration moves on; a gather implementation may reuse or free its buffer)."""

    stage = 3

    def __init__(self, weights: dict[str, torch.Tensor]):
        self.weights, self.iterated = weights, 0

    def named_parameters(self):
        for name, full in self.weights.items():
            gathered = full.clone()
            yield name, gathered
            gathered.set_(torch.empty(0))  # the gather's storage is gone after the loop body
            self.iterated += 1


class _RecordingEngine:
    def __init__(self):
        self.loaded = None

    def load_weights(self, pairs):
        self.loaded = {name: t for name, t in pairs}  # what vLLM would read after the last gather


def test_weight_sync_to_vllm_survives_zero3_gathers_and_non_main_ranks_take_part():
    """Rank 0 hands vLLM copies of ZeRO-3's gathered parameters (a gathered tensor is valid only inside the
    loop body); a rank without an engine still walks the gather, a collective every rank must join."""
    from rlvrflow.training.grpo import _sync_weights

    weights = {"a.weight": torch.arange(6.0).reshape(2, 3), "b.bias": torch.ones(4)}
    main, engine = _ShardedParams(weights), _RecordingEngine()
    _sync_weights(engine, main, "vllm")
    assert set(engine.loaded) == set(weights)
    for name, full in weights.items():
        assert torch.equal(engine.loaded[name], full), name
    other = _ShardedParams(weights)
    _sync_weights(None, other, "vllm")  # a non-main rank: no engine, but it joins every gather
    assert other.iterated == len(weights)
    untouched = _ShardedParams(weights)
    _sync_weights(object(), untouched, "hf")  # HF rollouts generate with the module itself: no sync
    assert untouched.iterated == 0


def test_the_tally_tells_all_wrong_from_all_right_zero_variance_groups():
    from rlvrflow.training.grpo_groups import Tally

    tally = Tally()
    assert not tally.add([1.1, 1.1], [True, True], [[1], [2]], drop_zero=True)  # learned since tiering
    assert not tally.add([0.0, 0.0], [False, False], [[1], [2]], drop_zero=True)  # too hard
    assert not tally.add([0.1, 0.1], [False, False], [[1], [2]], drop_zero=True)
    assert tally.add([1.1, 0.0], [True, False], [[1], [2]], drop_zero=False)
    assert tally.add([1.1, 1.1], [True, True], [[1], [2]], drop_zero=False)  # kept: filtering is off
    info = tally.info(used=2)
    assert (info["groups_seen"], info["groups_zero_variance"], info["groups_zero_solved"]) == (5, 3, 1)


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_the_adaptive_sampler_exactly(tmp_path, sft_model):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert _run(sft_model, straight, 0, "adaptive").returncode == 0
    assert _run(sft_model, killed, 3, "adaptive").returncode == -9
    resumed = _run(sft_model, killed, 0, "adaptive")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _metrics(straight) == _metrics(killed)  # the same prompts drawn after the resume, same rewards
    a = torch.load(straight / "step_000005" / "state.pt", weights_only=False)["sampler"]
    b = torch.load(killed / "step_000005" / "state.pt", weights_only=False)["sampler"]
    assert a["kind"] == "adaptive" and a == b


def _three_steps(sft_model, toy, rows, cur, out_dir):
    """Three GRPO steps of 4 prompts x 4 drawing from `rows` with curriculum `cur`, checkpointed at step 3:
    (train_grpo's summary, the checkpoint's sampler state)."""
    cfg = toy.cfg(grpo={"max_steps": 3, "prompts_per_step": 4, "num_generations": 4}, checkpoint={"every": 3})
    eval_rows, eval_cfg = toy.copy_rows(4, 3, split="eval"), EvalConfig(k=1, n_samples=1, max_new_tokens=12)
    out = train_grpo(sft_model, rows, cfg, cur, RewardConfig(), eval_rows, eval_cfg, out_dir, seed=0)
    return out, torch.load(out_dir / "step_000003" / "state.pt", weights_only=False)["sampler"]


def test_the_adaptive_sampler_runs_in_the_loop_and_its_state_is_checkpointed(tmp_path, sft_model, toy):
    import polars as pl

    rows = toy.copy_rows(30, 1).with_columns(
        pl.Series("n_correct", [i % 9 for i in range(30)]), pl.lit(8).alias("n_samples")
    )
    cur = CurriculumConfig(sampler="adaptive", adaptive={"step": 1.0}, dedup_window=0)
    _, state = _three_steps(sft_model, toy, rows, cur, tmp_path)
    assert state["kind"] == "adaptive" and state["batches"] >= 3
    assert json.loads((tmp_path / "step_000003" / "meta.json").read_text())["sampler"] == "adaptive"
    drawn_arms = {int(pid[-4:]) % 9 for pid in state["last_drawn"]}
    assert len(state["last_drawn"]) >= 4
    # step 1.0: every drawn arm's value is now the share of mixed groups in its last batch; the others keep
    # the prior (the Beta-binomial chance for a group of 4)
    from rlvrflow.curriculum.adaptive import beta_from_counts, mixed_chance

    a, b = beta_from_counts([(i % 9, 8) for i in range(30)])
    moved = {k for _, k, _, v in state["value"] if v != pytest.approx(mixed_chance(k, 8, a, b, 4))}
    assert moved == drawn_arms


def test_the_uniform_sampler_runs_in_the_loop_and_its_state_is_checkpointed(tmp_path, sft_model, toy):
    import polars as pl

    from rlvrflow.curriculum import UniformSampler

    rows = toy.copy_rows(30, 1)
    # every prompt tiered too_hard, whose weight is 0: a quota sampler would have nothing to draw by weight
    cur = CurriculumConfig(sampler="uniform", weights={"learnable": 1.0, "too_hard": 0.0, "too_easy": 0.0})
    out, state = _three_steps(sft_model, toy, rows.with_columns(tier=pl.lit("too_hard")), cur, tmp_path)
    seen = out["groups_seen"]
    # one draw per round, refills included (3 steps of 4 prompts: more than 12 ids drawn means a refill
    # round, which is a draw of its own); within the first epoch every id drawn left the queue once
    assert state["kind"] == "uniform" and state["batches"] >= 3 and (seen > 12) == (state["batches"] > 3)
    assert len(state["queue"]) == rows.height - seen
    # the checkpoint's meta.json names the sampler too: the doctor of a run stopped before summary.json
    assert json.loads((tmp_path / "step_000003" / "meta.json").read_text())["sampler"] == "uniform"
    resumed = UniformSampler(rows, seed=0, batch_size=4)
    resumed.load_state_dict(state)
    assert resumed.next_batch() == state["queue"][:4]


@pytest.mark.parametrize("trainer_temperature, clipped", [(1.5, False), (1.0, True)])
def test_async_old_logprobs_and_the_loss_score_the_same_tempered_policy(sft_model, trainer_temperature, clipped):
    """An async group carries the generator's log-probs as its old policy. Drawn at temperature 1.5, they
    must equal what the loss scores at the trainer's temperature before any update, so the first
    ratio is 1 and nothing is clipped (eps 1e-3); a trainer at temperature 1 against the same rollouts
    (what scoring raw log-probs did) has the clip bind on many tokens."""
    from rlvrflow.engines import SamplingParams
    from rlvrflow.engines.hf_engine import HFEngine
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.trainer import Optim
    from rlvrflow.training.config import GRPOConfig
    from rlvrflow.training.grpo import Group, update_policy
    from rlvrflow.training.modeling import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(sft_model, torch.device("cpu"))
    prompt = "Copy 7\n"
    drawn = HFEngine(model, tok, batch_size=8).generate(
        [prompt], 6, SamplingParams(temperature=1.5, max_new_tokens=8), seed=1
    )[0]
    group = Group(
        "t",
        tok(prompt).input_ids,
        [list(c.token_ids) for c in drawn],
        [1.0, 0.0, 1.0, 0.0, 0.5, 0.5],
        [True, False, True, False, False, False],
        old_logprobs=[list(c.logprobs) for c in drawn],
    )
    g = GRPOConfig(
        num_generations=6,
        learning_rate=1e-6,
        warmup_steps=0,
        epsilon=1e-3,
        epsilon_high=1e-3,
        num_iterations=1,
        temperature=trainer_temperature,
    )
    backend = TorchBackend(model, Optim.of(g, g.num_iterations))
    stats = update_policy(backend, None, [group], g, tok.pad_token_id, torch.device("cpu"))
    if clipped:
        assert stats["clip_fraction"] > 0.25, stats
    else:
        assert stats["clip_fraction"] == 0.0, stats
