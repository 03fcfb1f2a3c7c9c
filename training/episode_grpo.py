"""GRPO on episodes: groups of G conversations per prompt, rewarded by the environment's outcome,
the loss on the policy's own tokens of each whole conversation. On the shared trainer skeleton.

    summary = train_episode_grpo(sft_dir, env, train_rows, eval_rows, EpisodeGRPOConfig(max_steps=40),
                                 out_dir="runs/agent/grpo", seed=0)

One step: draw `prompts_per_step` rows (`EpisodeSampler`, a seeded pass over the rows, saved with
each checkpoint); play `num_generations` episodes of each with the live policy through the HF engine,
all conversations of the step batched per turn (`EpisodeRollouts`, the third collector beside
training/grpo.py's SyncRollouts and AsyncRollouts, with their calls); reward each with
`verifiers.episode.episode_reward` (outcome, format, turn penalty); drop the groups whose rewards are
all equal (no gradient); group-relative advantages and `num_iterations` passes of grpo_math's
clipped surrogate over every rendered conversation, masked to the policy's tokens. The Trainer does
the rest as for GRPO: the held-out eval at step 0 and every `checkpoint.every` steps (greedy
episodes, training/episodes.py `evaluate_episodes`), checkpoints with optimizer, schedule, sampler and
RNG, resume from the newest, metrics.jsonl, evals.jsonl, summary.json and curves.png.

Rendering is an `EpisodeFormat` (training/episode_format.py; `PLAIN` for the character model).
Left out: a KL term to a reference, refill rounds for zero-variance groups, vLLM rollouts, several
ranks and LoRA (one process, plain torch). The chain's GRPO stage does not run this trainer: it plays
a spec's episode rows inside `train_grpo` beside the single replies (training/grpo_episodes.py); this
one trains on episodes alone (bench/agent_target.py).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlvrflow.training.config import CheckpointConfig
from rlvrflow.training.episode_format import PLAIN, EpisodeFormat
from rlvrflow.training.episodes import conversation_logprobs, episode_stats, evaluate_episodes, play_episodes
from rlvrflow.training.trainer import HeldOut, Optim, RunState, Trainer


@dataclass(frozen=True)
class EpisodeGRPOConfig:
    max_steps: int = 40
    prompts_per_step: int = 8
    num_generations: int = 8
    learning_rate: float = 3e-4
    weight_decay: float = 0.0
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    max_new_tokens: int = 96  # per assistant message
    num_iterations: int = 1
    epsilon: float = 0.2
    epsilon_high: float = 0.28
    loss_agg: str = "token"  # token | sequence (grpo_math.aggregate)
    scale_rewards: str = "group"  # group: divide by the group's std; none: centre only
    filter_zero_variance: bool = True
    logging_steps: int = 1
    eval_max_new_tokens: int = 96
    checkpoint: CheckpointConfig = field(default_factory=lambda: CheckpointConfig(every=20))
    report_to: tuple[str, ...] = ()
    reward: object = None  # a verifiers.episode.EpisodeRewardConfig; None: its weights, the env's turn_penalty

    def __post_init__(self) -> None:
        for name in (
            "max_steps",
            "prompts_per_step",
            "num_generations",
            "num_iterations",
            "max_new_tokens",
            "logging_steps",
            "eval_max_new_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"EpisodeGRPOConfig.{name}={getattr(self, name)} must be >= 1")
        if self.num_generations < 2:
            raise ValueError("EpisodeGRPOConfig.num_generations must be >= 2: a group of one has no advantage")
        if self.temperature <= 0:
            raise ValueError("EpisodeGRPOConfig.temperature must be > 0: GRPO samples its episodes")
        if self.loss_agg not in ("token", "sequence"):
            raise ValueError(f"EpisodeGRPOConfig.loss_agg={self.loss_agg!r} must be 'token' or 'sequence'")
        if self.scale_rewards not in ("group", "none"):
            raise ValueError(f"EpisodeGRPOConfig.scale_rewards={self.scale_rewards!r} must be 'group' or 'none'")

    def optim(self) -> Optim:
        return Optim(
            self.learning_rate,
            self.weight_decay,
            self.warmup_steps * self.num_iterations,
            self.max_steps * self.num_iterations,
            self.min_lr_ratio,
            self.max_grad_norm,
        )


class EpisodeSampler:
    """Rows in seeded passes: pass k is a permutation drawn with (seed, k); `pos` is the whole state."""

    def __init__(self, n_rows: int, seed: int) -> None:
        if n_rows < 1:
            raise ValueError("episode GRPO needs at least one training row")
        self.n, self.seed, self.pos = n_rows, seed, 0

    def next_batch(self, k: int) -> list[int]:
        out = []
        for p in range(self.pos, self.pos + k):
            order = list(range(self.n))
            random.Random(f"{self.seed}:{p // self.n}").shuffle(order)
            out.append(order[p % self.n])
        self.pos += k
        return out

    def state_dict(self) -> dict:
        return {"pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        self.pos = int(state["pos"])


@dataclass
class EpisodeRun(RunState):
    """The skeleton's run state plus the group counts, so a resumed run's totals are the whole run's."""

    groups_seen: int = 0
    groups_zero_variance: int = 0
    groups_used: int = 0


