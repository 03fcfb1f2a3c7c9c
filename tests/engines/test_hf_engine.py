"""HFEngine on a tiny random Llama: shapes, determinism, greedy, log-probs, stop strings, side effects.

Every engine test runs for both decoders: "shared" (ours: one prefill per prompt, KV cache repeated
for its samples, ended rows compacted away) and "hf" (transformers' `generate`).
"""

import math

import pytest
import torch

from rlvrflow.engines.hf_engine import Completion, HFEngine, RolloutEngine, SamplingParams, plan_batches, pick_tokens

PROMPTS = ["12+3=", "what is 7*8?", "a"]


@pytest.fixture(params=["shared", "hf"])
def engine(request, tiny_model, tiny_tokenizer):
    return HFEngine(tiny_model, tiny_tokenizer, batch_size=4, decode=request.param)


def test_shapes_and_protocol(engine):
    groups = engine.generate(PROMPTS, n=3, sampling=SamplingParams(max_new_tokens=6), seed=0)
    assert isinstance(engine, RolloutEngine)
    assert [len(g) for g in groups] == [3, 3, 3]
    for c in (c for g in groups for c in g):
        assert isinstance(c, Completion)
        assert 1 <= len(c.token_ids) <= 6
        assert len(c.logprobs) == len(c.token_ids)
        assert all(lp <= 0 for lp in c.logprobs)
        assert c.finish_reason in ("stop", "length")
        assert c.finish_reason == "length" or c.token_ids[-1] == engine.eos_token_ids[0]


def test_same_seed_same_samples_other_seed_differs(engine):
    sp = SamplingParams(temperature=1.0, max_new_tokens=8)
    a = engine.generate(PROMPTS, n=4, sampling=sp, seed=7)
    b = engine.generate(PROMPTS, n=4, sampling=sp, seed=7)
    c = engine.generate(PROMPTS, n=4, sampling=sp, seed=8)
    assert a == b
    assert [x.token_ids for g in a for x in g] != [x.token_ids for g in c for x in g]


def test_samples_within_a_group_differ(engine):
    group = engine.generate(["12+3="], n=6, sampling=SamplingParams(max_new_tokens=8), seed=0)[0]
    assert len({c.token_ids for c in group}) > 1


def test_greedy_matches_a_manual_argmax_loop(engine, tiny_model, tiny_tokenizer):
    sp = SamplingParams(temperature=0.0, max_new_tokens=5)
    group = engine.generate(["12+3="], n=3, sampling=sp, seed=0)[0]
    assert len({c.token_ids for c in group}) == 1
    ids = tiny_tokenizer("12+3=", return_tensors="pt")["input_ids"]
    want = []
    with torch.no_grad():
        for _ in range(5):
            nxt = int(tiny_model(ids).logits[0, -1].argmax())
            want.append(nxt)
            if nxt == tiny_tokenizer.eos_token_id:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert list(group[0].token_ids) == want


def _unpadded_logits(model, tokenizer, prompt, completion):
    """(T, V) logits that predict each completion token, from one forward pass with no padding or cache."""
    prompt_ids = tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        return model(torch.tensor([prompt_ids + list(completion.token_ids)])).logits[0, len(prompt_ids) - 1 : -1]


@pytest.mark.parametrize("temperature", [1.0, 1.3, 0.7])
def test_logprobs_are_the_tempered_distribution_drawn_from(engine, tiny_model, tiny_tokenizer, temperature):
    """log_softmax(logits / T) of an unpadded forward pass: left padding and the KV cache change nothing,
    and the temperature is the rollouts' (what GRPO's loss scores at the same T)."""
    sp = SamplingParams(temperature=temperature, max_new_tokens=6)
    for prompt, group in zip(PROMPTS, engine.generate(PROMPTS, n=2, sampling=sp, seed=3)):
        for c in group:
            logits = _unpadded_logits(tiny_model, tiny_tokenizer, prompt, c) / temperature
            want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
            assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-4)


