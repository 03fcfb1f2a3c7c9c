"""`rlvrflow import-model`: a tiny GGUF written here round-trips to a plain Hugging Face folder.

The GGUF is built from a tiny random llama model made in the test (no download): its weights in
llama.cpp's layout (q/k rows permuted as llama.cpp's converter does; transformers undoes it on load),
one tensor as F16 and one as Q8_0 so dequantization is covered, and a tiny byte-level BPE tokenizer with
a ChatML chat template.
"""

from __future__ import annotations

import gguf  # in the dev extra: a missing gguf must fail here, not skip the import tests in CI
import numpy as np
import pytest
import torch

from rlvrflow.flows.cli import main  # noqa: E402
from rlvrflow.training.import_model import GGUFImportError, check_gguf, check_quant_types, import_gguf  # noqa: E402

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXTS = ["3 items at 12 yuan each, how much?", "退货政策是什么？请回答。", "<|im_start|>user\nhi<|im_end|>"]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "15% off 80 dollars?"}]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [
        "how much is 3 items at 12 yuan each",
        "the return policy: start the return there",
        "退货政策是什么 请回答 多少钱",
        "15% off 80 dollars is 68 dollars",
    ] * 20
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    return tok


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf q/k permutation (rotary halves interleaved)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(original model, gguf path) for a 2-layer llama with a 64-wide hidden state."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tmp = tmp_path_factory.mktemp("gguf")
    tok = _tokenizer()
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) for m in _merges(tok)]
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
    )
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # random norms and sharp attention, so a swapped or unpermuted tensor would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif "q_proj" in name or "k_proj" in name:
                p.normal_(0, 0.5)

    w = gguf.GGUFWriter(str(tmp / "tiny.gguf"), "llama")
    w.add_name("tiny")
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_block_count(2)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(16)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_chat_template(CHATML)

    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    names = {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
    }
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(2):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            if gg == "attn_q":
                t = _permute(t, 4)
            elif gg == "attn_k":
                t = _permute(t, 2)
            if (i, gg) == (0, "ffn_up"):
                w.add_tensor(f"blk.{i}.{gg}.weight", t.astype(np.float16))
            elif (i, gg) == (1, "ffn_gate"):
                q = gguf.quants.quantize(t, gguf.GGMLQuantizationType.Q8_0)
                w.add_tensor(f"blk.{i}.{gg}.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(f"blk.{i}.{gg}.weight", t)
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model, tmp / "tiny.gguf"


def _merges(tok) -> list[tuple[str, str]]:
    import json

    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


@pytest.fixture(scope="module")
def imported(tiny, tmp_path_factory):
    _, path = tiny
    out = tmp_path_factory.mktemp("imp") / "model"
    result = import_gguf(path, out)
    return result, out


def test_import_matches_transformers_gguf_load_and_the_original(tiny, imported):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    original, path = tiny
    result, out = imported
    assert result["architecture"] == "llama" and result["dtype"] == "float32" and result["chat_template"]
    assert set(result["tensor_types"]) == {"F32", "F16", "Q8_0"}
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".safetensors") == ["model.safetensors"]
    assert not any(p.name.startswith(".") for p in out.parent.iterdir())  # no temp folder left behind

    ref_tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ref = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert getattr(model.config, "quantization_config", None) is None
    assert model.generation_config.eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")

    for text in TEXTS:
        assert tok(text)["input_ids"] == ref_tok(text)["input_ids"], text
        assert tok.decode(tok(text)["input_ids"]) == text
    assert tok("<|im_start|>")["input_ids"] == [tok.convert_tokens_to_ids("<|im_start|>")]
    rendered = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert rendered == ref_tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>assistant\n") and "<|im_start|>system\nBe brief.<|im_end|>" in rendered

    ids = torch.tensor([tok(TEXTS[0] + TEXTS[1])["input_ids"]])
    with torch.no_grad():
        mine, theirs, orig = (m(ids).logits for m in (model, ref, original))
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)  # the same floats, saved and reloaded
    # Q8_0 and F16 round the weights: close to the original, not equal
    assert (mine - orig).abs().max().item() < 5e-2
    assert (mine.argmax(-1) == orig.argmax(-1)).float().mean().item() > 0.9


