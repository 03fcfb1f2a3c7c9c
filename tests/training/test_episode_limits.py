"""Episodes that outgrow the model's positions and how GRPO counts episode groups: a conversation with
no room for another message stops at `context_full` (played on, never raised), is left out of the loss,
and episode groups are counted by the single replies' zero-variance rule. The environment and the
scripted agent are tests/verifiers' own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlvrflow.engines import SamplingParams
from rlvrflow.training.config import GRPOConfig
from rlvrflow.training.episode_format import PLAIN
from rlvrflow.training.episodes import episode_stats, play_episodes
from rlvrflow.training.grpo_episodes import EpisodeBatch, EpisodeGroup, EpisodePlayer, check_fits, policy_span
from rlvrflow.verifiers.config import RewardConfig, TurnPenalty
from rlvrflow.verifiers.episode import CONTEXT_FULL, run_episode

from ..verifiers.test_environment import _call, _row, agent, db, env  # noqa: F401


class _Engine:
    """A scripted engine with a model of `positions` positions: every message looks the order up again,
    so a conversation only grows. Records the longest prompt (in tokens) it was asked to continue."""

    def __init__(self, tokenizer, positions: int, reply: str) -> None:
        self.tokenizer, self.reply, self.longest = tokenizer, reply, 0
        self.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=positions))

    def generate(self, prompts, n, sampling, seed):
        self.longest = max([self.longest, *(len(self.tokenizer(p).input_ids) for p in prompts)])
        return [[SimpleNamespace(text=self.reply)] * n for _ in prompts]


def _looping(env, tokenizer, positions: int) -> _Engine:  # noqa: F811
    return _Engine(tokenizer, positions, _call("order_lines", order_id=7).replace("\n", " "))


def test_a_conversation_that_outgrows_the_positions_stops_at_context_full(env, tiny_tokenizer):  # noqa: F811
    env = env.model_copy(update={"max_turns": 50})
    engine = _looping(env, tiny_tokenizer, 600)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=80)  # the scripted message is shorter
    assert len(tiny_tokenizer(engine.reply, add_special_tokens=False).input_ids) < 80
    episodes = play_episodes(engine, env, [_row(7, "Kettle", 36.0)] * 2, PLAIN, sampling, seed=0)
    assert [e.stop for e in episodes] == [CONTEXT_FULL, CONTEXT_FULL]
    assert 1 < episodes[0].assistant_turns < 50
    assert engine.longest + 80 <= 600  # never asked to write past the model's positions
    assert episode_stats(episodes)["context_full_rate"] == 1.0
    for e in episodes:  # up to its last message, what was played fits the model when rendered for the loss
        assert len(policy_span(PLAIN.render(tiny_tokenizer, e, env.schemas()))[0]) <= 600 + 2


def test_an_opening_without_room_for_one_message_ends_before_any_turn(env, tiny_tokenizer):  # noqa: F811
    engine = _looping(env, tiny_tokenizer, 60)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=40)
    (episode,) = play_episodes(engine, env, [_row(7, "Kettle", 36.0)], PLAIN, sampling, seed=0)
    assert episode.stop == CONTEXT_FULL and episode.assistant_turns == 0 and engine.longest == 0


def test_the_opening_check_refuses_exactly_the_openings_play_episodes_cannot_continue(env, tiny_tokenizer):  # noqa: F811
    # the engine is handed the plain prompt with its BOS, and keeps room for a message and its stop string
    rows = {"t1": {"id": "t1", "verifier_params": env.model_dump_json(), **_row(7, "Kettle", 36.0)}}
    opening = [{"role": "system", "content": env.instructions}] if env.instructions else []
    text = PLAIN.prompt([*opening, {"role": "user", "content": rows["t1"]["prompt"]}], env.schemas())
    seen = len(tiny_tokenizer(text, add_special_tokens=True).input_ids)
    assert seen == len(tiny_tokenizer(text, add_special_tokens=False).input_ids) + 1  # the BOS
    g = GRPOConfig(episode_max_new_tokens=40)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=40)
    fits = seen + 40 + len(tiny_tokenizer(PLAIN.stop[0], add_special_tokens=False).input_ids)
    check_fits(rows, tiny_tokenizer, PLAIN, g, fits)
    (played,) = play_episodes(_looping(env, tiny_tokenizer, fits), env, [rows["t1"]], PLAIN, sampling, seed=0)
    assert played.assistant_turns >= 1
    with pytest.raises(ValueError, match=f"opens with {seen} tokens"):
        check_fits(rows, tiny_tokenizer, PLAIN, g, fits - 1)
    (played,) = play_episodes(_looping(env, tiny_tokenizer, fits - 1), env, [rows["t1"]], PLAIN, sampling, seed=0)
    assert played.stop == CONTEXT_FULL and played.assistant_turns == 0


def test_context_full_and_over_long_episodes_stay_out_of_the_loss_without_an_error(env, tiny_tokenizer):  # noqa: F811
    row, tools = _row(7, "Kettle", 36.0), env.schemas()
    good = run_episode(env, row, lambda m: agent(m).replace("\n", " "))
    cut = run_episode(env, row, lambda m: "no refund")
    cut.stop = CONTEXT_FULL
    g = GRPOConfig(prompts_per_step=1, num_generations=2)
    batch = EpisodeBatch([EpisodeGroup("r", [good, cut], [1.1, 0.0], tools)], tiny_tokenizer, PLAIN, g, "cpu")
    assert batch.cut == 1 and batch.rendered == [PLAIN.render(tiny_tokenizer, good, tools)]
    assert batch.adv[0] > 0  # the cut episode still weighs in the group's baseline
    longest = len(batch.rendered[0][0])
    short = EpisodeBatch(
        [EpisodeGroup("r", [good, good], [1.1, 0.0], tools)], tiny_tokenizer, PLAIN, g, "cpu", longest - 1
    )
    assert short.rendered == [] and short.cut == short.overlong == 2


def _player(env, tokenizer, replies: list[str], filter_zero: bool, reward=None):  # noqa: F811
    """An EpisodePlayer over two rows whose G=2 episodes answer `replies` in turn."""
    engine = _Engine(tokenizer, 4096, "")
    queue = iter(replies)

    def generate(prompts, n, sampling, seed):
        return [[SimpleNamespace(text=next(queue)) for _ in range(n)] for _ in prompts]

    engine.generate = generate
    params = env.model_dump_json()
    rows = {
        "a": {"id": "a", "verifier_params": params, **_row(7, "Kettle", 36.0)},
        "b": {"id": "b", "verifier_params": params, **_row(7, "Kettle", 36.0)},
    }
    g = GRPOConfig(prompts_per_step=2, num_generations=2, filter_zero_variance=filter_zero)
    return EpisodePlayer(engine, rows, PLAIN, g, reward or RewardConfig(), seed=0)


class _Sampler:
    def report(self, ids, rates):
        self.rates = rates


def test_episode_groups_count_zero_variance_as_the_replies_do(env, tiny_tokenizer):  # noqa: F811
    """Both rows' episodes all end on one final reply (flat groups): without filter_zero_variance none is
    dropped, so none counts as zero-variance (collect_groups' Tally does the same for replies)."""
    for filter_zero, zero in ((True, 2), (False, 0)):
        player = _player(env, tiny_tokenizer, ["no refund"] * 4, filter_zero)
        assert player.take(["a", "b", "x"], _Sampler(), step=0, rnd=0) == ["x"]
        info = player.info()
        assert info["episode_groups_seen"] == 2 and info["episode_groups_zero_variance"] == zero
        assert info["episode_groups_zero_solved"] == 0  # flat, but all wrong
        assert len(player.kept) == 2 - zero


def test_grpo_rewards_episodes_with_the_specs_turn_penalty(env, tiny_tokenizer):  # noqa: F811
    """verifiers.reward's turn_penalty reaches GRPO's group rewards; the default charges nothing for two turns."""
    look = _call("get_order", order_id=7).replace("\n", " ")
    replies = ["no refund", look, look, look] + ["no refund"] * 3  # turn 1 for the 4 conversations, then turn 2
    strict = RewardConfig(turn_penalty=TurnPenalty(per_turn=0.15, free_turns=1))
    for reward, second_turn in ((RewardConfig(), 0.1), (strict, 0.1 - 0.15)):
        player = _player(env, tiny_tokenizer, list(replies), filter_zero=False, reward=reward)
        player.take(["a", "b"], _Sampler(), step=0, rnd=0)
        assert [r for grp in player.kept for r in grp.rewards] == pytest.approx([0.1, *[second_turn] * 3])


def test_the_step_counts_add_both_kinds_as_summary_json_does():
    from rlvrflow.training.doctor_rules import zero_variance_share
    from rlvrflow.training.grpo import step_counts

    replies = {"groups_seen": 3, "groups_zero_variance": 1, "groups_zero_solved": 1, "groups_used": 2}
    episodes = {"episode_groups_seen": 2, "episode_groups_zero_variance": 2, "episode_groups_zero_solved": 0}
    steps = [{"step": 1, **step_counts(replies, {**episodes, "episode_groups_used": 0})}]
    steps.append({"step": 2, **step_counts(replies, {})})
    assert steps[0]["groups_seen"] == 5 and steps[0]["groups_zero_variance"] == 3 and steps[0]["groups_used"] == 2
    assert zero_variance_share(steps) == (4 / 8, 8)  # summary.json: run totals 4 flat of 8 groups


def test_a_step_without_single_replies_logs_no_reward_and_the_readers_take_it(tmp_path):
    """A step that drew only episode rows scored no single reply: no reward_mean or correct_rate of 0
    (curves.png, the step line and the doctor's quarters would read it as real)."""
    from rlvrflow.training.grpo_groups import Tally
    from rlvrflow.training.grpo_logs import step_line
    from rlvrflow.training.report import plot_curves

    info = Tally().info(0)
    assert "reward_mean" not in info and "correct_rate" not in info and info["groups_seen"] == 0
    tally = Tally()
    tally.add([1.0, 0.0], [True, False], [[1, 2], [3]], drop_zero=False)
    assert tally.info(1)["reward_mean"] == 0.5 and tally.info(1)["correct_rate"] == 0.5
    m = {"step": 3, **info, "zero_variance_fraction": 0.0, "skipped": 1, "step_seconds": 0.5}
    m.update(episode_groups_seen=2, episode_success_rate=0.5, episode_turns_mean=2.0)
    assert "no single replies" in step_line(m, 10) and "episodes 2 success 50.0%" in step_line(m, 10)
    replies = {"step": 2, "reward_mean": 0.25, "correct_rate": 0.5}
    assert plot_curves([replies, m], [], tmp_path / "curves.png").is_file()


def test_tiering_seeds_each_environment_of_a_chunk_apart_and_counts_tokens(env):  # noqa: F811
    """Two environments in one chunk sample with different seeds (not one call_seed for both), and a
    rollout's n_tokens is the policy's tokens, not its characters."""
    from rlvrflow.curriculum.config import CurriculumConfig
    from rlvrflow.curriculum.episode_tiers import sample_episodes

    def words(text, add_special_tokens=True):  # a tokenizer with merges: one token per word
        return SimpleNamespace(input_ids=text.split())

    seeds, reply = [], "no refund at all"
    engine = _Engine(words, 4096, reply)
    plain_generate = engine.generate

    def generate(prompts, n, sampling, seed):
        seeds.append(seed)
        return plain_generate(prompts, n, sampling, seed)

    engine.generate = generate
    other = env.model_copy(update={"max_turns": 4})
    rows = [
        {"id": f"r{k}", "verifier_params": e.model_dump_json(), **_row(7, "Kettle", 36.0)}
        for k, e in enumerate([env, other])
    ]
    samples = sample_episodes(rows, engine, CurriculumConfig(n_samples=2, k=1), seed=0, fmt=PLAIN)
    assert len(seeds) == 2 and seeds[0] != seeds[1]
    assert samples[0][0]["n_tokens"] == 4


def test_grpo_episodes_sample_apart_from_the_rounds_single_replies_and_each_other(env, tiny_tokenizer):  # noqa: F811
    from rlvrflow.training.grpo_groups import rollout_seed

    seeds = []
    player = _player(env, tiny_tokenizer, ["no refund"] * 4, True)

    def generate(prompts, n, sampling, seed):
        seeds.append(seed)
        return [[SimpleNamespace(text="no refund") for _ in range(n)] for _ in prompts]

    player.engine.generate = generate
    other = env.model_copy(update={"max_turns": 4}).model_dump_json()
    player.rows["b"] = {**player.rows["b"], "verifier_params": other}
    player.take(["a", "b"], _Sampler(), step=3, rnd=1)
    assert len(seeds) == 2 and len({*seeds, rollout_seed(0, 3, 1)}) == 3


def test_a_message_cut_at_the_length_cap_weighs_nothing_under_mask_truncated_completions(env, tiny_tokenizer):  # noqa: F811
    """The engine cut the first message at max_new_tokens: play_episodes records it, and with
    mask_truncated_completions its tokens leave the loss while the later messages stay."""
    from rlvrflow.training.grpo_episodes import without_turns

    assert without_turns([0, 1, 1, 0, 0, 1, 0, 1, 1], [1]) == [0, 1, 1, 0, 0, 0, 0, 1, 1]
    replies = iter([("no", "length"), ("refund", "stop")])
    engine = _Engine(tiny_tokenizer, 4096, "")

    def generate(prompts, n, sampling, seed):
        text, why = next(replies)
        return [
            [SimpleNamespace(text=f"<tool_call>{text}</tool_call>" if why == "length" else text, finish_reason=why)]
        ]

    engine.generate = generate
    sampling = SamplingParams(temperature=1.0, max_new_tokens=40)
    (episode,) = play_episodes(engine, env, [_row(7, "Kettle", 36.0)], PLAIN, sampling, seed=0)
    assert episode.assistant_turns == 2 and episode.truncated_turns == [0]
    tools, rendered = env.schemas(), PLAIN.render(tiny_tokenizer, episode, env.schemas())
    for masked in (False, True):
        g = GRPOConfig(prompts_per_step=1, num_generations=2, mask_truncated_completions=masked)
        batch = EpisodeBatch(
            [EpisodeGroup("r", [episode, episode], [1.0, 0.0], tools)], tiny_tokenizer, PLAIN, g, "cpu"
        )
        last = len("refund") + 1  # the final reply and its newline stop
        assert batch.tokens == 2 * (last if masked else sum(rendered[1][1:]))