GROUP_COUNTS = ("groups_seen", "groups_zero_variance", "groups_used")


@dataclass
class EpisodeGroup:
    """One row's G episodes, their rewards and whether each reached the right end state."""

    task_id: str
    episodes: list
    rewards: list[float]
    correct: list[bool]


class EpisodeRollouts:
    """Episodes in the trainer's process, with the live policy (the HF engine shares its weights):
    training/grpo.py's collector calls (start, collect, updated, state_dict, summary, a context)."""

    def __init__(self, engine, env, rows: list[dict], fmt: EpisodeFormat, cfg: EpisodeGRPOConfig, seed: int) -> None:
        self.engine, self.env, self.rows, self.fmt, self.cfg, self.seed = engine, env, rows, fmt, cfg, seed

    def __enter__(self) -> "EpisodeRollouts":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def start(self, run, backend) -> None:
        pass  # the engine generates with the trained module itself: nothing to sync at a resume

    def collect(self, sampler: EpisodeSampler, step: int, run) -> tuple[list[EpisodeGroup], dict]:
        import torch

        from rlvrflow.engines import SamplingParams
        from rlvrflow.training.grpo_groups import rollout_seed
        from rlvrflow.training.grpo_math import zero_variance_groups
        from rlvrflow.verifiers.episode import EpisodeRewardConfig, episode_reward

        c, g = self.cfg, self.cfg.num_generations
        picked = [self.rows[i] for i in sampler.next_batch(c.prompts_per_step)]
        sampling = SamplingParams(temperature=c.temperature, max_new_tokens=c.max_new_tokens)
        episodes = play_episodes(
            self.engine,
            self.env,
            [r for r in picked for _ in range(g)],
            self.fmt,
            sampling,
            rollout_seed(self.seed, step, 0),
        )
        reward = c.reward if c.reward is not None else EpisodeRewardConfig.of(self.env)
        rewards = [episode_reward(e, reward).total for e in episodes]
        groups = [
            EpisodeGroup(
                str(r["id"]),
                episodes[k * g : (k + 1) * g],
                rewards[k * g : (k + 1) * g],
                [e.verdict.status == "correct" for e in episodes[k * g : (k + 1) * g]],
            )
            for k, r in enumerate(picked)
        ]
        flat = zero_variance_groups(torch.tensor([grp.rewards for grp in groups])).tolist()
        kept = [grp for grp, z in zip(groups, flat) if not (z and c.filter_zero_variance)]
        stats = episode_stats(episodes, rewards)
        info = {
            **{k: v for k, v in stats.items() if not isinstance(v, dict)},
            "correct_rate": stats["success_rate"],
            "groups_seen": len(groups),
            "groups_used": len(kept),
            "groups_zero_variance": sum(flat),
            "zero_variance_fraction": sum(flat) / len(groups),
            "groups_zero_solved": sum(z and all(grp.correct) for grp, z in zip(groups, flat)),
        }
        return kept, info

    def updated(self, backend, step: int, trained: bool) -> None:
        pass

    def state_dict(self) -> dict:
        return {}  # nothing drawn ahead of the step

    def summary(self) -> dict:
        return {}


def update_on_episodes(
    backend,
    groups: list[EpisodeGroup],
    cfg: EpisodeGRPOConfig,
    tokenizer,
    fmt: EpisodeFormat,
    tools: list[dict],
    device,
) -> dict:
    """`num_iterations` optimizer steps on the clipped GRPO loss of the groups' whole conversations,
    only the policy's tokens in it; returns loss diagnostics."""
    import torch

    from rlvrflow.training.grpo_episodes import policy_span
    from rlvrflow.training.grpo_math import group_advantages, grpo_loss

    rewards = torch.tensor([grp.rewards for grp in groups], dtype=torch.float32)  # (P, G)
    adv = group_advantages(rewards, cfg.scale_rewards == "group").flatten().to(device)  # (B,)
    # up to the last policy token: a turn-limit or context_full stop's last tool results may pass the positions
    rendered = [policy_span(fmt.render(tokenizer, e, tools)) for grp in groups for e in grp.episodes]

    def score(grad: bool):
        with torch.set_grad_enabled(grad), backend.autocast():
            return conversation_logprobs(backend.module, rendered, tokenizer.pad_token_id, device, cfg.temperature)

    old = score(False)[0] if cfg.num_iterations > 1 else None  # the policy that played the episodes
    stats = {"loss": 0.0, "policy_tokens": float(sum(sum(m) for _, m in rendered)) / len(rendered)}
    for _ in range(cfg.num_iterations):
        logp, mask = score(True)  # (B, L-1) each
        loss, st = grpo_loss(
            logp,
            old if old is not None else logp.detach(),
            None,
            adv,
            mask,
            cfg.epsilon,
            cfg.epsilon_high,
            0.0,
            cfg.loss_agg,
        )
        backend.zero_grad()
        backend.backward(loss)
        stats["grad_norm"] = backend.step()
        stats["loss"] += float(loss.detach()) / cfg.num_iterations
        stats["clip_fraction"] = st["clip_fraction"]
    return stats


