"""How an episode's conversation becomes model input: the prompt text the engine continues, and the
token ids with a per-token policy mask that the loss reads.

    fmt = PLAIN                                             # or EpisodeFormat(prompt_fn, render_fn, stop)
    text = fmt.prompt(messages, tools)                      # the conversation so far + the assistant's opening
    ids, mask = fmt.render(tokenizer, episode, tools)       # mask[i] = 1 where the policy wrote token i

An `EpisodeFormat` is two functions and the stop strings that end an assistant message. The trainer
(training/episodes.py) only calls these, so a chat-template rendering (the template's `tools`
argument, its tool role, a per-token mask from the template's spans) replaces `PLAIN` by passing its
own `render(tokenizer, transcript, tools) -> (input_ids, policy_mask)` and a `prompt` built with
`apply_chat_template(messages, tools=..., add_generation_prompt=True, tokenize=False)`.

`PLAIN` is the rendering for the embedded character model, which has no chat template: one line per
message, `<role>: <content>\\n`, the assistant's role written `agent`. The policy's span of a line is
its content and the newline that ended it (the stop string it chose); the role tag, the prompt's and
the tools' lines are scaffolding (mask 0). Pieces are tokenized one by one and concatenated, which
equals tokenizing the whole text only for a tokenizer without merges (characters): a BPE tokenizer
needs a template-aware rendering. Left out of `PLAIN`: the tools' schemas (the character model learns
the tools from worked transcripts; a template shows them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ROLE_TAGS = {"system": "system: ", "user": "user: ", "assistant": "agent: ", "tool": "tool: "}
PLAIN_STOP = "\n"


@dataclass(frozen=True)
class EpisodeFormat:
    """`prompt(messages, tools) -> str`, `render(tokenizer, episode, tools) -> (ids, mask)`, and the
    stop strings that end an assistant message when generating."""

    prompt: Callable[[list[dict], list[dict]], str]
    render: Callable
    stop: tuple[str, ...]


def _line(message: dict) -> tuple[str, str]:
    role = message["role"]
    if role not in ROLE_TAGS:
        raise ValueError(f"message role {role!r} is not one of {', '.join(ROLE_TAGS)}")
    return ROLE_TAGS[role], str(message["content"])


def plain_prompt(messages: list[dict], tools: list[dict] | None = None) -> str:
    """The conversation so far, one line per message, then `agent: ` for the policy to continue."""
    return "".join(tag + text + PLAIN_STOP for tag, text in map(_line, messages)) + ROLE_TAGS["assistant"]


def plain_render(tokenizer, episode, tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """(ids, mask) of a transcript (anything with `messages` and `sources`, e.g. verifiers.episode.Episode):
    `<s>`, then each message's line; mask 1 on the policy's content and newline, 0 elsewhere."""
    from rlvrflow.verifiers.episode import POLICY

    if len(episode.messages) != len(episode.sources):
        raise ValueError(f"the transcript has {len(episode.messages)} messages but {len(episode.sources)} sources")
    ids = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    mask = [0] * len(ids)
    for message, source in zip(episode.messages, episode.sources):
        tag, text = _line(message)
        own = int(source == POLICY)
        if own and PLAIN_STOP in text:
            raise ValueError(f"an assistant message holds a newline, which ends a message in the plain format: "
                             f"{text[:60]!r}; write it on one line")
        for piece, m in ((tag, 0), (text + PLAIN_STOP, own)):
            piece_ids = tokenizer(piece, add_special_tokens=False).input_ids
            ids += piece_ids
            mask += [m] * len(piece_ids)
    return ids, mask


PLAIN = EpisodeFormat(plain_prompt, plain_render, (PLAIN_STOP,))