def test_logprobs_within_top_p_are_renormalized_over_the_nucleus(engine, tiny_model, tiny_tokenizer):
    """With top-p the token was drawn from the nucleus alone: its log-prob is over the nucleus, so at
    least the unrestricted one (the nucleus's mass is below 1), and equal to it for a token whose
    nucleus is everything."""
    from rlvrflow.engines.hf_engine import sampling_logits

    sp = SamplingParams(temperature=1.2, top_p=0.5, max_new_tokens=6)
    tighter = 0
    for prompt, group in zip(PROMPTS, engine.generate(PROMPTS, n=3, sampling=sp, seed=4)):
        for c in group:
            logits = _unpadded_logits(tiny_model, tiny_tokenizer, prompt, c)
            ids = torch.tensor(c.token_ids)[:, None]
            want = torch.log_softmax(sampling_logits(logits, sp), -1).gather(-1, ids)[:, 0]
            whole = torch.log_softmax(logits / sp.temperature, -1).gather(-1, ids)[:, 0]
            got = torch.tensor(c.logprobs)
            assert torch.isfinite(got).all()
            assert torch.allclose(got, want, atol=1e-4)
            assert (got >= whole - 1e-5).all()
            tighter += int((got > whole + 1e-3).sum())
    assert tighter > 0, "top_p=0.5 should have cut some token's distribution"


def test_greedy_logprobs_are_the_raw_distribution(engine, tiny_model, tiny_tokenizer):
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    for prompt, group in zip(PROMPTS, engine.generate(PROMPTS, n=1, sampling=greedy, seed=0)):
        c = group[0]
        logits = _unpadded_logits(tiny_model, tiny_tokenizer, prompt, c)
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-4)


def test_stop_string_cuts_text_and_tokens(engine, tiny_tokenizer):
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    full = engine.generate(["12+3="], n=1, sampling=greedy, seed=0)[0][0]
    text = full.text
    assert len(text) >= 3, "the tiny model should emit a few characters greedily"
    stop = text[2]
    cut = text.index(stop)
    got = engine.generate(["12+3="], n=1, sampling=SamplingParams(0.0, 1.0, 12, (stop,)), seed=0)[0][0]
    assert got.text == text[:cut]
    assert got.finish_reason == "stop"
    assert tiny_tokenizer.decode(got.token_ids, skip_special_tokens=True) == text[: cut + 1]
    assert len(got.logprobs) == len(got.token_ids)


def test_global_rng_and_training_mode_are_left_alone(engine, tiny_model):
    tiny_model.train()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    engine.generate(["a"], n=2, sampling=SamplingParams(max_new_tokens=3), seed=0)
    assert torch.equal(torch.rand(3), expected)
    assert tiny_model.training
    tiny_model.eval()


@pytest.mark.parametrize("decode", ["shared", "hf"])
def test_batch_size_one_gives_valid_groups(tiny_model, tiny_tokenizer, decode):
    eng = HFEngine(tiny_model, tiny_tokenizer, batch_size=1, decode=decode)
    groups = eng.generate(PROMPTS, n=2, sampling=SamplingParams(max_new_tokens=4), seed=0)
    assert [len(g) for g in groups] == [2, 2, 2]
    assert all(math.isfinite(lp) for g in groups for c in g for lp in c.logprobs)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"stop": "\n"}, "stop"),
    ],
)
def test_bad_sampling_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("n, batch_size", [(1, 4), (3, 4), (4, 4), (5, 2), (2, 7)])
def test_shared_decoder_greedy_equals_transformers_generate(tiny_model, tiny_tokenizer, n, batch_size):
    """Same tokens and (to float tolerance) the same log-probs as `generate`, for any batching."""
    prompts = PROMPTS + ["Order SO1: 2 x 5 yuan", "退款金额是多少?"]
    sp = SamplingParams(temperature=0.0, max_new_tokens=9)
    ours = HFEngine(tiny_model, tiny_tokenizer, batch_size=batch_size).generate(prompts, n, sp, seed=0)
    ref = HFEngine(tiny_model, tiny_tokenizer, batch_size=batch_size, decode="hf").generate(prompts, n, sp, seed=0)
    for a, b in zip((c for g in ours for c in g), (c for g in ref for c in g)):
        assert (a.text, a.token_ids, a.finish_reason) == (b.text, b.token_ids, b.finish_reason)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_shared_decoder_ends_rows_at_eos_and_keeps_the_others_going(tiny_model, tiny_tokenizer):
    """Compaction must not mix rows up: every completion equals its own unbatched greedy decode."""
    eos = tiny_tokenizer.eos_token_id
    sp = SamplingParams(temperature=0.0, max_new_tokens=12)
    prompts = [f"{a}+{b}=" for a in range(6) for b in range(3)]
    batched = HFEngine(tiny_model, tiny_tokenizer, batch_size=64).generate(prompts, 1, sp, seed=0)
    single = HFEngine(tiny_model, tiny_tokenizer, batch_size=1).generate(prompts, 1, sp, seed=0)
    assert [g[0].token_ids for g in batched] == [g[0].token_ids for g in single]
    for g in batched:
        assert eos not in g[0].token_ids[:-1]


