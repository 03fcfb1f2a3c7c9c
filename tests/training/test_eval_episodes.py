"""The evaluate stage's episode view of its engine (training/eval_episodes.py): the same model and stop
ids, prompts rendered by the episode format and encoded once, the stage's engine left as it was."""

from __future__ import annotations

import json

from rlvrflow.engines.hf_engine import FormattedEngine, PromptFormat
from rlvrflow.training.episode_format import PLAIN
from rlvrflow.training.eval_episodes import episode_view

MESSAGES = [
    {"role": "system", "content": "You work the support desk."},
    {"role": "user", "content": "The kettle of order 7 arrived damaged. Please refund it."},
]


class IdsEngine:
    """What vLLM is behind a FormattedEngine: it takes token ids and records them."""

    def __init__(self):
        self.seen = []

    def generate(self, prompts, n, sampling, seed):
        self.seen += prompts
        return [[] for _ in prompts]


def test_a_chat_model_gets_the_template_once_and_its_end_of_turn_as_the_stop():
    from rlvrflow.engines.chat import TOOLS_FALLBACK
    from rlvrflow.training.qwen_model import build_bpe_tokenizer

    tok = build_bpe_tokenizer([json.dumps(MESSAGES), TOOLS_FALLBACK] * 10, 400)
    inner = IdsEngine()
    engine = FormattedEngine(inner, tok, PromptFormat("chat"))
    view, fmt = episode_view(engine)
    assert fmt.stop == ("<|im_end|>",) and engine.prompt_format == PromptFormat("chat")
    text = fmt.prompt(MESSAGES, [])
    view.generate([text], 1, None, 0)
    assert inner.seen == [tok(text, add_special_tokens=False).input_ids]  # no second BOS or template
    assert tok.decode(inner.seen[0]).endswith("<|im_start|>assistant\n")


def test_the_character_model_gets_the_plain_format_with_its_bos_on_the_same_model():
    from rlvrflow.engines import HFEngine

    from ..conftest import build_model, build_tokenizer

    tok = build_tokenizer()
    engine = HFEngine(build_model(tok), tok)
    view, fmt = episode_view(engine)
    assert fmt is PLAIN and view.model is engine.model and view.eos_token_ids == engine.eos_token_ids
    text = fmt.prompt([{"role": "user", "content": "refund order 7."}], [])
    assert view.prompt_format.encode(tok, text) == tok(text).input_ids and tok(text).input_ids[0] == tok.bos_token_id
    assert engine.prompt_format == PromptFormat()  # the stage's engine is untouched
