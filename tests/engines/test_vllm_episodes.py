"""Episodes on the vLLM engine: the same `play_episodes` calls as the HF engine, every live conversation's
next message in one `generate` per turn. Greedy, both engines play the same transcripts on the same
weights; sampled, a seed gives the same episodes twice; each transcript renders back to policy-masked
spans that decode to its assistant messages, each ending on the template's `<|im_end|>`.

Run with `make test-vllm` (skipped where vllm is not importable). The model is the in-project Qwen2
test model (ChatML template, BPE tokenizer), SFT for a few seconds on worked transcripts so that it calls the
tools: its episodes run to several turns, each later turn generated after the tool's result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip("vllm")

from rlvrflow.engines.factory import release  # noqa: E402
from rlvrflow.engines.hf_engine import HFEngine, SamplingParams  # noqa: E402
from rlvrflow.engines.vllm_engine import VLLMEngine  # noqa: E402
from rlvrflow.training.episode_format import chat_format  # noqa: E402
from rlvrflow.training.episodes import play_episodes  # noqa: E402
from rlvrflow.verifiers.environment import Environment  # noqa: E402

from ..training.test_episode_training import shop_env, worked  # noqa: E402

ORDERS = ((7, 30), (8, 45), (9, 12))


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Environment:
    return shop_env(tmp_path_factory.mktemp("shop"))


@pytest.fixture(scope="module")
def qwen(tmp_path_factory, env, one_torch_thread) -> Path:
    from rlvrflow.training.config import SFTConfig
    from rlvrflow.training.episode_sft import sft_on_transcripts
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.qwen_model import build_qwen2_model

    root = tmp_path_factory.mktemp("qwen")
    transcripts = [worked(o, t) for o, t in ORDERS]
    start = build_qwen2_model([json.dumps(e.messages) for e in transcripts] * 10, root / "start", seed=0)
    model, tok = load_model_and_tokenizer(start, "cpu", trainable=True)
    sc = SFTConfig(max_steps=80, learning_rate=3e-3, batch_size=3, max_length=1024, warmup_steps=0, logging_steps=20)
    sft_on_transcripts(model, tok, transcripts, env.schemas(), sc, seed=0, fmt=chat_format(tok))
    model.save_pretrained(root / "sft")
    tok.save_pretrained(root / "sft")
    return root / "sft"


@pytest.fixture(scope="module")
def engines(qwen):
    from rlvrflow.training.modeling import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(qwen, "cpu", trainable=False)
    fmt = chat_format(tok)
    # the vLLM engine stops on the template's end-of-turn token as the HF engine does
    end_of_turn = tuple(tok.convert_tokens_to_ids([s])[0] for s in fmt.stop)
    vl = VLLMEngine(str(qwen), dtype="float32", max_model_len=1024, enforce_eager=True, stop_token_ids=end_of_turn)
    yield HFEngine(model, tok), vl, tok, fmt
    release(vl)


ROWS = [{"id": f"r{o}", "prompt": f"Refund order {o}.", "reference": f"[[{o}, {t}]]"} for o, t in ORDERS]


def test_greedy_episodes_agree_with_the_hf_engine(engines, env):
    hf, vl, _, fmt = engines
    greedy = SamplingParams(temperature=0.0, max_new_tokens=16)
    by_hf = play_episodes(hf, env, ROWS, fmt, greedy, seed=0)
    by_vllm = play_episodes(vl, env, ROWS, fmt, greedy, seed=0)
    assert [e.messages for e in by_vllm] == [e.messages for e in by_hf]
    assert [e.verdict.status for e in by_vllm] == [e.verdict.status for e in by_hf]
    assert all("tool" in [m["role"] for m in e.messages] for e in by_vllm)  # a later turn read a tool's result


def test_sampled_episodes_repeat_with_the_seed_and_render_back_to_their_messages(engines, env):
    _, vl, tok, fmt = engines
    sampled = SamplingParams(temperature=1.0, max_new_tokens=16)
    rows = [r for r in ROWS for _ in range(4)]  # a group of 4 per prompt, all in one generate per turn
    a = play_episodes(vl, env, rows, fmt, sampled, seed=3)
    b = play_episodes(vl, env, rows, fmt, sampled, seed=3)
    assert [e.messages for e in a] == [e.messages for e in b]
    assert len({json.dumps(e.messages) for e in a}) > 1  # sampled, not one transcript repeated
    assert sum(len(e.messages) > 2 for e in a) >= len(a) // 2  # most went past their first message
    for ep in a:
        ids, mask = fmt.render(tok, ep, env.schemas())
        spans, run = [], []
        for i, m in zip(ids + [None], mask + [0]):
            if m:
                run.append(i)
            elif run:
                spans.append(tok.decode(run))
                run = []
        assert spans == [m["content"] + "<|im_end|>" for m in ep.messages if m["role"] == "assistant"]