def test_plan_batches_covers_every_sequence_once_in_order():
    for n_prompts, n, bs in [(5, 3, 4), (5, 3, 9), (3, 10, 4), (7, 1, 3), (1, 1, 1), (4, 4, 4)]:
        plan = plan_batches(n_prompts, n, bs)
        flat = [i for idx, copies in plan for i in idx for _ in range(copies)]
        assert flat == [i for i in range(n_prompts) for _ in range(n)]
        assert all(len(idx) * copies <= bs for idx, copies in plan)


def test_pick_tokens_greedy_nucleus_and_temperature():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.9], [5.0, 0.0, 0.0, 0.0]])
    assert pick_tokens(logits, SamplingParams(temperature=0.0)).tolist() == [1, 0]
    torch.manual_seed(0)
    tiny_nucleus = SamplingParams(temperature=1.0, top_p=1e-6)
    assert all(pick_tokens(logits, tiny_nucleus).tolist() == [1, 0] for _ in range(50))
    torch.manual_seed(0)
    half = SamplingParams(temperature=1.0, top_p=0.6)  # row 0: tokens 1 and 3 hold ~0.9; 0 and 2 never drawn
    drawn = {int(pick_tokens(logits, half)[0]) for _ in range(200)}
    assert drawn == {1, 3}


def test_loading_from_several_threads_at_once_works(tmp_path):
    """The flows' threads runner tiers chunks in parallel, each loading the model; from_pretrained
    alone fails most of the time under this ('Cannot copy out of meta tensor') for a model of the
    embedded default's size."""
    from concurrent.futures import ThreadPoolExecutor

    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.tiny_model import build_tiny_model

    path = build_tiny_model(["0123456789 abcdefghijklmnopqrstuvwxyz=+*"], tmp_path / "m", seed=0)

    def load(i):
        if i % 2:
            return HFEngine.from_pretrained(str(path)).model
        return load_model_and_tokenizer(path, torch.device("cpu"))[0]

    for _ in range(3):
        with ThreadPoolExecutor(4) as pool:
            models = list(pool.map(load, range(4)))
        assert all(not any(p.is_meta for p in m.parameters()) for m in models)


def test_the_hf_decoder_ignores_the_models_own_generation_settings(tiny_model, tiny_tokenizer):
    """A checkpoint's generation_config (repetition penalty, top-k) must not reach `generate`: the hf
    decoder draws as the engine's SamplingParams say, as the shared one does, and the model keeps its config."""
    own = tiny_model.generation_config
    before = own.repetition_penalty, own.top_k
    own.repetition_penalty, own.top_k = 3.0, 2
    try:
        greedy = SamplingParams(temperature=0.0, max_new_tokens=9)
        ref = HFEngine(tiny_model, tiny_tokenizer, batch_size=4, decode="hf").generate(PROMPTS, 1, greedy, seed=0)
        ours = HFEngine(tiny_model, tiny_tokenizer, batch_size=4).generate(PROMPTS, 1, greedy, seed=0)
        for (a,), (b,) in zip(ours, ref):
            assert a.token_ids == b.token_ids
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
        sampled = SamplingParams(temperature=1.0, max_new_tokens=6)
        drawn = HFEngine(tiny_model, tiny_tokenizer, batch_size=8, decode="hf").generate(PROMPTS, 4, sampled, seed=2)
        for prompt, group in zip(PROMPTS, drawn):  # no top-k 2 cut: log-probs over the whole vocabulary
            for c in group:
                want = torch.log_softmax(_unpadded_logits(tiny_model, tiny_tokenizer, prompt, c), -1)
                want = want.gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
                assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-4)
        assert tiny_model.generation_config is own and own.repetition_penalty == 3.0
    finally:
        own.repetition_penalty, own.top_k = before
