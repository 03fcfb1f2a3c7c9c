"""Episodes inside the GRPO loop (training/grpo.py): the sampler's ids of episode rows (an environment's
category, verifier `episode`) become GRPO groups of whole conversations, beside the single-reply groups
of the same step, and both kinds enter one loss and one optimizer step.

    player = EpisodePlayer(engine, rows, fmt, g, reward_cfg, seed)   # engine: the live policy, raw prompts
    reply_ids = player.take(ids, sampler, step, rnd)                 # plays the episode ids among the draw
    batch = EpisodeBatch(player.kept, tokenizer, fmt, g, device)     # the step's groups, rendered for the loss

`take` sits in `collect_groups`' draw: each round's episode ids are played there and then (G episodes
each, every live conversation's next message in one engine call per turn: training/episodes.py
`play_episodes`, each message at most `episode_max_new_tokens`), rewarded by `verifiers.episode.episode_reward`
with `verifiers.reward`'s format and correctness weights and its `turn_penalty`, reported to the sampler
(online re-tiering), and kept when their rewards differ (`grpo_math.zero_variance_groups`, its tolerance)
or always, without filter_zero_variance: counted as the replies' Tally counts them (zero-variance only
when dropped). Each environment's episodes in a round sample from `episode_seed`, apart from the round's
single replies. The single-reply ids go on to the usual scoring. Kept episode groups count toward `prompts_per_step`, so a
refill round draws only what both kinds left unfilled.

`EpisodeBatch` renders each kept conversation in the run's episode format (token ids and the policy
mask: only the policy's own tokens are trained) and adds its clipped surrogate to the step's loss with
the step's token (or sequence) totals of both kinds as denominators, so one `backend.step()` per
iteration follows one learning-rate schedule. An episode stopped at `context_full` (no room in the
model's positions for another message; training/episodes.py) keeps its place in its group's advantage
baseline but is left out of the loss, and so is one whose re-encoded rendering passes the positions
(`cut`, `overlong`); each rendering is cut after its last policy token (`policy_span`). With
`mask_truncated_completions` a message the engine cut at `episode_max_new_tokens` weighs nothing
(`without_turns`), as a cut single reply weighs nothing. With `beta > 0` the reference scores the conversations
as it scores replies, and `entropy_coef` adds its bonus on the policy's tokens of both kinds.

Per step, `info()` gives the episode figures under `episode_` keys: groups seen, used and
zero-variance, reward and success rates, and training/episodes.py `episode_stats`' turns, malformed
calls, turn-limit stops and tool calls (training/README.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvrflow.training.episode_format import PLAIN
from rlvrflow.training.episodes import episode_stats, play_episodes, stop_length
from rlvrflow.verifiers.episode import CONTEXT_FULL


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
        self.engine, self.rows, self.fmt, self.g, self.seed = engine, rows, fmt, g, seed
        from rlvrflow.verifiers.episode import EpisodeRewardConfig

        self.reward = EpisodeRewardConfig.of(reward_cfg)
        self.envs: dict[str, object] = {}
        self.max_positions: int | None = None  # the policy's, which every rendered conversation must fit
        self.start_step()

    def start_step(self) -> None:
        self.kept: list[EpisodeGroup] = []
        self.played: list = []
        self.rewards: list[float] = []
        self.seen = self.zero = self.zero_solved = 0

    def _env(self, params: str):
        from rlvrflow.verifiers.environment import Environment

        return self.envs.get(params) or self.envs.setdefault(params, Environment.model_validate_json(params))

    def take(self, ids: list[str], sampler, step: int, rnd: int) -> list[str]:
        """Play the episode rows among `ids`, report their success rates, keep their groups; the other ids."""
        import torch

        from rlvrflow.engines import SamplingParams
        from rlvrflow.training.grpo_groups import rollout_seed
        from rlvrflow.training.grpo_math import zero_variance_groups

        mine = [i for i in ids if i in self.rows]
        if not mine:
            return ids
        g, n = self.g, self.g.num_generations
        sampling = SamplingParams(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.episode_max_new_tokens)
        groups: dict[str, EpisodeGroup] = {}
        for k, params in enumerate(dict.fromkeys(self.rows[i]["verifier_params"] for i in mine)):
            env, these = self._env(params), [i for i in mine if self.rows[i]["verifier_params"] == params]
            seed = episode_seed(rollout_seed(self.seed, step, rnd), k)
            played = play_episodes(
                self.engine, env, [self.rows[i] for i in these for _ in range(n)], self.fmt, sampling, seed
            )
            for j, i in enumerate(these):
                eps = played[j * n : (j + 1) * n]
                groups[i] = EpisodeGroup(i, eps, [self._reward(e) for e in eps], env.schemas())
        ordered = [groups[i] for i in mine]
        sampler.report(mine, [sum(e.verdict.correct for e in grp.episodes) / n for grp in ordered])
        flat = zero_variance_groups(torch.tensor([grp.rewards for grp in ordered], dtype=torch.float32)).tolist()
        for grp, is_flat in zip(ordered, flat):  # counted as collect_groups' Tally counts the replies
            dropped = is_flat and g.filter_zero_variance
            self.seen, self.zero = self.seen + 1, self.zero + dropped
            self.zero_solved += dropped and all(e.verdict.correct for e in grp.episodes)
            self.played += grp.episodes
            self.rewards += grp.rewards
            if not dropped:
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
            "groups_zero_solved": self.zero_solved,
            "context_full": sum(e.stop == CONTEXT_FULL for e in self.played),
            **{k: v for k, v in stats.items() if not isinstance(v, dict)},
        }
        return {f"episode_{k}": v for k, v in out.items()}


class EpisodeBatch:
    """The step's kept episode groups as the loss reads them: rendered conversations, advantages, totals."""

    def __init__(self, groups: list[EpisodeGroup], tokenizer, fmt, g, device, max_positions: int | None = None) -> None:
        """Episodes that stopped at `context_full` (or render past `max_positions`) weigh in their group's
        advantage baseline but are left out of the loss (`cut` counts them); `rendered` may be empty."""
        import torch

        from rlvrflow.training.grpo_math import group_advantages

        rewards = torch.tensor([grp.rewards for grp in groups], dtype=torch.float32)  # (P, G)
        adv = group_advantages(rewards, g.scale_rewards == "group").flatten().tolist()  # (B,)
        played = [(e, grp.tools) for grp in groups for e in grp.episodes]
        self.adv, self.rendered, self.cut, self.overlong = [], [], 0, 0
        for (episode, tools), a in zip(played, adv):
            rendered = None if episode.stop == CONTEXT_FULL else policy_span(fmt.render(tokenizer, episode, tools))
            if rendered is None or (max_positions is not None and len(rendered[0]) > max_positions):
                self.cut += 1  # stopped for room, or re-encoded past it: in the group's baseline, not the loss
                self.overlong += rendered is not None
                continue
            if g.mask_truncated_completions and episode.truncated_turns:
                rendered = (rendered[0], without_turns(rendered[1], episode.truncated_turns))
            self.adv.append(a)
            self.rendered.append(rendered)
        self.tokens = float(sum(sum(m[1:]) for _, m in self.rendered))  # the positions the loss reads
        self.seqs = float(len(self.rendered))
        self.pad_id, self.g, self.device = tokenizer.pad_token_id, g, device
        n_micro = max(1, min(g.gradient_accumulation_steps, len(self.rendered)))
        self.micro = [list(range(len(self.rendered)))[k::n_micro] for k in range(n_micro)]
        self.old: dict[int, object] = {}
        self.ref: dict[int, object] = {}

    def _logps(self, backend, model, idx: list[int], grad: bool, entropy: str | None = None):
        import torch

        from rlvrflow.training.episodes import conversation_logprobs

        with torch.set_grad_enabled(grad), backend.autocast():
            rendered = [self.rendered[i] for i in idx]
            return conversation_logprobs(model, rendered, self.pad_id, self.device, self.g.temperature, entropy)

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

        g, loss_sum, sums, tokens = self.g, 0.0, {"clip_fraction": 0.0, "kl": 0.0, "entropy": 0.0}, 0.0
        for k, mb in enumerate(self.micro):
            # (b, L-1) each; the entropy keeps its graph only when the loss's bonus uses it
            logp, mask, entropy = self._logps(
                backend, backend.module, mb, True, "grad" if g.entropy_coef > 0 else "value"
            )
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
                entropy=entropy,
                entropy_coef=g.entropy_coef,
            )
            backend.backward(loss)
            n = float(mask.sum())
            loss_sum += float(loss.detach())
            for key in sums:
                sums[key] += st.get(key, 0.0) * n
            tokens += n
        return loss_sum, sums, tokens


