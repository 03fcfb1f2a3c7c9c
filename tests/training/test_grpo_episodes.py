"""Episode groups in GRPO's own update (training/grpo_episodes.py with training/grpo.py update_policy):
the conversations' policy tokens take the clipped surrogate in the same loss and optimizer step as the
single replies. The environment and the scripted agent are tests/verifiers' own."""

from __future__ import annotations

import pytest

from rlvrflow.training.config import GRPOConfig
from rlvrflow.training.episode_format import PLAIN
from rlvrflow.training.grpo_episodes import EpisodeBatch, EpisodeGroup, check_supported
from rlvrflow.verifiers.episode import run_episode

from ..conftest import build_model
from ..verifiers.test_environment import _row, agent, db, env  # noqa: F401


def _one_line(messages):
    return agent(messages).replace("\n", " ")  # PLAIN ends a message at a newline


def _policy_logp(model, tokenizer, episode, tools) -> float:
    import torch

    from rlvrflow.training.episodes import conversation_logprobs

    with torch.no_grad():
        logp, mask = conversation_logprobs(
            model, [PLAIN.render(tokenizer, episode, tools)], tokenizer.pad_token_id, "cpu"
        )
    return float((logp * mask).sum())


def _update(tokenizer, episodes, rewards, tools) -> tuple[list[float], list[float], dict]:
    """Policy log-probs of each episode before and after 3 updates on one group of them, and the last stats."""
    import torch

    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.grpo import update_policy

    model = build_model(tokenizer, seed=0)
    model.config.max_position_embeddings = 1024  # rotary positions: a conversation is ~600 characters
    g = GRPOConfig(prompts_per_step=1, num_generations=2, learning_rate=1e-3, warmup_steps=0, beta=0.0)
    before = [_policy_logp(model, tokenizer, e, tools) for e in episodes]
    batch = EpisodeBatch([EpisodeGroup("r", episodes, rewards, tools)], tokenizer, PLAIN, g, "cpu")
    assert batch.tokens == sum(PLAIN.render(tokenizer, e, tools)[1][1:].count(1) for e in episodes)
    backend = make_backend(model, g, torch.float32)
    for _ in range(3):
        stats = update_policy(backend, None, [], g, tokenizer.pad_token_id, torch.device("cpu"), episodes=batch)
    assert stats["episode_policy_tokens"] == batch.tokens and stats["grad_norm"] > 0
    return before, [_policy_logp(model, tokenizer, e, tools) for e in episodes], stats


def test_an_update_on_episodes_alone_moves_the_conversation_the_reward_favours(env, tiny_tokenizer):  # noqa: F811
    row = _row(7, "Kettle", 36.0)
    good = run_episode(env, row, _one_line)
    bad = run_episode(env, row, lambda messages: "no refund")
    assert good.verdict.correct and not bad.verdict.correct
    tools = env.schemas()
    before, rewarded, _ = _update(tiny_tokenizer, [good, bad], [1.1, 0.1], tools)
    _, punished, _ = _update(tiny_tokenizer, [good, bad], [0.1, 1.1], tools)
    assert rewarded[0] > before[0] > punished[0]  # the worked episode's own tokens, by the reward's sign
    assert rewarded[0] - rewarded[1] > before[0] - before[1] > punished[0] - punished[1]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"rollout_mode": "async"}, "rollout_mode 'async'"),
        ({"backend": "deepspeed"}, "backend: torch"),
    ],
)
def test_where_episodes_cannot_run_the_error_names_the_field_and_the_way_out(change, field):
    g = GRPOConfig().model_copy(update=change)
    with pytest.raises(ValueError, match=field) as err:
        check_supported(g, distributed=False)
    assert "training.episodes: false" in str(err.value)


def test_a_mixed_step_trains_the_conversations_too(env, tiny_tokenizer):  # noqa: F811
    """Replies and conversations in one loss: the episodes' share moves the weights (the same step on the
    replies alone ends elsewhere), and their policy tokens join the denominator."""
    import torch

    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.grpo import update_policy
    from rlvrflow.training.grpo_groups import Group

    row, tools = _row(7, "Kettle", 36.0), env.schemas()
    good, bad = run_episode(env, row, _one_line), run_episode(env, row, lambda messages: "no refund")
    g = GRPOConfig(prompts_per_step=2, num_generations=2, learning_rate=1e-3, warmup_steps=0, beta=0.0)
    ids = tiny_tokenizer("12+3=", add_special_tokens=False).input_ids
    replies = [
        Group("q", ids, [tiny_tokenizer("15").input_ids, tiny_tokenizer("9").input_ids], [1.0, 0.0], [True, False])
    ]

    def step(with_episodes: bool):
        model = build_model(tiny_tokenizer, seed=0)
        model.config.max_position_embeddings = 1024
        backend = make_backend(model, g, torch.float32)
        batch = EpisodeBatch([EpisodeGroup("r", [good, bad], [1.1, 0.1], tools)], tiny_tokenizer, PLAIN, g, "cpu")
        stats = update_policy(
            backend,
            None,
            replies,
            g,
            tiny_tokenizer.pad_token_id,
            torch.device("cpu"),
            batch if with_episodes else None,
        )
        return torch.cat([p.detach().flatten() for p in model.parameters()]), stats, batch.tokens

    alone, alone_stats, _ = step(False)
    mixed, mixed_stats, episode_tokens = step(True)
    assert not torch.allclose(alone, mixed)
    assert mixed_stats["episode_policy_tokens"] == episode_tokens > 0 and "episode_policy_tokens" not in alone_stats


def test_the_entropy_bonus_and_its_log_cover_the_conversations(env, tiny_tokenizer):  # noqa: F811
    """An episode-only step logs the conversations' entropy; with equal rewards (no advantage) only
    entropy_coef's bonus moves the weights, so a step without it leaves them where they were."""
    import torch

    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.grpo import update_policy

    row, tools = _row(7, "Kettle", 36.0), env.schemas()
    good, bad = run_episode(env, row, _one_line), run_episode(env, row, lambda messages: "no refund")

    def step(coef: float):
        model = build_model(tiny_tokenizer, seed=0)
        model.config.max_position_embeddings = 1024
        start = torch.cat([p.detach().flatten() for p in model.parameters()])
        g = GRPOConfig(
            prompts_per_step=1, num_generations=2, learning_rate=1e-3, warmup_steps=0, beta=0.0, entropy_coef=coef
        )
        backend = make_backend(model, g, torch.float32)
        batch = EpisodeBatch([EpisodeGroup("r", [good, bad], [0.5, 0.5], tools)], tiny_tokenizer, PLAIN, g, "cpu")
        stats = update_policy(backend, None, [], g, tiny_tokenizer.pad_token_id, torch.device("cpu"), episodes=batch)
        moved = float((torch.cat([p.detach().flatten() for p in model.parameters()]) - start).abs().max())
        return stats, moved

    plain, moved_plain = step(0.0)
    bonus, moved_bonus = step(0.05)
    assert plain["entropy"] > 1.0 and bonus["entropy"] == pytest.approx(plain["entropy"])  # an untrained model's spread
    assert moved_plain == 0.0 and plain["grad_norm"] == 0.0
    assert moved_bonus > 0.0 and bonus["grad_norm"] > 0.0
