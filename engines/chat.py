"""An episode's conversation as the model sees it: the tokenizer's chat template, the tools, and which
tokens the policy wrote.

    ids, mask = render_episode(tokenizer, episode, env.schemas())   # mask[i] = 1: the policy wrote ids[i]
    text = render_prompt(tokenizer, episode.messages, env.schemas()) # the next turn's generation prompt

Tools go to the template's `tools=` argument when the template uses it (it renders differently with
them); a template that ignores tools gets the documented fallback instead: a system message listing
the tools in Hermes style (`<tools>` JSON, `<tool_call>` instructions: TOOLS_FALLBACK), put after the
episode's own system message or as the first message. Tool results go in as `{"role": "tool"}`
messages, which the template renders in its tool role.

The policy mask: the rendered text is cut at each assistant message's own text (found in order,
verbatim: a template that rewrites an assistant's text is an error), plus the end-of-turn token
when the template writes it right after (`<|im_end|>`: the policy generated it to stop, so it is
the policy's). Each piece is encoded on its own, so an assistant turn's ids are the encoding of its
text alone, what the engine generated after the prompt, and the template's scaffolding, the
prompt and the tool results are 0. Needs a Hugging Face tokenizer; imports nothing heavy itself.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from rlvrflow.engines.hf_engine import end_of_turn_id

TOOLS_FALLBACK = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": '
    "<args-json-object>}}\n</tool_call>"
)


def _schemas(tools: Sequence[Any] | None) -> list[dict]:
    """OpenAI-form tool schemas from schemas or verifiers.environment.Tool objects."""
    return [t.schema() if hasattr(t, "schema") else dict(t) for t in tools or []]


def _messages(transcript: Any) -> list[dict]:
    messages = transcript.messages if hasattr(transcript, "messages") else transcript
    return [dict(m) for m in messages]


def template_takes_tools(tokenizer) -> bool:
    """Whether the chat template renders the `tools` argument (a probe with and without one differs)."""
    probe = [{"role": "user", "content": "hi"}]
    tool = [
        {
            "type": "function",
            "function": {
                "name": "probe_tool",
                "description": "probe",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    return tokenizer.apply_chat_template(probe, tools=tool, tokenize=False) != tokenizer.apply_chat_template(
        probe, tokenize=False
    )


def _with_tools(tokenizer, messages: list[dict], tools: list[dict]) -> tuple[list[dict], dict]:
    """The messages and apply_chat_template's extra arguments that carry the tools."""
    if not tools:
        return messages, {}
    if template_takes_tools(tokenizer):
        return messages, {"tools": tools}
    listing = TOOLS_FALLBACK.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    if messages and messages[0]["role"] == "system":
        first = messages[0]["content"]
        return [{**messages[0], "content": f"{first}\n\n{listing}" if first else listing}, *messages[1:]], {}
    return [{"role": "system", "content": listing}, *messages], {}


def render_prompt(tokenizer, messages: Sequence[dict], tools: Sequence[Any] | None = None) -> str:
    """The conversation so far with the generation prompt for the assistant's next message."""
    msgs, extra = _with_tools(tokenizer, _messages(messages), _schemas(tools))
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **extra)


def render_text(tokenizer, transcript: Any, tools: Sequence[Any] | None = None) -> tuple[str, list[tuple[int, int]]]:
    """The whole conversation's text, and the (start, end) character span of each assistant
    message's text in it (with the end-of-turn token right after, when there is one)."""
    msgs, extra = _with_tools(tokenizer, _messages(transcript), _schemas(tools))
    text = tokenizer.apply_chat_template(msgs, tokenize=False, **extra)
    # the token the template closes an assistant turn with (what the policy stopped on), which need not
    # be the tokenizer's EOS (a base model's <|endoftext|> beside its template's <|im_end|>)
    eot = end_of_turn_id(tokenizer)
    end_of_turn = tokenizer.convert_ids_to_tokens(eot) if eot is not None else (tokenizer.eos_token or "")
    spans, cursor = [], 0
    for k, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        try:  # the conversation before this message, with the assistant's header: the reply starts there
            before = tokenizer.apply_chat_template(msgs[:k], tokenize=False, add_generation_prompt=True, **extra)
        except Exception:  # noqa: BLE001 - a template may refuse a partial conversation; search from the cursor
            before = ""
        if before and text.startswith(before) and text.startswith(m["content"], len(before)):
            start = len(before)  # exactly where the header ends: a short reply ("ant") is not found inside it
        else:
            start = text.find(m["content"], cursor)
        if start < 0:
            raise ValueError(
                f"the chat template changed assistant message {k}'s text, so its tokens cannot be "
                f"told apart: {m['content'][:80]!r}"
            )
        end = start + len(m["content"])
        if end_of_turn and text.startswith(end_of_turn, end):
            end += len(end_of_turn)
        spans.append((start, end))
        cursor = end
    return text, spans


def render_episode(tokenizer, transcript: Any, tools: Sequence[Any] | None = None) -> tuple[list[int], list[int]]:
    """(input_ids, policy_mask) of a finished episode's whole conversation.

    `transcript`: a verifiers.episode.Episode or its list of messages ({role, content}, tool results
    as role "tool"); `tools`: the environment's tools (`env.schemas()`, or Tool objects), None for
    none. policy_mask[i] is 1 where the policy wrote input_ids[i] (its assistant messages' text,
    tool calls included, and each one's end-of-turn token), 0 for the system and user messages, the
    tool results and the template's scaffolding. Both lists have one entry per token."""
    text, spans = render_text(tokenizer, transcript, tools)
    ids: list[int] = []
    mask: list[int] = []
    cuts = [0] + [c for span in spans for c in span] + [len(text)]
    for k in range(len(cuts) - 1):
        piece = text[cuts[k] : cuts[k + 1]]
        if piece:
            enc = tokenizer(piece, add_special_tokens=False)["input_ids"]
            ids += enc
            mask += [k % 2] * len(enc)  # odd pieces are the assistant spans
    return ids, mask
