"""An environment category's rows at attach: the reference must be the outcome's expected rows, and a
worked transcript, replayed on the environment, must reach it.

A row's `solution`, when the log has one, is the worked transcript as JSON: the list of messages
after the ticket, `{"role": "assistant", "content": "...<tool_call>...</tool_call>"}` and
`{"role": "tool", "name": ..., "content": "<the result as JSON>"}`, ending with the final reply
(system and user messages, if logged, are skipped). The replay sends the assistant messages, in
order, to a fresh episode (verifiers/episode.py): the episode must take all of them, end on the last
one, reach the reference's end state, and every tool result the log holds must be what the
environment returns now, so a transcript is never trained on against a database it does not match.
An empty solution is an outcome-only row: its reference alone is checked.
"""

from __future__ import annotations

import json
from typing import Mapping

from .environment import Environment, expected_rows
from .episode import FINAL, POLICY, run_episode


def transcript_messages(solution: str) -> list[dict]:
    """The assistant and tool messages of a worked transcript; ValueError saying what is wrong."""
    try:
        value = json.loads(solution)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the worked transcript is not JSON ({exc.msg}); log it as a list of messages") from None
    if not isinstance(value, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in value):
        raise ValueError("the worked transcript must be a JSON list of {role, content} messages")
    messages = [m for m in value if m.get("role") in ("assistant", "tool")]
    if not messages or messages[-1]["role"] != "assistant":
        raise ValueError("the worked transcript must end with the assistant's final reply")
    return messages


def check_row(env: Environment, row: Mapping) -> str:
    """'' when the row's reference (and worked transcript, if any) checks out, else the problem."""
    try:
        expected_rows(str(row.get("reference") or ""))
        solution = str(row.get("solution") or "")
        if not solution.strip():
            return ""
        logged = transcript_messages(solution)
    except ValueError as exc:
        return str(exc)
    replies = iter(m["content"] for m in logged if m["role"] == "assistant")
    episode = run_episode(env, row, lambda messages: next(replies, ""))
    sent = sum(m["role"] == "assistant" for m in logged)
    if episode.stop != FINAL or episode.assistant_turns != sent:
        return (
            f"the worked transcript has {sent} assistant messages, but its episode ended after "
            f"{episode.assistant_turns} ({episode.stop}): the last message must be the only one "
            f"without a tool call, within max_turns={env.max_turns}"
        )
    produced = episode.messages[episode.sources.index(POLICY) :]
    if [m["role"] for m in produced] != [m["role"] for m in logged]:
        return (
            f"the worked transcript's roles {[m['role'] for m in logged]} differ from its replay's "
            f"{[m['role'] for m in produced]}: log one tool message per call"
        )
    for k, (was, now) in enumerate(zip(logged, produced)):
        if was["role"] == "tool" and (now["role"] != "tool" or was["content"] != now["content"]):
            return (
                f"the worked transcript's message {k} (a tool result) is {was['content'][:120]!r}, but the "
                f"environment now returns {now['content'][:120]!r}: the log does not match the database"
            )
    if not episode.verdict.correct:
        return f"the worked transcript does not reach the reference: {episode.verdict.detail}"
    return ""
