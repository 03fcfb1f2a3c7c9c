"""How an episode's conversation becomes model input: the prompt text the engine continues, and the
token ids with a per-token policy mask that the loss reads.

    fmt = PLAIN                                             # or chat_format(tokenizer), or your own EpisodeFormat
    text = fmt.prompt(messages, tools)                      # the conversation so far + the assistant's opening
    ids, mask = fmt.render(tokenizer, episode, tools)       # mask[i] = 1 where the policy wrote token i

An `EpisodeFormat` is two functions and the stop strings that end an assistant message. The trainer
(training/episodes.py) only calls these. `chat_format(tokenizer)` is the one for a model with a chat
template (engines/chat.py: the template's `tools` argument or the Hermes fallback, its tool role, the
policy mask from the template's spans, the end-of-turn token as the stop).

The chain's stages take the run's format from its prompt format (`run_format`): a run with chat
prompts renders episodes with `chat_format`, a run with raw prompts with `PLAIN`.

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
            raise ValueError(
                f"an assistant message holds a newline, which ends a message in the plain format: "
                f"{text[:60]!r}; write it on one line"
            )
        for piece, m in ((tag, 0), (text + PLAIN_STOP, own)):
            piece_ids = tokenizer(piece, add_special_tokens=False).input_ids
            ids += piece_ids
            mask += [m] * len(piece_ids)
    return ids, mask


PLAIN = EpisodeFormat(plain_prompt, plain_render, (PLAIN_STOP,))


def chat_format(tokenizer) -> EpisodeFormat:
    """Episodes through `tokenizer`'s chat template (engines/chat.py: `render_prompt` for the next turn,
    `render_episode` for the ids and policy mask); an assistant message ends at the template's
    end-of-turn token, which the mask counts as the policy's."""
    from rlvrflow.engines.chat import render_episode, render_prompt
    from rlvrflow.engines.hf_engine import end_of_turn_id

    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("chat_format needs a tokenizer with a chat template; use PLAIN for a model without one")
    end = end_of_turn_id(tokenizer)
    if end is None:
        raise ValueError(
            "the chat template writes no special token after an assistant turn, so nothing would "
            "end a message; use PLAIN or a template with an end-of-turn token"
        )

    def prompt(messages: list[dict], tools: list[dict] | None = None) -> str:
        return render_prompt(tokenizer, messages, tools)

    return EpisodeFormat(prompt, render_episode, (tokenizer.convert_ids_to_tokens(end),))


def run_format(tokenizer, prompt_kind: str) -> EpisodeFormat:
    """The episode format of a run whose prompts are `prompt_kind` (engines.hf_engine.PromptFormat.kind):
    `chat_format(tokenizer)` for chat prompts, `PLAIN` for raw ones (the embedded character model)."""
    return chat_format(tokenizer) if prompt_kind == "chat" else PLAIN
