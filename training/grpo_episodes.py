"""Episodes inside the GRPO loop (training/grpo.py): the sampler's ids of episode rows (an environment's
category, verifier `episode`) become GRPO groups of whole conversations, beside the single-reply groups
of the same step, and both kinds enter one loss and one optimizer step.

    player = EpisodePlayer(engine, rows, fmt, g, reward_cfg, seed)   # engine: the live policy, raw prompts
    reply_ids = player.take(ids, sampler, step, rnd)                 # plays the episode ids among the draw
    batch = EpisodeBatch(player.kept, tokenizer, fmt, g, device)     # the step's groups, rendered for the loss

`take` sits in `collect_groups`' draw: each round's episode ids are played there and then (G episodes
each, every live conversation's next message in one engine call per turn: training/episodes.py
`play_episodes`, each message at most `episode_max_new_tokens`), rewarded by `verifiers.episode.episode_reward`
with the spec's format and correctness weights (and its default turn penalty), reported to the sampler
(online re-tiering), and kept when their rewards differ (or always, without filter_zero_variance); the
single-reply ids go on to the usual scoring. Kept episode groups count toward `prompts_per_step`, so a
refill round draws only what both kinds left unfilled.

`EpisodeBatch` renders each kept conversation in the run's episode format (token ids and the policy
mask: only the policy's own tokens are trained) and adds its clipped surrogate to the step's loss with
the step's token (or sequence) totals of both kinds as denominators, so one `backend.step()` per
iteration follows one learning-rate schedule. With `beta > 0` the reference scores the conversations
as it scores replies; the entropy bonus covers single replies only.

Per step, `info()` gives the episode figures under `episode_` keys: groups seen, used and
zero-variance, reward and success rates, and training/episodes.py `episode_stats`' turns, malformed
calls, turn-limit stops and tool calls (training/README.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvrflow.training.episodes import episode_stats, play_episodes


@dataclass
class EpisodeGroup:
    """One row's G episodes, their rewards and the environment's tool schemas."""

    task_id: str
    episodes: list
    rewards: list[float]
    tools: list[dict]


class EpisodePlayer:
    """Plays the episode ids of the sampler's draws; `kept` holds the step's groups with reward variance."""

    def __init__(self, engine, rows: dict[str, dict], fmt, g, reward_cfg, seed: int) -> None:
        from rlvrflow.verifiers.episode import EpisodeRewardConfig

        self.engine, self.rows, self.fmt, self.g, self.seed = engine, rows, fmt, g, seed
        self.reward = EpisodeRewardConfig(
            format_weight=reward_cfg.format_weight, correctness_weight=reward_cfg.correctness_weight
        )
        self.envs: dict[str, object] = {}
        self.max_positions: int | None = None  # the policy's, which every rendered conversation must fit
        self.start_step()

    def start_step(self) -> None:
        self.kept: list[EpisodeGroup] = []
        self.played: list = []
        self.rewards: list[float] = []
        self.seen = self.zero = 0

    def _env(self, params: str):
        from rlvrflow.verifiers.environment import Environment

        return self.envs.get(params) or self.envs.setdefault(params, Environment.model_validate_json(params))

    def take(self, ids: list[str], sampler, step: int, rnd: int) -> list[str]:
        """Play the episode rows among `ids`, report their success rates, keep their groups; the other ids."""
        from rlvrflow.engines import SamplingParams
        from rlvrflow.training.grpo_groups import rollout_seed

        mine = [i for i in ids if i in self.rows]
        if not mine:
            return ids
        g, n = self.g, self.g.num_generations
        sampling = SamplingParams(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.episode_max_new_tokens)
        groups: dict[str, EpisodeGroup] = {}
        for k, params in enumerate(dict.fromkeys(self.rows[i]["verifier_params"] for i in mine)):
            env, these = self._env(params), [i for i in mine if self.rows[i]["verifier_params"] == params]
            seed = rollout_seed(self.seed, step, rnd) + 7 * k
            played = play_episodes(
                self.engine, env, [self.rows[i] for i in these for _ in range(n)], self.fmt, sampling, seed
            )
            for j, i in enumerate(these):
                eps = played[j * n : (j + 1) * n]
                groups[i] = EpisodeGroup(i, eps, [self._reward(e) for e in eps], env.schemas())
        ordered = [groups[i] for i in mine]
        sampler.report(mine, [sum(e.verdict.correct for e in grp.episodes) / n for grp in ordered])
        for grp in ordered:
            flat = len(set(grp.rewards)) == 1
            self.seen, self.zero = self.seen + 1, self.zero + flat
            self.played += grp.episodes
            self.rewards += grp.rewards
            if not (flat and g.filter_zero_variance):
                self.kept.append(grp)
        return [i for i in ids if i not in self.rows]

    def _reward(self, episode) -> float:
        from rlvrflow.verifiers.episode import episode_reward

        return episode_reward(episode, self.reward).total

    def info(self) -> dict:
        """The step's episode figures, `episode_`-prefixed (none when the step drew no episode row)."""
        if not self.seen:
            return {}
        stats = episode_stats(self.played, self.rewards)
        out = {
            "groups_seen": self.seen,
            "groups_used": len(self.kept),
            "groups_zero_variance": self.zero,
            **{k: v for k, v in stats.items() if not isinstance(v, dict)},
        }
        return {f"episode_{k}": v for k, v in out.items()}