def test_imported_folder_takes_a_lora_adapter(imported):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    _, out = imported
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(out),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == 2 * (4 * 64 + 64 * 4 + 4 * 64 + 32 * 4)  # per layer: q 64->64, v 64->32, r=4


def test_bfloat16_import(tiny, tmp_path):
    from transformers import AutoModelForCausalLM

    result = import_gguf(tiny[1], tmp_path / "bf16", dtype="bfloat16")
    assert result["dtype"] == "bfloat16"
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "bf16").dtype == torch.bfloat16


def test_unsupported_architecture_names_the_file_and_the_supported_ones(tmp_path):
    path = tmp_path / "odd.gguf"
    w = gguf.GGUFWriter(str(path), "notallama")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(
        GGUFImportError, match=r"odd\.gguf: architecture 'notallama' is not supported.*supported: .*llama"
    ) as err:
        check_gguf(path)
    assert "general" not in str(err.value) and "tokenizer" not in str(err.value)


def test_unsupported_quant_type_is_named_with_the_supported_ones(tmp_path):
    with pytest.raises(
        GGUFImportError, match=r"x\.gguf: tensor type\(s\) Q4_2 cannot be dequantized.*supported: .*Q4_1"
    ):
        check_quant_types(tmp_path / "x.gguf", ["F32", "Q4_2"])
    check_quant_types(tmp_path / "x.gguf", ["F32", "F16", "Q4_1", "Q8_0"])  # SmolLM2's types pass


def test_cli_errors(tiny, tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    assert main(["import-model", str(tiny[1]), "--out", str(full)]) == 2
    assert "full: exists and is not empty; pass --force" in capsys.readouterr().err
    assert (full / "keep.txt").exists()
    assert main(["import-model", str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "o")]) == 2
    assert "missing.gguf: file not found" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_writes_and_reports(tiny, tmp_path, capsys):
    out = tmp_path / "full"
    out.mkdir()
    (out / "old.txt").write_text("x")
    (out / "config.json").write_text("{}")  # an earlier import: --force may replace it
    assert main(["import-model", str(tiny[1]), "--out", str(out), "--force"]) == 0
    printed = capsys.readouterr().out
    assert "llama" in printed and "float32" in printed and "chat template yes" in printed
    assert not (out / "old.txt").exists() and (out / "model.safetensors").is_file()


def test_unreadable_file_and_missing_gguf_package(tmp_path, monkeypatch):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(GGUFImportError, match=r"junk\.gguf: not a readable GGUF file"):
        check_gguf(junk)
    monkeypatch.setitem(__import__("sys").modules, "gguf", None)  # as if it were not installed
    with pytest.raises(GGUFImportError, match=r"needs the `gguf` package: pip install 'gguf>=0.10'"):
        check_gguf(junk)


def test_force_never_replaces_the_users_files(tiny, tmp_path, monkeypatch, capsys):
    """--force replaces an earlier model folder only: not a folder of other files, not the folder the
    source file is in, not the current folder (each once lost its files)."""
    import shutil

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    source = notes / "m.gguf"
    shutil.copy(tiny[1], source)
    (notes / "config.json").write_text("{}")
    assert main(["import-model", str(source), "--out", str(notes), "--force"]) == 2
    assert "holds the current folder or the source file" in capsys.readouterr().err
    monkeypatch.chdir(notes)
    assert main(["import-model", str(tiny[1]), "--out", ".", "--force"]) == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    assert main(["import-model", str(tiny[1]), "--out", str(other), "--force"]) == 2
    assert "is not a model folder" in capsys.readouterr().err
    assert (notes / "notes.txt").read_text() == "mine" and source.exists() and (other / "keep.txt").exists()
