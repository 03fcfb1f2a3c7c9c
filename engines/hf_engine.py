"""Rollout engines: one interface for sampling n completions per prompt, with token ids and log-probs.

    engine = HFEngine(model, tokenizer, batch_size=64)
    groups = engine.generate(prompts, n=8, sampling=SamplingParams(temperature=1.0), seed=0)
    groups[i][j].text, .token_ids, .logprobs, .finish_reason     # prompt i, sample j

`HFEngine` wraps a live transformers causal LM (the GRPO trainer passes its policy, so weights are
shared and never need syncing). Its default decoder ("shared") prefills each distinct prompt once,
repeats that KV cache for the prompt's n samples and decodes all rows token by token, dropping rows
that ended from the batch; `decode="hf"` uses transformers' `generate` instead (same greedy tokens;
kept as the reference the tests and `bench/` compare against). `VLLMEngine`
(engines/vllm_engine.py) is the same interface over vLLM's offline engine.

Conventions both engines follow:
- Prompts are plain strings. A `PromptFormat` says how one becomes the model's input: `raw` tokenizes
  it as the tokenizer does by default (special tokens added); `chat` renders it as the user turn of
  the tokenizer's chat template (after an optional system turn) with the assistant's generation
  prompt, tokenized without adding special tokens (the template writes its own). `HFEngine` applies
  its format itself (`from_pretrained` reads the one the model directory was trained with);
  `FormattedEngine` encodes for engines that take token ids (vLLM), so both read the same ids
  (`engines.factory.make_engine` builds either kind for a model directory). In chat format
  the template's end-of-turn token (e.g. `<|im_end|>`) is a stop token too.
- `token_ids` are the completion tokens only, including the EOS token when the model emitted one.
- `logprobs[t]` is the log-probability of `token_ids[t]` under the distribution it was drawn from:
  log_softmax(logits / T) over the top-p nucleus (tokens outside it at -inf, the nucleus
  renormalized), and log_softmax(logits) when greedy (vLLM's `processed_logprobs` mode). That is the
  behaviour policy's log-prob, what an async GRPO ratio compares against; the trainer scores its
  policy at the same temperature over the whole vocabulary (`training.modeling.completion_logprobs`),
  as TRL and verl do, so async GRPO takes top_p 1 only. A model's own generation_config (sampling
  settings, repetition penalty) is not applied: an engine draws as its `SamplingParams` say.
- `temperature == 0` means greedy decoding; top-k is never applied.
- A stop string ends the completion: `text` stops before it, `token_ids` end with the token that
  completed it, `finish_reason == "stop"` (as for EOS); hitting `max_new_tokens` gives "length".
- Same prompts, n, sampling, seed (and batch size) give the same completions; the caller's global
  torch RNG state is left untouched.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

# transformers' from_pretrained is not thread-safe (5.x builds the model on the meta device through
# process-wide state; two threads loading at once fail with "Cannot copy out of meta tensor"), and
# the flows' threads runner tiers chunks in parallel: every load in this package and in training
# goes through this lock. So does the first `from transformers import AutoModelForCausalLM`: two threads
# resolving transformers' lazy attributes at once fail with "cannot import name 'AutoModelForCausalLM'"
# and leave the module broken for the rest of the process (a rerun whose stages before tier were
# cached imported transformers first in the tier chunks' threads and failed twice).
HF_LOAD_LOCK = threading.Lock()
PROMPT_FORMAT_FILE = "rlvrflow_prompt.json"  # in a model directory: the format it was trained with

log = logging.getLogger("rlvrflow.engines")


# HFEngine.generate seeds and draws from torch's process-wide RNG (see generate)
_SAMPLING_LOCK = threading.RLock()


@dataclass(frozen=True)
class PromptFormat:
    """How a prompt string becomes token ids: `raw` text, or the user turn of the chat template."""

    kind: str = "raw"  # "raw" or "chat"
    system: str | None = None  # chat only: a system turn before the user's

    def __post_init__(self) -> None:
        if self.kind not in ("raw", "chat"):
            raise ValueError(f"PromptFormat.kind={self.kind!r} must be 'raw' or 'chat'")
        if self.kind == "raw" and self.system:
            raise ValueError("PromptFormat: a system prompt needs the chat format (raw prompts have no turns)")

    def render(self, tokenizer, prompt: str) -> str:
        """The text the model reads: the prompt itself (raw) or the rendered chat turns."""
        if self.kind == "raw":
            return prompt
        turns = [{"role": "system", "content": self.system}] if self.system else []
        turns.append({"role": "user", "content": prompt})
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)

    def encode(self, tokenizer, prompt: str) -> list[int]:
        """Prompt token ids, the same for generation, the loss and every stage."""
        if self.kind == "raw":
            return tokenizer(prompt).input_ids
        return tokenizer(self.render(tokenizer, prompt), add_special_tokens=False).input_ids

    def end_token_id(self, tokenizer) -> int:
        """The token a completion ends with: EOS (raw) or the template's end-of-turn token (chat)."""
        if self.kind == "chat":
            eot = end_of_turn_id(tokenizer)
            if eot is not None:
                return eot
        if tokenizer.eos_token_id is None:
            raise ValueError(
                "the tokenizer has no eos_token; set one (e.g. tokenizer.eos_token = '</s>') so completions can end"
            )
        return tokenizer.eos_token_id

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "system": self.system}, sort_keys=True)

    @classmethod
    def for_tokenizer(cls, tokenizer, setting: str = "auto", system: str | None = None) -> "PromptFormat":
        """Resolve `auto | chat | raw` against a tokenizer: auto is chat when it has a chat template."""
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if setting == "chat" and not has_template:
            raise ValueError(
                "training.prompt_format is 'chat' but the model's tokenizer has no chat template; "
                "set prompt_format: raw (or auto), or save a tokenizer with a chat_template"
            )
        kind = "chat" if setting == "chat" or (setting == "auto" and has_template) else "raw"
        if kind == "raw" and system:
            raise ValueError(
                "training.system_prompt is set but the prompts are raw text (prompt_format "
                f"{setting!r}, chat template {'present' if has_template else 'absent'}); remove "
                "system_prompt or use a model whose tokenizer has a chat template"
            )
        return cls(kind, system or None)

    @classmethod
    def for_model_dir(cls, path, tokenizer) -> "PromptFormat":
        """The format a model directory was trained with (its rlvrflow_prompt.json), else auto."""
        f = Path(path) / PROMPT_FORMAT_FILE
        if f.is_file():
            data = json.loads(f.read_text())
            return cls(data["kind"], data.get("system"))
        return cls.for_tokenizer(tokenizer)

    def save(self, model_dir) -> None:
        (Path(model_dir) / PROMPT_FORMAT_FILE).write_text(self.to_json() + "\n")


