"""The embedded default model: a tiny Llama and a character-level tokenizer built from the corpus.

Nothing is downloaded. The tokenizer maps each character seen in the corpus to one token (digits stay
separate, which is what arithmetic wants) plus `<pad>`, `<s>`, `</s>`, `<unk>`; it prepends `<s>` to
every encoded text. The model is a randomly initialized `LlamaForCausalLM`. Both are saved in Hugging
Face format, so `AutoModelForCausalLM` / `AutoTokenizer` load them like any other checkpoint, and any
local HF causal-LM directory can take their place (`resolve_base_model`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from rlvrflow.training.config import TinyModelConfig, TrainingConfig

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")


def char_vocab(corpus: Iterable[str], min_count: int = 1) -> dict[str, int]:
    """Token ids for the special tokens, then every character seen >= min_count times, in sorted order."""
    counts = Counter(ch for text in corpus for ch in text)
    chars = sorted(ch for ch, n in counts.items() if n >= min_count and ch not in SPECIAL_TOKENS)
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab[ch] = len(vocab)
    return vocab


def build_tokenizer(corpus: Iterable[str], min_count: int = 1):
    """A `PreTrainedTokenizerFast` with one token per character and `<s>` prepended to each text."""
    return tokenizer_from_vocab(char_vocab(corpus, min_count))


def tokenizer_from_vocab(vocab: dict[str, int]):
    """The character tokenizer of `vocab` (the special tokens, then one id per character)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Every character (newlines included) is its own pre-token; nothing is normalized away.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def tiny_llama_config(dims: TinyModelConfig, tokenizer):
    """The `LlamaConfig` of the embedded model for a given tokenizer."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=dims.hidden_size,
        intermediate_size=dims.intermediate_size,
        num_hidden_layers=dims.num_layers,
        num_attention_heads=dims.num_heads,
        num_key_value_heads=dims.num_heads,
        max_position_embeddings=dims.max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(
    corpus: Iterable[str], out_dir: str | Path, seed: int, dims: TinyModelConfig | None = None
) -> Path:
    """Build the tokenizer from `corpus`, initialize the tiny Llama with `seed`, save both to `out_dir`.

    `corpus` should hold every text the model will read or write (prompts and solutions), so that no
    character of the domain maps to `<unk>`. Returns `out_dir` (a Hugging Face checkpoint directory).
    """
    import torch
    from transformers import LlamaForCausalLM

    from rlvrflow.training.checkpoint import save_pretrained_atomic

    dims = dims or TinyModelConfig()
    corpus = list(corpus)
    tokenizer = build_tokenizer(corpus, dims.min_char_count)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_llama_config(dims, tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    out = Path(out_dir)
    card = _card(model, dims, seed, _build_key(corpus, dims, seed))
    save_pretrained_atomic(model, tokenizer, out, extra={"rlvrflow_model.json": card})
    return out


def _card(model, dims: TinyModelConfig, seed: int, key: str) -> str:
    n_params = sum(p.numel() for p in model.parameters())
    card = {"kind": "embedded-tiny-llama", "params": n_params, "seed": seed, "build_key": key}
    return json.dumps({**card, **dims.model_dump()})


def check_hf_model_dir(path: str | Path) -> Path:
    """Raise a ValueError naming the directory and the fix unless it holds a loadable HF causal LM."""
    from transformers import AutoConfig, AutoTokenizer

    p = Path(path)
    if not p.is_dir():
        raise ValueError(
            f"training.model: '{p}' is not a directory; set it to 'embedded', 'embedded-base' or to a local "
            "Hugging Face causal-LM directory (config.json, weights, tokenizer files)"
        )
    try:
        AutoConfig.from_pretrained(p)
        AutoTokenizer.from_pretrained(p)
    except Exception as exc:  # transformers raises many types for a broken directory
        raise ValueError(
            f"training.model: '{p}' does not load as a Hugging Face model+tokenizer ({exc}); "
            "save it with model.save_pretrained(dir) and tokenizer.save_pretrained(dir)"
        ) from exc
    return p


def resolve_base_model(cfg: TrainingConfig, texts: Iterable[str], out_dir: str | Path, seed: int) -> Path:
    """The base model directory for a run.

    embedded: builds the tiny Llama + tokenizer from `texts` into `out_dir` (reused when `out_dir`
    already holds a finished build); embedded-base: the pretrained tiny base with the characters of
    `texts` it lacks added (training.tiny_base.adapt_base); otherwise checks that `cfg.model` is a
    loadable local HF directory and returns it unchanged.
    """
    if not cfg.is_embedded:
        return check_hf_model_dir(cfg.model)
    if cfg.model == "embedded-base":
        from rlvrflow.training.tiny_base import BASE_DIR, adapt_base

        return adapt_base(BASE_DIR, texts, out_dir, seed)
    out = Path(out_dir)
    texts = list(texts)
    key = _build_key(texts, cfg.tiny, seed)
    card = out / "rlvrflow_model.json"
    if card.exists() and json.loads(card.read_text()).get("build_key") == key:
        return out  # the same corpus, dims and seed were built here before
    return build_tiny_model(texts, out, seed, cfg.tiny)


def _build_key(texts: list[str], dims: TinyModelConfig, seed: int) -> str:
    import hashlib

    h = hashlib.sha256(json.dumps([dims.model_dump(), seed]).encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]
