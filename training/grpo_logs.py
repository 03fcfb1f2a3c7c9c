"""What a GRPO run writes for people to read, besides checkpoints: step lines, metrics, rollout samples.

Every `training.grpo.logging_steps` steps (and the last) rank 0 appends the step's metrics to
`metrics.jsonl`, writes them as TensorBoard scalars `grpo/*` (training/trainer.py `StepLog`, when
`training.report_to` has tensorboard) and logs one line through the `rlvrflow.training` logger:

    grpo step 40/150 reward 0.512 correct 46.9% zero-variance 25% kl 0.0000 loss -0.0123 1.31s 768 tokens

Every `training.grpo.log_samples_every` steps the best and the worst completion of the step's first
two groups go to `rollout_samples.jsonl` (step, task_id, prompt, kind best|worst, response, reward,
verdict status, the group's mean reward), to read what the policy writes and what the reward
prefers. The step's first two episode groups (training/grpo_episodes.py) add their best and worst
episode the same way, `response` its final reply and `transcript` the whole conversation after the
prompt (assistant messages and tool results). The step line adds the episodes' success rate and mean
turns on steps that played some. On resume each JSONL is cut back to the checkpoint's step
(training/trainer.py).
"""

from __future__ import annotations

from pathlib import Path

from rlvrflow.io import append_jsonl

ROLLOUT_SAMPLES = "rollout_samples.jsonl"
SAMPLE_GROUPS = 2  # groups per sampled step whose best and worst completions go to rollout_samples.jsonl


def write_rollout_samples(out: Path, step: int, groups: list, tasks: dict, g, episodes: list = ()) -> None:
    """Rank 0, after each step: every `log_samples_every` steps the rollout samples (and the episodes')."""
    if g.log_samples_every and step % g.log_samples_every == 0:
        for record in rollout_samples(groups, tasks, step) + episode_samples(episodes, step):
            append_jsonl(out / ROLLOUT_SAMPLES, record)


def episode_samples(groups: list, step: int, n_groups: int = SAMPLE_GROUPS) -> list[dict]:
    """The best and the worst episode (by reward) of the first `n_groups` episode groups, whole: the
    transcript as evaluate's samples hold it (`Episode.to_dict`: messages, tool runs, stop, verdict), so
    the run doctor reads tool loops in training's episodes as in the held-out ones."""
    import json

    records = []
    for grp in groups[:n_groups]:
        for kind, i in (("best", grp.rewards.index(max(grp.rewards))), ("worst", grp.rewards.index(min(grp.rewards)))):
            e = grp.episodes[i]
            records.append(
                {
                    "step": step,
                    "task_id": grp.task_id,
                    "prompt": next(m["content"] for m in e.messages if m["role"] == "user"),
                    "kind": kind,
                    "response": e.final_reply,
                    "reward": grp.rewards[i],
                    "status": e.verdict.status,
                    "group_reward_mean": sum(grp.rewards) / len(grp.rewards),
                    "mode": "episode",
                    "transcript": json.loads(json.dumps(e.to_dict(), default=str)),
                }
            )
    return records


def step_line(m: dict, total: int) -> str:
    """One GRPO step for a person: reward, correct rate, zero-variance share, KL, entropy, time and tokens."""
    update = (
        f"kl {m['kl']:.4f} entropy {m['entropy']:.3f} loss {m['loss']:+.4f}"
        if "kl" in m
        else "no update (no group had reward variance)"
    )
    episodes = (
        f" episodes {m['episode_groups_seen']} success {m['episode_success_rate']:.1%} turns {m['episode_turns_mean']:.2f}"
        if m.get("episode_groups_seen")
        else ""
    )
    replies = (  # a step that drew only episode rows scored no single reply
        f"reward {m['reward_mean']:.3f} correct {m['correct_rate']:.1%}" if "reward_mean" in m else "no single replies"
    )
    return (
        f"grpo step {m['step']}/{total} {replies} "
        f"zero-variance {m['zero_variance_fraction']:.0%}{episodes} {update} {m['step_seconds']:.2f}s "
        f"{m['completion_tokens']} tokens"
    )


def rollout_samples(groups: list, tasks: dict, step: int, n_groups: int = SAMPLE_GROUPS) -> list[dict]:
    """The best and the worst completion (by reward; the first on ties) of the first `n_groups` groups.

    A group with reward variance (every kept group when `filter_zero_variance` is on) shows what the
    reward tells apart; the records carry the prompt, so each line reads on its own.
    """
    records = []
    for grp in groups[:n_groups]:
        best = max(range(len(grp.rewards)), key=lambda i: grp.rewards[i])
        worst = min(range(len(grp.rewards)), key=lambda i: grp.rewards[i])
        for kind, i in (("best", best), ("worst", worst)):
            records.append(
                {
                    "step": step,
                    "task_id": grp.task_id,
                    "prompt": tasks[grp.task_id].prompt,
                    "kind": kind,
                    "response": grp.texts[i] if grp.texts else None,
                    "reward": grp.rewards[i],
                    "status": grp.statuses[i] if grp.statuses else None,
                    "group_reward_mean": sum(grp.rewards) / len(grp.rewards),
                }
            )
    return records