def end_of_turn_id(tokenizer) -> int | None:
    """The first special token the chat template writes after an assistant turn's text (Qwen's
    `<|im_end|>`, Llama 3's `<|eot_id|>`, Gemma's `<end_of_turn>`), or None when it writes none."""
    mark = "rlvrflow-end-of-turn-probe"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": mark}], tokenize=False
    )
    at = text.rfind(mark)
    if at < 0:
        return None
    special = set(tokenizer.all_special_ids) | {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    for tid in tokenizer(text[at + len(mark) :], add_special_tokens=False).input_ids:
        if tid in special:
            return int(tid)
    return None


def stop_token_ids(model, tokenizer, fmt: PromptFormat) -> tuple[int, ...]:
    """Every id that ends a completion: the generation config's EOS ids (else the tokenizer's), plus the
    chat template's end-of-turn token in chat format (Qwen2.5 base models list only <|endoftext|>)."""
    ids = list(_eos_ids(model, tokenizer))
    end = fmt.end_token_id(tokenizer)
    return tuple(ids + [end] if end not in ids else ids)


def left_pad(rows: list[list[int]], pad_id: int):
    """(B, L) input ids and attention mask, left-padded."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        attn[i, width - len(r) :] = 1
    return ids, attn


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: temperature (0 = greedy), nucleus mass, length cap and stop strings."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature={self.temperature} must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p={self.top_p} must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens={self.max_new_tokens} must be >= 1")
        if isinstance(self.stop, str):
            raise ValueError("SamplingParams.stop must be a tuple of strings, e.g. stop=('\\n',), not a string")


@dataclass(frozen=True)
class Completion:
    """One sampled completion: decoded text, its token ids, their log-probs and why it ended."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str  # "stop" (EOS or a stop string) or "length"


@runtime_checkable
class RolloutEngine(Protocol):
    """Anything that samples n completions for each prompt."""

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams, seed: int) -> list[list[Completion]]:
        """Returns one list of n completions per prompt, in prompt order."""
        ...


