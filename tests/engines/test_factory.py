"""make_engine without vLLM: the clear errors, the hf engine's prompts, and what a vLLM engine would be fed.

The vLLM side itself (token ids it really sees, greedy agreement, tiering and eval) is in
test_engines_vllm.py, which runs in the vllm venv. Here the vLLM engine is replaced by a recorder
where needed, so these run in the main venv.
"""

import importlib.util

import pytest

from rlvrflow.engines.factory import checkpoint_dtype, make_engine, vllm_prompting
from rlvrflow.engines.hf_engine import FormattedEngine, HFEngine, PromptFormat, SamplingParams

BOS_TEMPLATE = (
    "<s>{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    """The in-project Qwen2 test model: ChatML template, EOS <|im_end|>, no BOS."""
    from rlvrflow.training.qwen_model import build_qwen2_model

    corpus = ["where is my order 12345?", "refund for order 777 please", "hello, the parcel never came"] * 20
    return build_qwen2_model(corpus, tmp_path_factory.mktemp("qwen") / "m", seed=0)


@pytest.fixture
def without_vllm(monkeypatch):
    """This Python as if vllm were not installed (the main venv), whichever venv runs the test."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))


@pytest.fixture
def with_vllm(monkeypatch):
    """This Python as if vllm were installed: for the checks make_engine does before starting vLLM."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))


class Recorder:
    """An engine that takes token ids (as VLLMEngine does) and records what it was given."""

    def __init__(self):
        self.prompts = None

    def generate(self, prompts, n, sampling, seed):
        self.prompts = prompts
        return [[] for _ in prompts]


def test_unknown_engine_names_the_field(tiny_model_dir):
    with pytest.raises(ValueError, match=r"curriculum\.engine='sglang' is not an engine; use one of: hf, vllm"):
        make_engine("sglang", tiny_model_dir, field="curriculum.engine")


def test_vllm_without_vllm_says_how_to_install(tiny_model_dir, without_vllm):
    with pytest.raises(ImportError) as err:
        make_engine("vllm", tiny_model_dir, field="eval.engine")
    msg = str(err.value)
    assert "eval.engine is 'vllm' but vllm is not installed" in msg
    assert "pip install 'rlvrflow[gpu]'" in msg and "scripts/setup_vllm.sh" in msg and "set eval.engine: hf" in msg


def test_tiering_and_eval_name_their_own_field(tmp_path, tiny_model_dir, without_vllm):
    import polars as pl

    from rlvrflow.curriculum import CurriculumConfig, tier_to_dir
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.eval import evaluate

    df = pl.DataFrame({"id": ["a"], "prompt": ["1+1="], "category": ["arith"]})
    with pytest.raises(ImportError, match=r"curriculum\.engine is 'vllm'"):
        tier_to_dir(df, tiny_model_dir, CurriculumConfig(engine="vllm"), tmp_path / "tiers", seed=0)
    with pytest.raises(ImportError, match=r"eval\.engine is 'vllm'"):
        evaluate(tiny_model_dir, df, EvalConfig(engine="vllm"), seed=0, device="cpu")


def test_config_rejects_an_unknown_engine():
    from pydantic import ValidationError

    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig

    with pytest.raises(ValidationError, match="engine"):
        CurriculumConfig(engine="tgi")
    with pytest.raises(ValidationError, match="engine"):
        EvalConfig(engine="tgi")


def test_hf_engine_renders_the_chat_prompt_as_before(qwen_dir):
    from transformers import AutoTokenizer

    engine = make_engine("hf", qwen_dir, batch_size=4)
    tok = AutoTokenizer.from_pretrained(qwen_dir)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "where is 12345?"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nwhere is 12345?<|im_end|>\n<|im_start|>assistant\n"
    ids, _ = engine._encode(["where is 12345?"])
    assert ids[0].tolist() == tok(text, add_special_tokens=False).input_ids
    assert engine.prompt_format == PromptFormat("chat")
    assert engine.eos_token_ids == (tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"))
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    old = HFEngine.from_pretrained(str(qwen_dir), batch_size=4)
    assert engine.generate(["where is 12345?"], 1, greedy, 0) == old.generate(["where is 12345?"], 1, greedy, 0)


def test_vllm_gets_the_hf_engines_format_and_stop_ids(qwen_dir):
    hf = make_engine("hf", qwen_dir)
    tokenizer, fmt, stops = vllm_prompting(qwen_dir)
    assert fmt == hf.prompt_format and set(stops) == set(hf.eos_token_ids)
    recorder = Recorder()
    FormattedEngine(recorder, tokenizer, fmt).generate(["where is 12345?"], 2, SamplingParams(), 0)
    assert recorder.prompts == [hf._encode(["where is 12345?"])[0][0].tolist()]


def test_a_template_that_writes_bos_gets_one_bos(tiny_model, tiny_tokenizer):
    """The char tokenizer adds <s> to any text it encodes, and this template writes <s> too: text handed to
    an engine that tokenizes it again (vLLM does) would start <s> <s>. FormattedEngine hands over ids."""
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = BOS_TEMPLATE
    fmt = PromptFormat("chat")
    bos = tok.bos_token_id
    text = fmt.render(tok, "7*8?")
    assert tok(text).input_ids[:2] == [bos, bos]  # the double BOS a re-tokenizing engine would see
    recorder = Recorder()
    FormattedEngine(recorder, tok, fmt).generate(["7*8?", "a"], 1, SamplingParams(), 0)
    hf = HFEngine(tiny_model, tok, prompt_format=fmt)
    for prompt, ids in zip(["7*8?", "a"], recorder.prompts):
        assert ids[0] == bos and ids[1] != bos
        assert ids == tok(text if prompt == "7*8?" else fmt.render(tok, "a"), add_special_tokens=False).input_ids
        assert ids == hf._encode([prompt])[0][0].tolist()


def test_vllm_refuses_a_lora_adapter_checkpoint(tmp_path, with_vllm):
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"eval\.engine: vllm cannot load the LoRA adapter checkpoint .*--merge"):
        make_engine("vllm", tmp_path, field="eval.engine")


def test_missing_model_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"curriculum\.engine: no model directory"):
        make_engine("hf", tmp_path / "nope", field="curriculum.engine")


@pytest.mark.parametrize(
    "config, want",
    [
        ({"dtype": "bfloat16"}, "bfloat16"),
        ({"torch_dtype": "float16"}, "float16"),
        ({}, "float32"),
    ],
)
def test_checkpoint_dtype(config, want):
    assert checkpoint_dtype(config) == want


@pytest.mark.slow
def test_first_loads_from_several_threads_at_once(tiny_model_dir):
    """The tier stage's chunks load the model in threads; when the stages before it came from the cache,
    those threads are the first to import transformers in the process. Unlocked, that import fails
    ("cannot import name 'AutoModelForCausalLM'") nearly every time. A fresh interpreter, so the
    import really is the first."""
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "from rlvrflow.engines.factory import make_engine\n"
        "from rlvrflow.training.modeling import load_model_and_tokenizer\n"
        "errors = []\n"
        "def load(i):\n"
        "    try:\n"
        "        make_engine('hf', sys.argv[1]) if i % 2 else load_model_and_tokenizer(sys.argv[1], 'cpu')\n"
        "    except Exception as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(errors); sys.exit(1 if errors else 0)\n"
    )
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script, str(tiny_model_dir)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_vllm_stops_on_a_stop_string_that_is_one_special_token(qwen_dir):
    """An episode format's `<|im_end|>` stop: vLLM decodes without special tokens, so it could never match
    the string; the engine stops on its id instead. A plain string (a newline) stays a text stop."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from rlvrflow.engines.vllm_engine import VLLMEngine

    tok = AutoTokenizer.from_pretrained(qwen_dir)
    engine = VLLMEngine.__new__(VLLMEngine)  # no vLLM here: only its tokenizer is read
    engine.llm = SimpleNamespace(get_tokenizer=lambda: tok)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert end in tok.all_special_ids
    assert engine._special_stops(("<|im_end|>", "\n", "Answer:")) == [end]
    assert engine._special_stops(()) == []


def test_grpos_vllm_engine_stops_where_the_hf_engine_does(qwen_dir, monkeypatch):
    """GRPO builds its vLLM rollout engine itself: it stops on the HF engine's ids, the chat template's
    end of turn among them, or a model whose EOS is another token would write past its turn; and its
    context is the model's positions when fewer than 4096 (vLLM refuses a longer one)."""
    import torch

    import rlvrflow.engines.vllm_engine as vllm_engine
    from rlvrflow.training.config import TrainingConfig
    from rlvrflow.training.grpo import _rollout_engine

    seen = {}

    class Built:
        def __init__(self, model, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(vllm_engine, "VLLMEngine", Built)
    hf = make_engine("hf", qwen_dir)
    assert hf.prompt_format.kind == "chat"
    cfg = TrainingConfig(model=str(qwen_dir))
    _rollout_engine("vllm", None, hf.tokenizer, qwen_dir, torch.device("cpu"), cfg, hf.prompt_format, torch.float32)
    end = hf.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert end in seen["stop_token_ids"] and set(seen["stop_token_ids"]) == set(hf.eos_token_ids)
    assert seen["max_model_len"] == hf.model.config.max_position_embeddings < 4096  # vLLM refuses more


def test_every_episode_player_hands_its_engine_one_bos(tiny_model, tiny_tokenizer):
    """Tiering, GRPO and evaluate play episodes through `episode_view`: the chat template renders the
    conversation (writing <s> itself) and its ids reach a token-id engine (vLLM's FormattedEngine) and the
    HF engine with one BOS, not the tokenizer's second one."""
    import copy

    from rlvrflow.training.eval_episodes import episode_view

    tok = copy.deepcopy(tiny_tokenizer)
    # BOS_TEMPLATE with an end of turn after each message, which an episode format needs
    tok.chat_template = (
        "<s>{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}" + tok.eos_token + "\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    fmt = PromptFormat("chat")
    opening = [{"role": "user", "content": "Refund order 7."}]
    recorder = Recorder()
    vllm_view, episode_fmt = episode_view(FormattedEngine(recorder, tok, fmt))
    hf_view, _ = episode_view(HFEngine(tiny_model, tok, prompt_format=fmt))
    text = episode_fmt.prompt(opening, [])
    assert text.startswith("<s>") and tok(text).input_ids[:2] == [tok.bos_token_id] * 2
    vllm_view.generate([text], 1, SamplingParams(), 0)
    for ids in (recorder.prompts[0], hf_view._encode([text])[0][0].tolist()):
        assert ids[0] == tok.bos_token_id and ids[1] != tok.bos_token_id
