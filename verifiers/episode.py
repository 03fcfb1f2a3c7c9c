"""Episodes: a policy talks to an environment's tools, and the end state is scored.

    episodes = run_episodes(env, rows, policy)          # policy: list[messages] -> list[str]
    episodes[0].verdict, episode_reward(episodes[0])    # Verdict from the end state, EpisodeReward

Each turn the policy writes the assistant's next message for every unfinished conversation at once
(an engine generates them as one batch). A message holding `<tool_call>{"name": ..., "arguments":
{...}}</tool_call>` blocks (Qwen/Hermes; read by function_call.extract_calls) is a tool turn: each call
is checked (JSON, known tool, arguments valid against its schema) and run on the episode's own
database copy, and its result comes back as a `{"role": "tool"}` message. A message without a
`<tool_call>` tag is the final reply, and ends the episode; so does the environment's `max_turns`
(the episode is then unfinished), and so does the policy answering None for a conversation (stop
`context_full`: the model's positions cannot hold another message; training/episodes.py says when). Only tags are calls: a call written in a fence or in prose in the
final reply runs nothing, as a chat template's tool parser would run nothing.

`Episode.sources` says who produced each message: `prompt` (system and user), `policy` (the loss mask
the trainer needs: 1 on these, 0 elsewhere), `environment` (tool results). The assistant messages keep
the policy's text as written, so re-rendering the conversation gives back the policy's own tokens.

Rewards, in the layers of verifiers/shaping.py:
    correctness  = 1 when the outcome query's rows on the end state equal the reference's, else 0
    format       = 1 when the episode ended with a final reply and every call parsed, named a known
                   tool and passed its schema, else 0
    turn_penalty = min(max_penalty, per_turn * max(0, assistant messages - free_turns))   (the
                   spec's verifiers.reward.turn_penalty; 0.02 a message past 3, at most 0.2, by default)
    total        = format_weight * format + correctness_weight * correctness - turn_penalty
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from . import verdict as V
from .config import TurnPenalty
from .environment import Environment, Sandbox, ToolError, expected_rows, outcome_matches
from .function_call import _THINK, Call, extract_calls

PROMPT, POLICY, ENVIRONMENT = "prompt", "policy", "environment"
FINAL, MAX_TURNS, CONTEXT_FULL = "final_reply", "max_turns", "context_full"

Policy = Callable[[list[list[dict]]], list[str | None]]  # None: no room for another message


@dataclass
class ToolRun:
    """One call the policy made: what it named, with which arguments, and what came back."""

    name: str
    arguments: dict
    ok: bool
    result: str


@dataclass
class Episode:
    messages: list[dict]
    sources: list[str]
    tool_runs: list[ToolRun] = field(default_factory=list)
    bad_calls: int = 0
    stop: str = ""
    end_state: list[tuple] = field(default_factory=list)
    verdict: V.Verdict | None = None
    truncated_turns: list[int] = field(default_factory=list)  # assistant messages (0-based) cut at a length cap

    @property
    def assistant_turns(self) -> int:
        return self.sources.count(POLICY)

    @property
    def final_reply(self) -> str:
        return self.messages[-1]["content"] if self.stop == FINAL else ""

    @property
    def loss_mask(self) -> list[int]:
        """1 for the policy's messages, 0 for the prompt and the tool results, one per message."""
        return [int(s == POLICY) for s in self.sources]

    def to_dict(self) -> dict:
        """The transcript as JSON-able data, for sample tables and run artifacts."""
        return {
            "messages": self.messages,
            "sources": self.sources,
            "stop": self.stop,
            "tool_runs": [vars(r) for r in self.tool_runs],
            "bad_calls": self.bad_calls,
            "end_state": [list(r) for r in self.end_state],
            "verdict": self.verdict.to_dict() if self.verdict else None,
        }


def _tool_message(name: str, payload) -> dict:
    return {"role": "tool", "name": name, "content": json.dumps(payload, ensure_ascii=False, default=str)}


def _plain(value):
    """Arguments as a standard JSON parser gives them (extract_calls keeps decimals as Decimal)."""
    return json.loads(json.dumps(value, default=float))


