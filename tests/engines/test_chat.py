"""Rendering an episode with a real chat template: the in-project Qwen2 test tokenizer (ChatML, no tools
support: the Hermes fallback) and a Qwen-style template that takes `tools=` (tool results folded into a
user turn as <tool_response>). The policy mask's tokens decode to exactly the assistant messages."""

from __future__ import annotations

import json

import pytest

from rlvrflow.engines.chat import TOOLS_FALLBACK, render_episode, render_prompt, render_text, template_takes_tools

# tools listed in the system turn, tool results inside a user turn, as Qwen2.5's own template does
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{%- endif %}"
    "# Tools\n<tools>{%- for t in tools %}\n{{ t | tojson }}{%- endfor %}\n</tools><|im_end|>\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' or m.role == 'assistant' %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{%- elif m.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{%- endif %}"
    "\n<tool_response>\n{{ m.content }}\n</tool_response>"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order_items",
            "description": "lines of an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "issue_refund",
            "description": "refund an amount",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}, "amount": {"type": "number"}},
            },
        },
    },
]
CALL = '<tool_call>\n{"name": "get_order_items", "arguments": {"order_id": 7}}\n</tool_call>'
REFUND = 'The kettle is 36.\n<tool_call>\n{"name": "issue_refund", "arguments": {"order_id": 7, "amount": 36.0}}\n</tool_call>'
MESSAGES = [
    {"role": "system", "content": "You work the support desk."},
    {"role": "user", "content": "The kettle of order 7 arrived damaged. Please refund it."},
    {"role": "assistant", "content": CALL},
    {"role": "tool", "name": "get_order_items", "content": json.dumps({"rows": [["Kettle", 1, 36.0]]})},
    {"role": "assistant", "content": REFUND},
    {"role": "tool", "name": "issue_refund", "content": json.dumps({"rows_affected": 1})},
    {"role": "assistant", "content": "I have refunded 36 yuan for the kettle."},
]


@pytest.fixture(scope="module")
def qwen_tokenizer():
    """The tokenizer `rlvrflow make-model qwen2` builds, trained on text like the episodes'."""
    from rlvrflow.training.qwen_model import build_bpe_tokenizer

    corpus = [json.dumps(MESSAGES), json.dumps(TOOLS), TOOLS_FALLBACK] * 20
    return build_bpe_tokenizer(corpus, 600)


@pytest.fixture(scope="module")
def tools_tokenizer(qwen_tokenizer):
    import copy

    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = TOOLS_TEMPLATE
    return tok


def _masked_spans(tok, ids, mask) -> list[str]:
    spans, run = [], []
    for i, m in zip(ids, mask):
        if m:
            run.append(i)
        elif run:
            spans.append(tok.decode(run))
            run = []
    return spans + ([tok.decode(run)] if run else [])


def test_the_make_model_template_ignores_tools_so_the_hermes_fallback_lists_them(qwen_tokenizer):
    assert not template_takes_tools(qwen_tokenizer)
    text, _ = render_text(qwen_tokenizer, MESSAGES, TOOLS)
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nYou work the support desk.\n\n# Tools")
    assert '"name": "issue_refund"' in system and "<tool_call>" in system
    assert "<|im_start|>tool\n" in text  # the tool result in the template's tool role
    prompt = render_prompt(qwen_tokenizer, MESSAGES[:4], TOOLS)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert prompt.count("# Tools") == 1


def test_a_template_that_takes_tools_gets_them_through_its_argument(tools_tokenizer):
    assert template_takes_tools(tools_tokenizer)
    text, _ = render_text(tools_tokenizer, MESSAGES, TOOLS)
    assert text.count("# Tools") == 1 and "You may call" not in text  # no fallback on top
    assert '<tool_response>\n{"rows_affected": 1}\n</tool_response>' in text


