"""A realistic small test model built in-project: a random Qwen2 with a byte-level BPE tokenizer and a chat template.

    rlvrflow make-model --arch qwen2 --out runs/qwen2-tiny                     # retail corpus
    rlvrflow make-model --arch qwen2 --out runs/qwen2-tiny --corpus my.jsonl   # your own texts

What a downloaded Qwen2.5-Instruct directory looks like, a few MB big: `Qwen2ForCausalLM` (grouped
query attention, q/k/v biases, tied embeddings), a byte-level BPE tokenizer trained here with the
`tokenizers` library on the domain corpus (Qwen's pre-tokenizer split: digits one at a time), special
tokens `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, a ChatML chat template
(`<|im_start|>role\n...<|im_end|>\n`), EOS `<|im_end|>` and a generation config stopping on
`<|im_end|>` and `<|endoftext|>`. No BOS is added (as Qwen). The weights are random: it exercises
chat templates, BPE, GQA and LoRA on the code paths a real model takes, it does not know anything.
Left out: Qwen's tool-call template branches and its default system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen2's pre-tokenizer split: contractions, letter runs, single digits, punctuation runs, newlines, spaces.
SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
ARCHS = ("qwen2",)


@dataclass(frozen=True)
class Qwen2Dims:
    """Sizes of the test model; the defaults give ~0.4M parameters (~1.7 MB in float32)."""

    vocab_size: int = 2048  # an upper bound: a small corpus yields fewer merges
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2  # head size 32: vLLM's CPU attention rejects 16
    num_kv_heads: int = 1
    intermediate_size: int = 128
    max_positions: int = 1024


def read_corpus(paths: Iterable[str | Path]) -> Iterator[str]:
    """Texts from files: every string value of each JSON line (.jsonl; a damaged line is kept as text),
    else each non-empty line."""
    for path in paths:
        p = Path(path)
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                if p.suffix == ".jsonl":
                    try:
                        yield from _strings(json.loads(line))
                        continue
                    except ValueError:
                        pass  # raw logs carry broken lines; their text still counts
                yield line.rstrip("\n")


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def default_corpus_files() -> list[Path]:
    """The retail sample's support tickets, when this is a source checkout."""
    raw = Path(__file__).resolve().parents[1] / "examples" / "retail" / "raw"
    files = sorted(raw.glob("tickets_*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no default corpus ({raw}/tickets_*.jsonl is not here: not a source checkout); "
            "pass --corpus FILE (JSONL or text) with your domain's texts"
        )
    return files


def build_bpe_tokenizer(corpus: Iterable[str], vocab_size: int):
    """A byte-level BPE `PreTrainedTokenizerFast` trained on `corpus`, with ChatML specials and template."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHATML,
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )


def build_qwen2_model(corpus: Iterable[str], out_dir: str | Path, seed: int = 0, dims: Qwen2Dims | None = None) -> Path:
    """Train the tokenizer on `corpus`, initialize a `Qwen2ForCausalLM` with `seed`, save both to `out_dir`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvrflow.training.checkpoint import save_pretrained_atomic

    dims = dims or Qwen2Dims()
    if dims.hidden_size % dims.num_heads or dims.num_heads % dims.num_kv_heads:
        raise ValueError(
            f"Qwen2Dims: num_heads={dims.num_heads} must divide hidden_size={dims.hidden_size} and be "
            f"a multiple of num_kv_heads={dims.num_kv_heads}"
        )
    tokenizer = build_bpe_tokenizer(corpus, dims.vocab_size)
    end, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=dims.hidden_size,
        intermediate_size=dims.intermediate_size,
        num_hidden_layers=dims.num_layers,
        num_attention_heads=dims.num_heads,
        num_key_value_heads=dims.num_kv_heads,
        max_position_embeddings=dims.max_positions,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        bos_token_id=pad,
        eos_token_id=end,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = [end, pad]  # as Qwen2.5-Instruct: end of turn, end of text
    model.generation_config.pad_token_id = pad
    model.generation_config.bos_token_id = pad
    params = sum(p.numel() for p in model.parameters())
    card = {"kind": "rlvrflow-test-qwen2", "params": params, "seed": seed, "vocab": len(tokenizer), **asdict(dims)}
    return save_pretrained_atomic(model, tokenizer, out_dir, extra={"rlvrflow_model.json": json.dumps(card)})


def make_model(
    arch: str,
    out_dir: str | Path,
    corpus_files: list[str | Path] | None = None,
    seed: int = 0,
    dims: Qwen2Dims | None = None,
) -> dict:
    """`rlvrflow make-model`: build the test model of `arch` from the files' texts; returns its card."""
    if arch not in ARCHS:
        raise ValueError(f"--arch {arch!r}: only {', '.join(ARCHS)} is built here")
    files = list(corpus_files or default_corpus_files())
    texts = list(read_corpus(files))
    if not texts:
        raise ValueError(
            f"the corpus ({', '.join(map(str, files))}) holds no text; pass files with your domain's texts"
        )
    out = build_qwen2_model(texts, out_dir, seed, dims)
    return {**json.loads((out / "rlvrflow_model.json").read_text()), "out": str(out), "texts": len(texts)}
