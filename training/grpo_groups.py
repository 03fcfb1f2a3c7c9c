"""A GRPO group and how one is made: sample `num_generations` completions of a prompt, score them, count them.

`score_rollouts` is the one place a batch of prompts becomes scored completions, for the synchronous
loop (training/grpo.py `collect_groups`) and the async generator process (training/async_rollouts.py)
alike; `Tally` sums a step's groups into its metrics the same way in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Group:
    """One prompt's G completions and their rewards."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    rewards: list[float]
    correct: list[bool]
    texts: list[str] = field(default_factory=list)  # the completions' decoded text, for rollout samples
    statuses: list[str] = field(default_factory=list)  # their verdicts' status
    old_logprobs: list[list[float]] | None = None  # async: the generator's per-token log-probs, the loss's old policy
    version: int | None = None  # async: the policy version (updates done) that generated them
    key: str | None = None  # async: "<request>.<index>", unique in a run's lineage
    truncated: list[bool] | None = None  # each completion cut at max_new_tokens (finish_reason "length")


def score_rollouts(engine, batch, g, reward_cfg, seed: int, workers: int, timeout_s: float) -> tuple:
    """`num_generations` completions for each task of `batch`, scored: per prompt, their token ids, rewards,
    correct flags, texts, verdict statuses, the engine's per-token log-probs and whether each was cut
    at max_new_tokens."""
    from rlvrflow.engines import SamplingParams
    from rlvrflow.training.scoring import rewards_for, score_groups

    sampling = SamplingParams(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.max_new_tokens)
    outs = engine.generate([t.prompt for t in batch], g.num_generations, sampling, seed=seed)
    texts = [[c.text for c in grp] for grp in outs]
    verdicts = score_groups(batch, texts, workers, timeout_s)
    parts = rewards_for(verdicts, texts, [[len(c.token_ids) for c in grp] for grp in outs], reward_cfg)
    return (
        [[list(c.token_ids) for c in grp] for grp in outs],
        [[p.total for p in grp] for grp in parts],
        [[v.status == "correct" for v in vg] for vg in verdicts],
        texts,
        [[v.status for v in vg] for vg in verdicts],
        [[list(c.logprobs) for c in grp] for grp in outs],
        [[c.finish_reason == "length" for c in grp] for grp in outs],
    )


@dataclass
class Tally:
    """A step's counts over every group scored, kept or not (the step's metrics)."""

    seen: int = 0
    zero: int = 0
    zero_solved: int = 0  # zero-variance groups whose completions were all correct
    correct: int = 0
    done: int = 0
    tokens: int = 0
    reward: float = 0.0
    truncated: int = 0  # completions cut at max_new_tokens

    def add(
        self,
        rewards: list[float],
        correct: list[bool],
        completions: list[list[int]],
        drop_zero: bool,
        truncated: list[bool] | None = None,
    ) -> bool:
        """Count one group; False when it is dropped as zero-variance (`drop_zero`)."""
        self.seen += 1
        self.truncated += sum(truncated or [])
        self.correct += sum(correct)
        self.done += len(correct)
        self.reward += sum(rewards)
        self.tokens += sum(len(x) for x in completions)
        self.zero += drop_zero
        self.zero_solved += drop_zero and all(correct)
        return not drop_zero

    def info(self, used: int) -> dict:
        """The step's counts; the per-completion means only when a completion was scored (a step that
        drew only episode rows has none, and a 0 there would read as a real reward)."""
        out = {
            "groups_seen": self.seen,
            "groups_zero_variance": self.zero,
            "groups_zero_solved": self.zero_solved,
            "groups_used": used,
            "zero_variance_fraction": self.zero / max(1, self.seen),
            "completion_tokens": self.tokens,
        }
        if self.done:
            n = self.done
            out.update(
                reward_mean=self.reward / n,
                correct_rate=self.correct / n,
                completion_tokens_mean=self.tokens / n,
                truncated_fraction=self.truncated / n,
            )
        return out


def draw(sampler, n: int) -> list[str]:
    """Ids of the next sampler batch, at most n of them."""
    return [str(i) for i in sampler.next_batch(n)][:n]


def rollout_seed(seed: int, step: int, rnd: int) -> int:
    """A distinct, reproducible sampling seed per (run seed, step, refill round)."""
    return (seed * 1_000_003 + step * 101 + rnd) % (2**31 - 1)