@pytest.mark.parametrize("fixture", ["qwen_tokenizer", "tools_tokenizer"])
def test_policy_mask_decodes_to_exactly_the_assistant_messages(request, fixture):
    tok = request.getfixturevalue(fixture)
    ids, mask = render_episode(tok, MESSAGES, TOOLS)
    assert len(ids) == len(mask) and set(mask) == {0, 1}
    text, _ = render_text(tok, MESSAGES, TOOLS)
    assert tok.decode(ids) == text  # the pieces put back together are the whole conversation
    assistant = [m["content"] for m in MESSAGES if m["role"] == "assistant"]
    assert _masked_spans(tok, ids, mask) == [a + "<|im_end|>" for a in assistant]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    # every end-of-turn token outside an assistant turn (system, user, tool) is masked out
    assert sum(m for i, m in zip(ids, mask) if i == end) == 3 < ids.count(end)


def test_an_episode_object_and_tool_objects_render_as_their_messages_and_schemas(qwen_tokenizer, tmp_path):
    from rlvrflow.verifiers.environment import Tool
    from rlvrflow.verifiers.episode import Episode

    tools = [
        Tool(
            name=t["function"]["name"],
            description=t["function"]["description"],
            parameters=t["function"]["parameters"],
            sql="SELECT 1",
        )
        for t in TOOLS
    ]
    episode = Episode(list(MESSAGES), ["prompt"] * len(MESSAGES))
    assert render_episode(qwen_tokenizer, episode, tools) == render_episode(qwen_tokenizer, MESSAGES, TOOLS)


def test_without_tools_nothing_is_added(qwen_tokenizer):
    text, spans = render_text(qwen_tokenizer, MESSAGES, None)
    assert "# Tools" not in text and len(spans) == 3


def test_a_template_that_rewrites_the_assistant_text_is_an_error(qwen_tokenizer):
    import copy

    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = (
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim | upper }}<|im_end|>\n{%- endfor %}"
    )
    with pytest.raises(ValueError, match="changed assistant message 2's text"):
        render_episode(tok, MESSAGES, None)


def test_an_assistant_text_quoted_earlier_in_the_conversation_is_masked_where_the_assistant_wrote_it(qwen_tokenizer):
    messages = [{"role": "user", "content": "Reply with exactly: Done."}, {"role": "assistant", "content": "Done."}]
    ids, mask = render_episode(qwen_tokenizer, messages, None)
    assert _masked_spans(qwen_tokenizer, ids, mask) == ["Done.<|im_end|>"]
    first = mask.index(1)
    assert qwen_tokenizer.decode(ids[:first]).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("reply", ["ant", "", "a"])
def test_a_short_or_empty_reply_is_masked_where_the_assistant_wrote_it_not_inside_the_header(qwen_tokenizer, reply):
    """'ant' also occurs in the header `<|im_start|>assistant`; an empty reply still ended its turn."""
    messages = [{"role": "user", "content": "Refund order 7."}, {"role": "assistant", "content": reply}]
    ids, mask = render_episode(qwen_tokenizer, messages)
    assert _masked_spans(qwen_tokenizer, ids, mask) == [reply + "<|im_end|>"]
    assert qwen_tokenizer.decode(ids).endswith("<|im_start|>assistant\n" + reply + "<|im_end|>\n")


def test_the_end_of_turn_token_is_the_templates_even_where_eos_is_another(qwen_tokenizer):
    """A base model's tokenizer may call `<|endoftext|>` its EOS while its template closes turns with
    `<|im_end|>`: the policy generated `<|im_end|>` to stop, so that is the token its mask holds."""
    import copy

    base = copy.deepcopy(qwen_tokenizer)
    base.eos_token = "<|endoftext|>"
    ids, mask = render_episode(base, MESSAGES)
    assistant = [m["content"] for m in MESSAGES if m["role"] == "assistant"]
    assert _masked_spans(base, ids, mask) == [a + "<|im_end|>" for a in assistant]