def cut_at_stop(text: str, stop: tuple[str, ...]) -> int | None:
    """Index of the earliest stop string in text, or None."""
    hits = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return min(hits) if hits else None


class HFEngine:
    """Batched sampling from a live transformers causal LM (left padding, KV cache).

    The model must already sit on `device`; the engine never moves it. Training mode is switched off
    during generation and restored after. A batch holds at most `batch_size` sequences (prompts x
    their samples). Memory: the shared decoder keeps one step's logits (`batch_size * vocab` floats;
    the prefill computes the last position's only); the "hf" decoder keeps all of them until the
    log-probs are gathered (`batch_size * max_new_tokens * vocab`). A model whose forward returns no
    transformers `Cache` (legacy tuple caches, state-space models) is decoded by `generate` instead.
    """

    def __init__(
        self,
        model,
        tokenizer,
        device: str = "cpu",
        batch_size: int = 64,
        decode: str = "shared",
        prompt_format: PromptFormat | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"HFEngine batch_size={batch_size} must be >= 1")
        if decode not in DECODERS:
            raise ValueError(f"HFEngine decode={decode!r} is not one of {', '.join(DECODERS)}")
        self.decode = decode
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.batch_size = batch_size
        self.prompt_format = prompt_format or PromptFormat()
        self.eos_token_ids = stop_token_ids(model, tokenizer, self.prompt_format)
        pad = tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.eos_token_ids[0]

    @classmethod
    def from_pretrained(cls, path: str, device: str = "cpu", batch_size: int = 64) -> "HFEngine":
        """Load a local Hugging Face causal-LM directory (model + tokenizer) into an engine, prompting it
        in the format it was trained with (its rlvrflow_prompt.json; auto when it has none). Same as
        `engines.factory.make_engine("hf", path, ...)`."""
        from rlvrflow.engines.factory import make_engine

        return make_engine("hf", path, device=device, batch_size=batch_size)

    def _encode(self, prompts: list[str]):
        """Left-padded (B, L) ids and attention mask of the prompts in this engine's format."""
        ids, attn = left_pad([self.prompt_format.encode(self.tokenizer, p) for p in prompts], self.pad_token_id)
        return ids.to(self.device), attn.to(self.device)

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams, seed: int) -> list[list[Completion]]:
        """n completions per prompt; deterministic given seed; the global RNG is not disturbed."""
        import torch

        if n < 1:
            raise ValueError(f"generate: n={n} must be >= 1")
        done: list[Completion] = []
        was_training = self.model.training
        self.model.eval()
        devices = [self.device] if str(self.device).startswith("cuda") else []
        try:  # the seeded draws use torch's process-wide generator: one sampler at a time, so
            # threads (the threads task runner's tier chunks and evaluations) cannot interleave them
            with _SAMPLING_LOCK, torch.random.fork_rng(devices=devices), torch.no_grad():
                torch.manual_seed(seed)
                if self.decode == "hf":
                    flat = [p for p in prompts for _ in range(n)]
                    for start in range(0, len(flat), self.batch_size):
                        done.extend(self._generate_batch(flat[start : start + self.batch_size], sampling))
                else:
                    for idx, copies in plan_batches(len(prompts), n, self.batch_size):
                        done.extend(self._decode_shared([prompts[i] for i in idx], copies, sampling))
        finally:
            self.model.train(was_training)
        return [done[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _decode_shared(self, prompts: list[str], copies: int, sampling: SamplingParams) -> list[Completion]:
        """Prefill each prompt once, repeat its KV cache `copies` times, then decode token by token.

        Rows that ended (EOS or a stop string) are dropped from the batch once a quarter of it has
        ended, so the forward passes shrink as completions finish.
        """
        import torch

        ids, attn = self._encode(prompts)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        if not hasattr(cache, "reorder_cache"):  # no transformers Cache (legacy tuples, state-space models)
            return self._generate_batch([p for p in prompts for _ in range(copies)], sampling)
        expand = torch.arange(len(prompts), device=self.device).repeat_interleave(copies)
        if copies > 1:
            cache.reorder_cache(expand)
        logits, attn, next_pos = out.logits[:, -1, :].float()[expand], attn[expand], pos[expand, -1] + 1
        width, max_new = len(expand), sampling.max_new_tokens
        gen = torch.full((width, max_new), self.pad_token_id, dtype=torch.long, device=self.device)
        lps = torch.zeros((width, max_new), dtype=torch.float32, device=self.device)
        length = torch.full((width,), max_new, dtype=torch.long, device=self.device)
        rows = torch.arange(width, device=self.device)  # batch row of each live cache row
        ended = torch.zeros(width, dtype=torch.bool, device=self.device)
        eos = torch.tensor(self.eos_token_ids, device=self.device)
        for t in range(max_new):
            drawn_from = sampling_logits(logits, sampling)
            nxt = pick_tokens(logits, sampling, drawn_from)
            live = ~ended
            gen[rows[live], t] = nxt[live]
            lps[rows[live], t] = torch.log_softmax(drawn_from, -1).gather(-1, nxt.unsqueeze(-1)).squeeze(-1)[live]
            stopped = live & torch.isin(nxt, eos)
            if sampling.stop:
                stopped |= live & self._hit_stop(gen, rows, t, sampling.stop)
            length[rows[stopped]] = t + 1
            ended |= stopped
            if bool(ended.all()) or t == max_new - 1:
                break
            if int(ended.sum()) * 4 >= len(ended):  # compact: drop ended rows from the batch
                keep = (~ended).nonzero().squeeze(1)
                cache.reorder_cache(keep)
                rows, attn, next_pos, nxt, ended = rows[keep], attn[keep], next_pos[keep], nxt[keep], ended[keep]
            attn = torch.cat([attn, attn.new_ones((len(rows), 1))], dim=1)
            out = self.model(
                input_ids=nxt.unsqueeze(1),
                attention_mask=attn,
                position_ids=next_pos.unsqueeze(1),
                past_key_values=cache,
                use_cache=True,
            )
            next_pos = next_pos + 1
            logits = out.logits[:, -1, :].float()
        return [
            self._completion(gen[b, : length[b]].tolist(), lps[b, : length[b]].tolist(), sampling) for b in range(width)
        ]

    def _hit_stop(self, gen, rows, t: int, stop: tuple[str, ...]):
        """Which live rows' text so far contains a stop string (decoded per row: only with stop strings)."""
        import torch

        texts = self.tokenizer.batch_decode(gen[rows, : t + 1].tolist(), skip_special_tokens=True)
        return torch.tensor([cut_at_stop(x, stop) is not None for x in texts], device=gen.device)

    def _generate_batch(self, prompts: list[str], sampling: SamplingParams) -> list[Completion]:
        import torch

        ids, attn = self._encode(prompts)
        enc = {"input_ids": ids, "attention_mask": attn}
        with _only_engine_settings(self.model):
            out = self.model.generate(
                **enc,
                generation_config=self._generation_config(sampling),
                tokenizer=self.tokenizer if sampling.stop else None,
            )
        prompt_len = enc["input_ids"].shape[1]
        gen = out.sequences[:, prompt_len:]  # (B, T)
        # generate's scores: the logits after its temperature and top-p warpers, what it drew from (raw when greedy)
        scores = torch.stack(out.scores, dim=1).float()  # (B, T, V)
        logp = torch.log_softmax(scores, dim=-1).gather(-1, gen.unsqueeze(-1)).squeeze(-1)  # (B, T)
        return [self._completion(gen[b].tolist(), logp[b].tolist(), sampling) for b in range(gen.shape[0])]

    def _generation_config(self, sampling: SamplingParams):
        from transformers import GenerationConfig

        greedy = sampling.temperature == 0
        return GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else sampling.temperature,
            top_p=None if greedy else sampling.top_p,
            top_k=None if greedy else 0,  # unset, generate samples within its default top-k 50; 0 is off
            max_new_tokens=sampling.max_new_tokens,
            stop_strings=list(sampling.stop) or None,
            eos_token_id=list(self.eos_token_ids),
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_scores=True,
        )

    def _completion(self, ids: list[int], logps: list[float], sampling: SamplingParams) -> Completion:
        """Trim padding after EOS, cut at the first stop string, decode."""
        end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_token_ids), len(ids))
        ids, logps = ids[:end], logps[:end]
        reason = "stop" if ids and ids[-1] in self.eos_token_ids else "length"
        body = ids[:-1] if reason == "stop" else ids
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        cut = cut_at_stop(text, sampling.stop)
        if cut is not None:
            text, reason = text[:cut], "stop"
            used = self._tokens_to_stop(ids, sampling.stop)
            ids, logps = ids[:used], logps[:used]
        return Completion(text=text, token_ids=tuple(ids), logprobs=tuple(logps), finish_reason=reason)

    def _tokens_to_stop(self, ids: list[int], stop: tuple[str, ...]) -> int:
        """Fewest leading tokens whose decoded text already contains a stop string."""
        for used in range(1, len(ids) + 1):
            if cut_at_stop(self.tokenizer.decode(ids[:used], skip_special_tokens=True), stop) is not None:
                return used
        return len(ids)