class EpisodeTrainer(Trainer):
    """The shared Trainer with the held-out eval on greedy episodes instead of single replies."""

    def __init__(self, *args, evaluate_fn, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.evaluate_fn = evaluate_fn

    def evaluate(self, step: int) -> dict:
        import json

        from rlvrflow.io import append_jsonl, write_text

        result = self.evaluate_fn(self.backend.module)
        by_prompt, samples = result.pop("by_prompt"), result.pop("samples")
        record = {"step": step, **result}
        append_jsonl(self.out / "evals.jsonl", record)
        # the first transcripts, whole; save() copies them into the checkpoint beside its eval
        path = self.out / "samples" / f"step_{step:06d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, "".join(json.dumps(t, default=str) + "\n" for t in samples))
        self.run.evals.append(record)
        if not self.run.held_out_first:
            self.run.held_out_first = by_prompt
        self.run.held_out_last = by_prompt
        self.scalars.add("eval", {k: v for k, v in record.items() if not isinstance(v, dict)}, step)
        self._kept = None
        return record


def _step_line(m: dict, total: int) -> str:
    return (
        f"episode grpo step {m['step']}/{total} reward {m['reward_mean']:.3f} success {m['correct_rate']:.1%} "
        f"zero-variance {m['zero_variance_fraction']:.0%} turns {m['turns_mean']:.2f} "
        f"malformed {m['malformed_rate']:.0%} loss {m.get('loss', 0.0):.4f} {m['step_seconds']:.2f}s"
    )


def train_episode_grpo(
    start_model,
    env,
    train_rows: list[dict],
    eval_rows: list[dict],
    cfg: EpisodeGRPOConfig,
    out_dir,
    seed: int,
    fmt: EpisodeFormat = PLAIN,
    device: str = "cpu",
    on_progress=None,
) -> dict:
    """GRPO on episodes from `start_model` (an HF folder, e.g. the SFT model); resumes from out_dir's
    newest checkpoint. Rows: dicts with `id`, `prompt`, `reference` (the outcome rows, JSON). Returns
    the Trainer's summary plus the group counts. on_progress(step, total, metrics) after each step."""
    import torch

    from rlvrflow.engines import HFEngine
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training import checkpoint as ckpt
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.modeling import load_policy
    from rlvrflow.training.report import plot_curves

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device)
    torch.manual_seed(seed)
    resume = ckpt.latest_checkpoint(out)
    policy, tokenizer = load_policy(resume or start_model, dev, torch.float32)
    backend = TorchBackend(policy, cfg.optim())
    tools = env.schemas()
    engine = HFEngine(policy, tokenizer, device=device, batch_size=cfg.prompts_per_step * cfg.num_generations)
    sampler = EpisodeSampler(len(train_rows), seed)
    rollouts = EpisodeRollouts(engine, env, list(train_rows), fmt, cfg, seed)

    def evaluate_fn(model) -> dict:
        return evaluate_episodes(
            model,
            tokenizer,
            env,
            eval_rows,
            fmt,
            cfg.eval_max_new_tokens,
            device,
            cfg.prompts_per_step * cfg.num_generations,
        )

    trainer = EpisodeTrainer(
        "episode_grpo",
        out,
        cfg,
        backend,
        tokenizer,
        PromptFormat(),
        HeldOut(eval_rows, None, seed),
        cfg.max_steps,
        cfg.logging_steps,
        lambda m: _step_line(m, cfg.max_steps),
        dev,
        parts={"sampler": sampler},
        state_cls=EpisodeRun,
        evaluate_fn=evaluate_fn,
    )
    with trainer:
        run = trainer.start(resume)
        with rollouts:
            rollouts.start(run, backend)
            for step in range(run.step, cfg.max_steps):
                t_step = time.perf_counter()
                groups, info = rollouts.collect(sampler, step, run)
                for k in GROUP_COUNTS:
                    setattr(run, k, getattr(run, k) + info[k])
                upd = {"skipped": 1}  # every group had equal rewards: nothing to learn from this step
                if groups:
                    upd = update_on_episodes(backend, groups, cfg, tokenizer, fmt, tools, dev)
                run.step = step + 1
                rollouts.updated(backend, run.step, bool(groups))
                metrics = {"step": run.step, **info, **upd, "lr": backend.lr()}
                trainer.log_step(metrics, time.perf_counter() - t_step, success=f"{info['correct_rate']:.0%}")
                if trainer.checkpoint_due(run.step):
                    trainer.save(trainer.evaluate(run.step))
                if on_progress is not None:
                    on_progress(run.step, cfg.max_steps, metrics)

    def plot(metrics, evals, path):
        return plot_curves(metrics, evals, path, eval_keys=("pass_at_1_greedy", "format_rate"), trainer="episode GRPO")

    extra = {k: getattr(run, k) for k in GROUP_COUNTS}
    extra["zero_variance_fraction"] = run.groups_zero_variance / max(1, run.groups_seen)
    return trainer.finish(start_model, extra, plot=plot)
