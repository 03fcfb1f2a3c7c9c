"""The embedded model and tokenizer: built from the corpus, loadable with transformers' Auto classes."""

import json

import pytest
from pydantic import ValidationError

from rlvrflow.training.config import EvalConfig, GRPOConfig, TinyModelConfig, TrainingConfig
from rlvrflow.training.tiny_model import build_tokenizer, char_vocab, resolve_base_model


def test_char_tokenizer_round_trips_and_prepends_bos():
    tok = build_tokenizer(["答案: 36\nAnswer: 7"])
    ids = tok("答案: 36\n").input_ids
    assert ids[0] == tok.bos_token_id
    assert len(ids) == 1 + len("答案: 36\n")  # one token per character
    assert tok.decode(ids, skip_special_tokens=True) == "答案: 36\n"
    assert tok("Z").input_ids[1] == tok.unk_token_id  # unseen characters map to <unk>


def test_char_vocab_min_count_drops_rare_characters():
    vocab = char_vocab(["aab"], min_count=2)
    assert "a" in vocab and "b" not in vocab
    assert list(vocab)[:4] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_built_model_loads_with_auto_classes(base_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_model)
    tok = AutoTokenizer.from_pretrained(base_model)
    assert model.config.model_type == "llama"
    assert model.config.vocab_size == len(tok)
    assert tok.decode(tok("Copy 3\n").input_ids, skip_special_tokens=True) == "Copy 3\n"
    card = json.loads((base_model / "rlvrflow_model.json").read_text())
    assert card["params"] == sum(p.numel() for p in model.parameters())


def test_resolve_reuses_a_matching_build_and_rebuilds_on_new_corpus(tmp_path, toy):
    cfg, corpus = TrainingConfig(tiny=toy.TINY), toy.corpus
    out = resolve_base_model(cfg, corpus(), tmp_path / "m", seed=0)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert resolve_base_model(cfg, corpus(), tmp_path / "m", seed=0) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    resolve_base_model(cfg, corpus() + ["new text ü"], tmp_path / "m", seed=0)
    from transformers import AutoTokenizer

    assert "ü" in AutoTokenizer.from_pretrained(out).get_vocab()


def test_resolve_local_dir_is_checked(tmp_path, base_model):
    assert resolve_base_model(TrainingConfig(model=str(base_model)), [], tmp_path, 0) == base_model
    with pytest.raises(ValueError, match="training.model.*not a directory"):
        resolve_base_model(TrainingConfig(model=str(tmp_path / "nope")), [], tmp_path, 0)
    (tmp_path / "broken").mkdir()
    with pytest.raises(ValueError, match="does not load"):
        resolve_base_model(TrainingConfig(model=str(tmp_path / "broken")), [], tmp_path, 0)


def test_config_errors_name_the_fix():
    with pytest.raises(ValidationError, match="divisible by num_heads"):
        TinyModelConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValidationError, match="Extra inputs"):
        TrainingConfig.model_validate({"grpo": {"stpes": 3}})
    with pytest.raises(ValidationError, match="set k <= n_samples"):
        EvalConfig(k=9, n_samples=8)
    with pytest.raises(ValidationError, match="gradient_accumulation_steps"):
        GRPOConfig(prompts_per_step=3, num_generations=3, gradient_accumulation_steps=2)