DECODERS = ("shared", "hf")


class FormattedEngine:
    """Encodes prompts in a `PromptFormat` (`PromptFormat.encode`, the ids `HFEngine` and the trainer's
    loss read) and hands the token ids to an engine that takes them (vLLM). Ids, not rendered text: an
    engine that tokenized the text again would add its own BOS in front of a template's."""

    def __init__(self, engine, tokenizer, prompt_format: PromptFormat) -> None:
        self.engine, self.tokenizer, self.prompt_format = engine, tokenizer, prompt_format

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams, seed: int) -> list[list[Completion]]:
        ids = [self.prompt_format.encode(self.tokenizer, p) for p in prompts]
        return self.engine.generate(ids, n, sampling, seed)

    def __getattr__(self, name: str):  # load_weights, load_state_dict, ... of the wrapped engine
        if name == "engine":
            raise AttributeError(name)
        return getattr(self.engine, name)


def plan_batches(n_prompts: int, n: int, batch_size: int) -> list[tuple[list[int], int]]:
    """Split n_prompts x n sequences into batches of at most batch_size: (prompt indices, copies each).

    In prompt order, each prompt's copies contiguous. When n exceeds batch_size a prompt's copies are
    split over several single-prompt batches.
    """
    if n >= batch_size:
        return [([i], min(batch_size, n - s)) for i in range(n_prompts) for s in range(0, n, batch_size)]
    per = batch_size // n
    return [(list(range(s, min(s + per, n_prompts))), n) for s in range(0, n_prompts, per)]