def policy_span(rendered: tuple[list[int], list[int]]) -> tuple[list[int], list[int]]:
    """A rendered conversation up to its last policy token: what follows (the tool results of a turn-limit
    stop) is neither trained nor read by a trained token, and may pass the positions the play kept to."""
    ids, mask = rendered
    end = max((k + 1 for k, m in enumerate(mask) if m), default=len(ids))
    return ids[:end], mask[:end]


def without_turns(mask: list[int], turns: list[int]) -> list[int]:
    """The policy mask with the k-th assistant message's tokens (its k-th run of 1s; tool results and
    role tags lie between two messages) set to 0, for each k in `turns`."""
    out, run, inside = list(mask), -1, False
    for i, m in enumerate(mask):
        if m and not inside:
            run += 1
        inside = bool(m)
        if m and run in turns:
            out[i] = 0
    return out


def episode_seed(round_seed: int, k: int) -> int:
    """The seed of the k-th environment's episodes in a round: apart from the round's single replies
    (which sample with `round_seed` itself) and from the other environments'."""
    return (round_seed * 31 + 1 + k) % (2**31 - 1)


def check_fits(rows: dict[str, dict], tokenizer, fmt, g, max_positions: int | None) -> None:
    """Before the first step: every episode's opening (instructions and ticket) plus one message and its
    stop string must fit the model's positions, as play_episodes counts them, else a ValueError naming
    what to change (played episodes only grow)."""
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
        # as the engine encodes it (eval_episodes.episode_view): the plain format's BOS added, a chat
        # template's own special tokens as they are
        text = fmt.prompt(opening, env.schemas())
        n = len(tokenizer(text, add_special_tokens=fmt is PLAIN).input_ids)
        if n > longest:
            longest, worst = n, row["id"]
    # play_episodes keeps room for the message and its stop string
    if longest + g.episode_max_new_tokens + stop_length(tokenizer, fmt) > max_positions:
        raise ValueError(
            f"episode row {worst!r} opens with {longest} tokens; with one message of "
            f"generation.episode_max_new_tokens={g.episode_max_new_tokens} and the stop string after it that is "
            f"over the {max_positions} positions the "
            "model (and a vLLM rollout engine's max_model_len) holds, and every turn adds more: use a model with a "
            "longer context, shorten the environment's instructions or the prompt template, "
            "or set training.episodes: false to train without the episodes"
        )


def check_supported(g, distributed: bool) -> None:
    """Where the loop cannot play episodes yet: an error naming the field and the fix."""
    fix = "or set training.episodes: false to train without the environment's rows"
    if g.rollout_mode == "async":
        raise ValueError(f"training.grpo.rollout_mode 'async' does not play episodes yet; set rollout_mode: sync {fix}")
    if distributed or g.backend == "deepspeed":
        raise ValueError(
            "GRPO on episodes runs in one process with the torch backend (not several ranks or DeepSpeed); "
            f"launch one process with training.grpo.backend: torch {fix}"
        )