class _Run:
    """One episode in progress: its sandbox and its transcript."""

    def __init__(self, env: Environment, row: Mapping):
        messages = [{"role": "system", "content": env.instructions}] if env.instructions else []
        messages.append({"role": "user", "content": str(row["prompt"])})
        self.env, self.expected = env, expected_rows(str(row["reference"]))
        self.episode = Episode(messages, [PROMPT] * len(messages))
        self.box = Sandbox(env)

    def _add(self, message: dict, source: str) -> None:
        self.episode.messages.append(message)
        self.episode.sources.append(source)

    def step(self, reply: str) -> bool:
        """Take the policy's message; True when the episode has ended."""
        self._add({"role": "assistant", "content": reply}, POLICY)
        visible = _THINK.sub("", reply.rsplit("</think>", 1)[-1])
        calls, problems = extract_calls(visible) if "<tool_call>" in visible else ([], [])
        if not calls and not problems:
            self.episode.stop = FINAL
            return True
        for problem in problems:
            self.episode.bad_calls += 1
            self._add(_tool_message("error", {"error": problem}), ENVIRONMENT)
        for call in calls:
            self._add(_tool_message(call.name, self._run(call)), ENVIRONMENT)
        if self.episode.assistant_turns >= self.env.max_turns:
            self.episode.stop = MAX_TURNS
            return True
        return False

    def cut(self) -> bool:
        """The policy has no room for another message: the episode ends unfinished."""
        self.episode.stop = CONTEXT_FULL
        return True

    def _run(self, call: Call):
        from jsonschema.exceptions import best_match

        tool, args = self.env.tool(call.name), _plain(call.arguments)
        if tool is None:
            why = f"unknown tool {call.name!r}; the tools are {', '.join(t.name for t in self.env.tools)}"
        else:
            err = best_match(_validator(tool.parameters).iter_errors(args))
            why = f"{call.name}: arguments fail its schema at {err.json_path}: {err.message}" if err else None
        if why:
            self.episode.bad_calls += 1
            self.episode.tool_runs.append(ToolRun(call.name, args, False, why))
            return {"error": why}
        try:
            result = self.box.run_tool(tool, args)
        except ToolError as exc:
            self.episode.tool_runs.append(ToolRun(call.name, args, False, str(exc)))
            return {"error": str(exc)}
        self.episode.tool_runs.append(ToolRun(call.name, args, True, json.dumps(result, default=str)))
        return result

    def finish(self) -> Episode:
        try:
            self.episode.end_state = self.box.end_state()
        finally:
            self.box.close()
        shown = V.clip(json.dumps(self.episode.end_state, default=str), 200)
        if outcome_matches(self.expected, self.episode.end_state, self.env.outcome):
            self.episode.verdict = V.correct(shown, "the end state matches the reference")
        else:
            self.episode.verdict = V.wrong(
                shown, f"end state {shown}, expected {V.clip(json.dumps(self.expected, default=str), 200)}"
            )
        return self.episode


def _validator(schema: dict):
    import jsonschema

    return jsonschema.validators.validator_for(schema)(schema)


def run_episodes(env: Environment, rows: Sequence[Mapping], policy: Policy) -> list[Episode]:
    """Run one episode per row (`prompt`, `reference`), asking the policy for every unfinished
    conversation's next message in one call per turn (None ends that one, `context_full`); the
    episodes in the rows' order."""
    runs: list[_Run] = []
    try:
        for row in rows:
            runs.append(_Run(env, row))
        active = list(runs)
        while active:
            replies = policy([r.episode.messages for r in active])
            if len(replies) != len(active):
                raise ValueError(f"the policy returned {len(replies)} messages for {len(active)} conversations")
            active = [r for r, reply in zip(active, replies) if not (r.cut() if reply is None else r.step(str(reply)))]
        return [r.finish() for r in runs]
    finally:
        for r in runs:
            r.box.close()


def run_episode(env: Environment, row: Mapping, policy: Callable[[list[dict]], str]) -> Episode:
    return run_episodes(env, [row], lambda batch: [policy(m) for m in batch])[0]


class EpisodeRewardConfig(BaseModel):
    """How an episode becomes a GRPO reward: format and correctness layers minus a turn penalty."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_weight: float = Field(0.1, ge=0.0, description="weight of the format layer")
    correctness_weight: float = Field(1.0, ge=0.0, description="weight of the end-state check")
    turns: TurnPenalty = Field(default_factory=TurnPenalty, description="verifiers.reward.turn_penalty")

    @classmethod
    def of(cls, reward=None) -> "EpisodeRewardConfig":
        """The episode reward of a spec's `verifiers.reward` (a RewardConfig): its format and correctness
        weights and its turn_penalty; the defaults for None."""
        if reward is None:
            return cls()
        return cls(
            format_weight=reward.format_weight,
            correctness_weight=reward.correctness_weight,
            turns=reward.turn_penalty,
        )


@dataclass(frozen=True)
class EpisodeReward:
    total: float
    format: float
    correctness: float
    turn_penalty: float


def episode_reward(episode: Episode, cfg: EpisodeRewardConfig | None = None) -> EpisodeReward:
    """The layered reward of a finished episode; see the module docstring for the formulas."""
    cfg = cfg or EpisodeRewardConfig()
    if episode.verdict is None:
        raise ValueError("the episode has not finished; run it with run_episodes")
    fmt = float(episode.stop == FINAL and episode.bad_calls == 0)
    correctness = float(episode.verdict.score)
    t = cfg.turns
    pen = min(t.max_penalty, t.per_turn * max(0, episode.assistant_turns - t.free_turns))
    return EpisodeReward(cfg.format_weight * fmt + cfg.correctness_weight * correctness - pen, fmt, correctness, pen)