@contextmanager
def _only_engine_settings(model):
    """`generate` fills every field the engine's config leaves unset from the model's generation_config
    (a checkpoint's repetition_penalty, top_k, min_p, ...). An empty one there for the call, and on a
    PEFT wrapper's base as well (the wrapper copies its own there), leaves only the engine's settings."""
    from transformers import GenerationConfig

    holders = [model, *([model.get_base_model()] if hasattr(model, "get_base_model") else [])]
    saved = [h.generation_config for h in holders]
    try:
        for h in holders:
            h.generation_config = GenerationConfig()
        yield
    finally:
        for h, config in zip(holders, saved):
            h.generation_config = config


def sampling_logits(logits, sampling: SamplingParams):
    """The logits a token is drawn from: logits / T with the tokens beyond the top-p nucleus at -inf;
    the logits themselves when greedy."""
    import torch

    if sampling.temperature == 0:
        return logits
    x = logits / sampling.temperature
    if sampling.top_p < 1.0:
        srt, order = x.sort(dim=-1, descending=True)
        probs = torch.softmax(srt, dim=-1)
        drop = probs.cumsum(-1) - probs > sampling.top_p  # tokens entirely beyond the nucleus; the top one stays
        x = torch.full_like(x, float("-inf")).scatter(-1, order, srt.masked_fill(drop, float("-inf")))
    return x


def pick_tokens(logits, sampling: SamplingParams, drawn_from=None):
    """Next token per row: argmax at temperature 0, else a draw from softmax(logits / T) within top-p
    (`drawn_from`: those logits, when the caller already has them from `sampling_logits`)."""
    import torch

    if sampling.temperature == 0:
        return logits.argmax(-1)
    x = sampling_logits(logits, sampling) if drawn_from is None else drawn_from
    return torch.multinomial(torch.softmax(x, dim=-1), 1).squeeze(1)


def _eos_ids(model, tokenizer) -> tuple[int, ...]:
    """The ids that end a completion: the generation config's (one or a list), else the tokenizer's."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None or eos == []:
        raise ValueError(
            "HFEngine: neither model.generation_config.eos_token_id nor tokenizer.eos_token_id is set; "
            "set tokenizer.eos_token (e.g. '</s>') so completions can end"
        )
    return tuple(int(e) for e in eos) if isinstance(eos, (list, tuple)) else (int(eos),)