class EpisodeBatch:
    """The step's kept episode groups as the loss reads them: rendered conversations, advantages, totals."""

    def __init__(self, groups: list[EpisodeGroup], tokenizer, fmt, g, device, max_positions: int | None = None) -> None:
        import torch

        from rlvrflow.training.grpo_math import group_advantages

        rewards = torch.tensor([grp.rewards for grp in groups], dtype=torch.float32)  # (P, G)
        self.adv = group_advantages(rewards, g.scale_rewards == "group").flatten().tolist()  # (B,)
        self.rendered = [fmt.render(tokenizer, e, grp.tools) for grp in groups for e in grp.episodes]
        longest = max(len(ids) for ids, _ in self.rendered)
        if max_positions is not None and longest > max_positions:
            raise ValueError(
                f"an episode renders to {longest} tokens, over the model's {max_positions} positions: lower the "
                "environment's max_turns (verifiers.rules[].environment) or generation.episode_max_new_tokens, use a "
                "model with a longer context, or set training.episodes: false to train without the episodes"
            )
        self.tokens = float(sum(sum(m[1:]) for _, m in self.rendered))  # the positions the loss reads
        self.seqs = float(len(self.rendered))
        self.pad_id, self.g, self.device = tokenizer.pad_token_id, g, device
        n_micro = max(1, min(g.gradient_accumulation_steps, len(self.rendered)))
        self.micro = [list(range(len(self.rendered)))[k::n_micro] for k in range(n_micro)]
        self.old: dict[int, object] = {}
        self.ref: dict[int, object] = {}

    def _logps(self, backend, model, idx: list[int], grad: bool):
        import torch

        from rlvrflow.training.episodes import conversation_logprobs

        with torch.set_grad_enabled(grad), backend.autocast():
            rendered = [self.rendered[i] for i in idx]
            return conversation_logprobs(model, rendered, self.pad_id, self.device, self.g.temperature)

    def prepare(self, backend, ref) -> None:
        """The old policy's log-probs (num_iterations > 1) and the reference's (beta > 0), before any update."""
        if self.g.num_iterations > 1:
            self.old = {k: self._logps(backend, backend.module, mb, False)[0] for k, mb in enumerate(self.micro)}
        if ref is not None:
            self.ref = {k: self._logps(backend, ref, mb, False)[0] for k, mb in enumerate(self.micro)}

    def backward(self, backend, total_tokens: float, total_seqs: float) -> tuple[float, dict, float]:
        """Backward of the conversations' share of the step's loss: (loss, summed stats, tokens)."""
        import torch

        from rlvrflow.training.grpo_math import grpo_loss

        g, loss_sum, sums, tokens = self.g, 0.0, {"clip_fraction": 0.0, "kl": 0.0}, 0.0
        for k, mb in enumerate(self.micro):
            logp, mask = self._logps(backend, backend.module, mb, True)  # (b, L-1) each
            adv = torch.tensor([self.adv[i] for i in mb], device=self.device)
            old = self.old.get(k)
            loss, st = grpo_loss(
                logp,
                old if old is not None else logp.detach(),
                self.ref.get(k),
                adv,
                mask,
                g.epsilon,
                g.epsilon_high,
                g.beta,
                g.loss_agg,
                total_tokens=total_tokens,
                total_seqs=total_seqs,
            )
            backend.backward(loss)
            n = float(mask.sum())
            loss_sum += float(loss.detach())
            for key in sums:
                sums[key] += st.get(key, 0.0) * n
            tokens += n
        return loss_sum, sums, tokens


def check_fits(rows: dict[str, dict], tokenizer, fmt, g, max_positions: int | None) -> None:
    """Before the first step: every episode's opening (instructions and ticket) plus one message must fit
    the model's positions, else a ValueError naming what to change (played episodes only grow)."""
    if max_positions is None:
        return
    from rlvrflow.verifiers.environment import Environment

    envs: dict[str, Environment] = {}
    longest, worst = 0, None
    for row in rows.values():
        params = row["verifier_params"]
        env = envs.get(params) or envs.setdefault(params, Environment.model_validate_json(params))
        opening = [{"role": "system", "content": env.instructions}] if env.instructions else []
        opening.append({"role": "user", "content": str(row["prompt"])})
        n = len(tokenizer(fmt.prompt(opening, env.schemas()), add_special_tokens=False).input_ids)
        if n > longest:
            longest, worst = n, row["id"]
    if longest + g.episode_max_new_tokens > max_positions:
        raise ValueError(
            f"episode row {worst!r} opens with {longest} tokens; with one message of "
            f"generation.episode_max_new_tokens={g.episode_max_new_tokens} that is over the model's {max_positions} positions, and every turn adds more: "
            "use a model with a longer context, shorten the environment's instructions or the prompt template, "
            "or set training.episodes: false to train without the episodes"
        )


def check_supported(g, distributed: bool) -> None:
    """Where the loop cannot play episodes yet: an error naming the field and the fix."""
    fix = "or set training.episodes: false to train without the environment's rows"
    if g.rollout_mode == "async":
        raise ValueError(f"training.grpo.rollout_mode 'async' does not play episodes yet; set rollout_mode: sync {fix}")
    if g.rollout == "vllm":
        raise ValueError(f"training.grpo.rollout 'vllm' does not play episodes yet; set rollout: hf {fix}")
    if distributed or g.backend == "deepspeed":
        raise ValueError(
            "GRPO on episodes runs in one process with the torch backend (not several ranks or DeepSpeed); "
            f"launch one process with training.grpo.backend: torch {fix}"
        )
