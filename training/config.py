"""Typed configuration for the training library: the base model, cold-start SFT, GRPO, checkpoints, eval.

These frozen pydantic models are the `training:` and `eval:` sections of a domain spec
(`flows/spec.py` composes them into `DomainSpec`). Every field has a description, unknown keys are
rejected, and cross-field rules (e.g. `epsilon` must be below 1) fail at load time with the fix.
Derived values are properties, not fields.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlvrflow.training.progress import check_reporters


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TinyModelConfig(_Frozen):
    """Dimensions of the embedded Llama-architecture model that rlvrflow builds itself (no downloads)."""

    hidden_size: int = Field(128, ge=8, description="Width of the residual stream.")
    num_layers: int = Field(4, ge=1, description="Number of decoder layers.")
    num_heads: int = Field(4, ge=1, description="Attention heads; must divide hidden_size.")
    intermediate_size: int = Field(352, ge=8, description="Width of the SwiGLU MLP.")
    max_positions: int = Field(512, ge=32, description="Longest prompt + completion in tokens.")
    min_char_count: int = Field(
        1, ge=1, description="Characters seen fewer times than this in the corpus map to <unk>."
    )

    @model_validator(mode="after")
    def _heads_divide(self) -> "TinyModelConfig":
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}; "
                "pick num_heads that divides hidden_size (e.g. 4)"
            )
        return self


# The dimensions of the pretrained tiny base (`model: embedded-base`, training/tiny_base.py): 2 layers run
# about twice the steps per second of 4 on a CPU core.
TINY_BASE_DIMS = TinyModelConfig(num_layers=2)


def renamed_error(renames: list[tuple[str, str, Any]]) -> PydanticCustomError:
    """The one error for fields that took another name or moved to another section: for each
    (old, new, value) it says what to write instead. Library configs raise it through `Renamed`, the
    domain spec for the fields it sets in one place (flows/spec.py)."""
    return PydanticCustomError(
        "renamed", "; ".join(f"{old} is now {new}: write {new}: {_as_yaml(value)}" for old, new, value in renames)
    )


class Renamed(_Frozen):
    """A config whose `RENAMED` maps earlier field names to the current ones (a dotted spec path when
    the setting moved out of this section); writing an earlier name is a `renamed_error`."""

    RENAMED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        old = [k for k in data if k in cls.RENAMED] if isinstance(data, dict) else []
        if old:
            raise renamed_error([(k, cls.RENAMED[k], _renamed_value(k, data[k])) for k in old])
        return data


def _as_yaml(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _renamed_value(old: str, value: Any) -> Any:
    if old == "std_normalize" and isinstance(value, bool):
        return "group" if value else "none"
    return value


# earlier names of the fields that carry TRL's (transformers TrainingArguments') names in SFT, DPO and GRPO
TRL_NAMES = {"steps": "max_steps", "lr": "learning_rate", "log_every": "logging_steps"}


class SFTConfig(Renamed):
    """Cold-start supervised fine-tuning on the reference solutions (prompt -> solution)."""

    RENAMED: ClassVar[dict[str, str]] = TRL_NAMES

    max_steps: int = Field(300, ge=0, description="Optimizer steps; 0 skips SFT (the base model is the SFT model).")
    learning_rate: float = Field(
        1e-3,
        gt=0,
        description="Peak AdamW learning rate. 1e-3 suits the embedded ~1M-parameter model (3e-3 and more let it "
        "memorize prompts without learning the arithmetic: bench/addition_probe.py); a pretrained HF model "
        "wants ~1e-5.",
    )
    batch_size: int = Field(32, ge=1, description="Sequences per optimizer step.")
    warmup_steps: int = Field(20, ge=0, description="Linear warmup steps before the cosine decay.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    max_length: int = Field(
        512, ge=8, description="Longer prompt+solution sequences are truncated from the left of the prompt."
    )
    logging_steps: int = Field(25, ge=1, description="Write a loss line to sft_metrics.jsonl every N steps.")

    @property
    def min_lr_ratio(self) -> float:
        """The cosine floor (a fraction of learning_rate): fixed for SFT, a field of training.dpo and training.grpo."""
        return 0.1


class HackingAlarmConfig(_Frozen):
    """When the reward-hacking alarm sounds (training/report.py, detect_reward_hacking): the training reward
    rose clearly while held-out pass@1 did not follow, on enough steps and held-out prompts to tell."""

    min_steps: int = Field(
        20,
        ge=4,
        description="Training steps before the alarm may sound; the reward rise compares the mean of "
        "the last quarter of steps with the first quarter, so 20 steps compare two windows of 5. Below it a "
        "quiet note stands in for the banner.",
    )
    min_prompts: int = Field(
        100,
        ge=2,
        description="Held-out prompts the baseline and the checkpoint were both scored on; below it "
        "a quiet note stands in for the banner (40 prompts give a 95% interval of about +-10 points).",
    )
    min_reward_gain: float = Field(
        0.05,
        gt=0,
        description="The smallest rise of the mean training reward (last quarter of steps against "
        "the first) worth checking; it must also exceed twice its standard error over the per-step rewards.",
    )
    level: float = Field(
        0.95, gt=0.5, lt=1, description="Level of the paired bootstrap interval on the held-out change."
    )


class GRPOConfig(Renamed):
    """Group Relative Policy Optimization: rollouts, rewards, the clipped loss and its schedule."""

    # earlier names of fields that now carry TRL's GRPOConfig names, and the pool size every stage shares
    RENAMED: ClassVar[dict[str, str]] = {
        "group_size": "num_generations",
        "eps_low": "epsilon",
        "eps_high": "epsilon_high",
        "std_normalize": "scale_rewards",
        "reward_workers": "verifiers.workers",
        **TRL_NAMES,
        "grad_accum": "gradient_accumulation_steps",
        "updates_per_batch": "num_iterations",
    }

    @model_validator(mode="before")
    @classmethod
    def _scale_rewards_bool(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("scale_rewards"), bool):
            data = {**data, "scale_rewards": "group" if data["scale_rewards"] else "none"}
        return data

    max_steps: int = Field(
        150, ge=0, description="Training steps, one sampler batch each (num_iterations updates per batch)."
    )
    prompts_per_step: int = Field(8, ge=1, description="Prompts drawn from the curriculum sampler per step.")
    num_generations: int = Field(8, ge=2, description="Completions sampled per prompt (G), as TRL names it.")
    learning_rate: float = Field(2e-4, gt=0, description="Peak AdamW learning rate (GRPO wants ~10x less than SFT).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    beta: float = Field(
        0.0, ge=0, description="k3 KL coefficient to the reference (SFT) model; 0 loads no reference model."
    )
    entropy_coef: float = Field(
        0.0,
        ge=0,
        description="Entropy bonus: the loss subtracts entropy_coef x the policy's mean token entropy "
        "over the completions (aggregated like the surrogate), which holds the policy's spread against collapse "
        "onto one answer per prompt; 0 adds nothing (the entropy is logged either way).",
    )
    epsilon: float = Field(0.2, ge=0, lt=1, description="Lower clip: ratio >= 1 - epsilon (TRL's name).")
    epsilon_high: float = Field(0.28, ge=0, description="Upper clip (clip-higher, DAPO): ratio <= 1 + epsilon_high.")
    scale_rewards: Literal["group", "none"] = Field(
        "group",
        description="group: divide group-centred rewards by the group's std; none: centre only (Dr. GRPO); "
        "TRL's name (true and false read as group and none).",
    )
    loss_agg: Literal["token", "sequence"] = Field(
        "token", description="token: mean over all completion tokens; sequence: mean of per-sequence means."
    )
    num_iterations: int = Field(
        1, ge=1, description="Gradient passes over each rollout batch (mu, TRL's name); >1 makes the ratio clip bite."
    )
    mask_truncated_completions: bool = Field(
        False,
        description="TRL's and DAPO's overlong filtering: a completion cut at max_new_tokens keeps its reward "
        "in its group's advantages but adds no tokens to the loss, so a reply that never finished is not "
        "reinforced for the number it happened to reach. In an episode, each message cut at "
        "episode_max_new_tokens adds no tokens either.",
    )
    filter_zero_variance: bool = Field(True, description="Drop groups whose rewards are all equal.")
    max_refill_rounds: int = Field(2, ge=0, description="Extra sampler draws per step to replace zero-variance groups.")
    max_new_tokens: int = Field(
        24, ge=1, description="Completion length cap in tokens during rollouts (in a spec: generation.max_new_tokens)."
    )
    episode_max_new_tokens: int = Field(
        128,
        ge=1,
        description="Cap in tokens of each assistant message of an episode rollout (in a spec: "
        "generation.episode_max_new_tokens).",
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="Rollout sampling temperature (in a spec: generation.temperature); "
        "the loss scores the policy, old policy and reference at the same temperature "
        "(logits / T), as TRL and verl do.",
    )
    top_p: float = Field(1.0, gt=0, le=1, description="Rollout nucleus sampling (in a spec: generation.top_p).")
    gradient_accumulation_steps: int = Field(
        1, ge=1, description="Micro-batches per update (the groups are split evenly)."
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    warmup_steps: int = Field(10, ge=0, description="Linear warmup steps before the cosine decay.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine floor as a fraction of learning_rate.")
    rollout: Literal["hf", "vllm"] = Field("hf", description="Rollout engine: in-process HF or vLLM.")
    backend: Literal["torch", "deepspeed"] = Field(
        "torch",
        description="GRPO's optimizer backend: torch (one process) or deepspeed (ZeRO data parallel over the "
        "ranks of a multi-GPU launch). Only GRPO runs on several ranks; SFT and DPO train in one process either way.",
    )
    zero_stage: Literal[2, 3] = Field(
        2,
        description="DeepSpeed ZeRO stage (backend deepspeed only): 2 partitions optimizer state and gradients; "
        "3 also the parameters (rank 0 then keeps a full replica for generation).",
    )
    dist_timeout_minutes: int = Field(
        120,
        ge=1,
        description="Several ranks (torchrun or the deepspeed launcher): how long ranks wait in a collective, "
        "e.g. for rank 0's rollouts and held-out eval (DeepSpeed's and NCCL's own default is 10 minutes, which a "
        "long eval can exceed).",
    )
    logging_steps: int = Field(
        1,
        ge=1,
        description="Every N steps: a line in metrics.jsonl and a step line in the log (reward, correct rate, "
        "zero-variance share, KL, step time, tokens).",
    )
    log_samples_every: int = Field(
        10,
        ge=0,
        description="Every N steps, the best and worst completion of two of the step's groups (prompt, response, "
        "reward, verdict status) go to rollout_samples.jsonl, to read what the policy writes; 0: never.",
    )
    rollout_mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: rollouts and updates take turns in one process. async: a generator process samples and "
        "scores groups with a slightly older copy of the policy while the trainer updates, through a bounded queue "
        "under the run folder (rollout_queue/; training/async_rollouts.py); the loss uses the generator's "
        "log-probs as the old policy. async needs rollout: hf and backend: torch in one process, and with LoRA "
        "training.dtype float32.",
    )
    max_staleness: int = Field(
        1,
        ge=0,
        description="async only: the oldest policy a trained group may come from, in versions (updates) behind "
        "the trainer; older groups are dropped and counted (groups_stale). 0 keeps generation in lockstep "
        "with the updates (the synchronous run's numbers). The queue holds max_staleness + 1 - sync_every "
        "requests ahead of the trainer (none past the last step), each a step's prompts (more by the share of "
        "zero-variance groups).",
    )
    hacking_alarm: HackingAlarmConfig = Field(
        default_factory=HackingAlarmConfig,
        description="When the reward-hacking alarm sounds: the training reward clearly up over a window of steps "
        "while held-out pass@1 stays flat or falls, its interval excluding the training gain; minimums on "
        "steps and held-out prompts, below which a quiet note is logged instead.",
    )
    sync_every: int = Field(
        1,
        ge=1,
        description="async only: the trainer hands its weights to the generator every N updates (1: after each); "
        "at most max_staleness + 1, or every group would arrive too old.",
    )

    @property
    def lookahead_batches(self) -> int:
        """async: sampler batches requested ahead of the one the trainer is consuming (the queue's bound)."""
        return self.max_staleness + 1 - self.sync_every

    @model_validator(mode="after")
    def _clip_sane(self) -> "GRPOConfig":
        if self.prompts_per_step * self.num_generations % self.gradient_accumulation_steps:
            raise ValueError(
                f"prompts_per_step*num_generations={self.prompts_per_step * self.num_generations} is not divisible "
                f"by gradient_accumulation_steps={self.gradient_accumulation_steps}; choose one that divides it"
            )
        return self

    @model_validator(mode="after")
    def _async_supported(self) -> "GRPOConfig":
        if self.rollout_mode == "sync":
            return self
        if self.rollout == "vllm":
            raise ValueError(
                "rollout_mode 'async' with rollout 'vllm' is not supported (the generator process "
                "samples with HF); set rollout: hf, or rollout_mode: sync for vLLM rollouts"
            )
        if self.backend == "deepspeed":
            raise ValueError(
                "rollout_mode 'async' with backend 'deepspeed' is not supported (the generator feeds "
                "one trainer process); set backend: torch, or rollout_mode: sync for DeepSpeed"
            )
        if self.top_p < 1.0:
            raise ValueError(
                f"rollout_mode 'async' with top_p={self.top_p} is not supported: the generator's "
                "log-probs, the loss's old policy, are over the top-p nucleus and the loss scores the "
                "whole tempered distribution, so a fresh group's ratio starts below 1 and the clip "
                "binds; set top_p: 1.0, or rollout_mode: sync (the trainer scores the old policy itself)"
            )
        if self.sync_every > self.max_staleness + 1:
            raise ValueError(
                f"sync_every={self.sync_every} exceeds max_staleness + 1 = {self.max_staleness + 1}: "
                "the generator's weights would always be too old; lower sync_every or raise "
                "max_staleness"
            )
        return self


class CheckpointConfig(_Frozen):
    """When to checkpoint (and evaluate), and which checkpoints to keep."""

    every: int = Field(50, ge=1, description="Save and evaluate every N GRPO steps (and at the end).")
    keep_last: int = Field(2, ge=1, description="Keep this many most recent checkpoints.")
    keep_best: bool = Field(True, description="Also keep the checkpoint with the best eval metric.")
    metric: Literal["pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k"] = Field(
        "pass_at_1_greedy", description="Eval metric that picks the best checkpoint."
    )


class LoRAConfig(_Frozen):
    """Low-rank adapters (peft) instead of full fine-tuning, for SFT and GRPO."""

    r: int = Field(
        16,
        ge=1,
        description="Adapter rank. verl advises >= 32 for RL on real models; 8-16 is enough for the tiny test models.",
    )
    alpha: float = Field(32.0, gt=0, description="LoRA scaling numerator: updates are scaled by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter input while training.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1,
        description="Names of the Linear modules that get adapters (Llama/Qwen2 attention and MLP by default), or "
        "['all-linear'] for every Linear but the LM head.",
    )


class DPOConfig(Renamed):
    """Direct Preference Optimization (training.algorithm: dpo) on pairs from tiering's own samples, in one
    process (torch): none of training.grpo applies to it."""

    RENAMED: ClassVar[dict[str, str]] = TRL_NAMES

    max_steps: int = Field(100, ge=0, description="Optimizer steps; 0 keeps the SFT model (evaluated as the result).")
    learning_rate: float = Field(
        1e-4,
        gt=0,
        description="Peak AdamW learning rate. ~1e-4 suits the embedded ~1M-parameter model; a pretrained HF model "
        "wants ~5e-7 to 5e-6 (TRL's DPO default is 1e-6), LoRA ~10x more.",
    )
    beta: float = Field(
        0.1,
        gt=0,
        description="Strength of the implicit KL to the reference (SFT) model in the sigmoid loss "
        "-log sigmoid(beta * (chosen log-ratio - rejected log-ratio)); higher stays closer to SFT.",
    )
    batch_size: int = Field(8, ge=1, description="Pairs per optimizer step (each pair is two sequences).")
    warmup_steps: int = Field(5, ge=0, description="Linear warmup steps before the cosine decay.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine floor as a fraction of learning_rate.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    max_length: int = Field(
        512,
        ge=8,
        description="Longest prompt + response in tokens: a longer response loses its end (and its end token), "
        "then a prompt that still does not fit loses its start.",
    )
    max_pairs_per_prompt: int = Field(4, ge=1, description="At most this many (chosen, rejected) pairs per prompt.")
    tiers: list[Literal["learnable", "too_hard", "too_easy"]] = Field(
        default_factory=lambda: ["learnable"],
        min_length=1,
        description="Tiers whose prompts give pairs. Only prompts with both a correct and an incorrect sample can "
        "(learnable ones by construction; too_hard/too_easy only with boundaries that leave them mixed).",
    )
    length_match: bool = Field(
        True,
        description="Pair each correct response with the incorrect one closest in token count first, so the "
        "preference is not mostly about length.",
    )
    logging_steps: int = Field(1, ge=1, description="Write a metrics line every N steps.")


class TrainingConfig(_Frozen):
    """The `training:` section of a domain spec."""

    start_from: Literal["base", "champion"] = Field(
        "base",
        description="'base': each run starts from `model`; 'champion': a scheduled run on the same --out continues "
        "from the registry's champion (its exported model, LoRA merged) on tonight's rows, and from `model` while "
        "there is none.",
    )
    model: str = Field(
        "embedded",
        description="'embedded' builds the tiny Llama + tokenizer from the corpus (random weights); 'embedded-base' "
        "starts from rlvrflow's pretrained tiny base (the same architecture trained on generic arithmetic and on "
        "reading numbers out of text, training/tiny_base.py) with the corpus's new characters added; otherwise a "
        "local Hugging Face causal-LM directory (relative to the spec file).",
    )
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig, description="Embedded model dimensions.")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="Cold-start SFT.")
    grpo: GRPOConfig = Field(default_factory=GRPOConfig, description="GRPO loop.")
    algorithm: Literal["grpo", "dpo"] = Field(
        "grpo",
        description="What trains after SFT: grpo (online rollouts, verifier rewards) or dpo (offline pairs from "
        "the tiering samples: chosen correct, rejected incorrect; training.dpo). Eval and report are the same.",
    )
    dpo: DPOConfig = Field(default_factory=DPOConfig, description="DPO (training.algorithm: dpo).")
    episodes: bool = Field(
        True,
        description="Train on the episode rows of environment categories (verifiers.rules[].environment): SFT "
        "on their worked transcripts, tiering by pass@k of episodes, GRPO groups of episodes. false keeps "
        "them out of SFT, tiering, GRPO and the evaluation (e.g. a model whose positions cannot hold an "
        "episode; report.json's episodes.skipped counts them). DPO never trains on them.",
    )
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpointing.")
    seed: int = Field(0, description="Seed for model init, data order and sampling.")
    report_to: list[str] = Field(
        default_factory=lambda: ["tensorboard"],
        description="Where SFT and GRPO also write their metrics: 'tensorboard' writes event files under the stage's "
        "output folder (<out>/tb; open with `tensorboard --logdir <out>`); [] writes none.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available.")
    torch_threads: int = Field(
        0,
        ge=0,
        description="torch threads for SFT, GRPO, tiering and eval (torch.set_num_threads). 0: auto, one per two "
        "usable cores, 1 to 4 (training.modeling.auto_threads). torch's own default (one per core) stalls when "
        "another job shares the machine: on 2 cores with other jobs running, 20 SFT steps of the embedded model took "
        "56-147 s with 2 threads and 9-55 s with 1 (3 runs each, 3-9x), and with one more busy process 257-514 s "
        "against 21-60 s (2 runs, 9-12x).",
    )
    prompt_format: Literal["auto", "chat", "raw"] = Field(
        "auto",
        description="How prompts reach the model in SFT, tiering, GRPO, eval and vLLM alike: chat renders each as "
        "the user turn of the tokenizer's chat template (stopping at its end-of-turn token), raw passes the text "
        "as is; auto is chat when the tokenizer has a template (the embedded model has none: raw).",
    )
    system_prompt: str | None = Field(
        None, description="Chat format only: a system turn put before every prompt (None: no system turn)."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Compute precision of the policy, the KL reference and vLLM: auto is bfloat16 on a GPU that "
        "supports it, else float32 (always float32 on CPU). Trainable weights stay float32 (forwards run under "
        "autocast), frozen ones (the KL reference, a LoRA base) are stored in this dtype; log-probs and the loss "
        "are float32. float16 adds loss scaling. On a CPU, bfloat16 and float16 pay only with native instructions "
        "(AVX512-BF16 or AMX-BF16; AVX512-FP16 or AMX-FP16); where the CPU emulates them, spec-check and the "
        "run's first warnings say so (flows/preflight.py).",
    )
    lora: LoRAConfig | None = Field(
        None, description="LoRA adapters for SFT and GRPO (e.g. {r: 16, alpha: 32}); None trains every weight."
    )

    @property
    def is_embedded(self) -> bool:
        """The embedded architecture, from random weights or from the pretrained tiny base."""
        return self.model in ("embedded", "embedded-base")

    @model_validator(mode="after")
    def _base_has_its_dims(self) -> "TrainingConfig":
        # the default and the base's own dimensions pass: a spec copied whole (overrides) carries one of them
        if self.model == "embedded-base" and self.tiny not in (TinyModelConfig(), TINY_BASE_DIMS):
            raise ValueError(
                "model is 'embedded-base' but tiny sets other dimensions: the pretrained base has its own (2 layers, "
                "width 128); remove training.tiny, or use model: embedded to build a model of your dimensions"
            )
        return self

    @field_validator("report_to")
    @classmethod
    def _known_reporters(cls, value: list[str]) -> list[str]:
        return check_reporters(value)

    @model_validator(mode="after")
    def _async_lora_in_float32(self) -> "TrainingConfig":
        # `auto` may still resolve to bf16 on a GPU: train_grpo checks the resolved dtype (async_rollouts.check_dtype)
        if self.grpo.rollout_mode == "async" and self.lora is not None and self.dtype in ("bfloat16", "float16"):
            raise ValueError(
                f"grpo.rollout_mode async with lora and dtype {self.dtype}: the generator gets the adapter merged into "
                "16-bit base weights, which rounds small updates away and skews the old log-probs; set dtype: float32, "
                "or rollout_mode: sync"
            )
        return self

    @model_validator(mode="after")
    def _system_needs_chat(self) -> "TrainingConfig":
        if self.system_prompt is not None and self.prompt_format == "raw":
            raise ValueError(
                "system_prompt is set but prompt_format is 'raw' (raw prompts have no system turn); set "
                "prompt_format: chat (or auto with a model that has a chat template) or remove system_prompt"
            )
        if self.lora is not None and self.algorithm == "grpo" and self.grpo.backend == "deepspeed":
            raise ValueError(
                "lora is not supported with grpo.backend 'deepspeed' yet (ZeRO and peft adapters need care this "
                "code does not take); use backend: torch with lora, or remove lora for DeepSpeed"
            )
        return self


class RegressionSetConfig(_Frozen):
    """One `eval.regression_sets` entry: a small held-out set outside the training domain (forgetting)."""

    name: str = Field(
        ...,
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
        description="Short name; a column of the eval matrix and a key in report.json (letters, digits, _ . -).",
    )
    path: str = Field(
        ..., min_length=1, description="JSONL or Parquet rows (id, prompt, reference), relative to the spec file."
    )
    verifier: str = Field(
        ..., min_length=1, description="Registry name of the verifier that scores every row of the set."
    )
    params: dict = Field(default_factory=dict, description="verifier_params for every row of the set.")

    @model_validator(mode="after")
    def _known_file_and_verifier(self) -> "RegressionSetConfig":
        if not self.path.endswith((".jsonl", ".parquet")):
            raise ValueError(f"regression set {self.name!r}: path {self.path!r} must end in .jsonl or .parquet")
        from rlvrflow.verifiers.registry import UnknownVerifier, check_name

        try:
            check_name(self.verifier)
        except UnknownVerifier as exc:  # its message lists the valid names
            raise ValueError(f"regression set {self.name!r}: {exc}") from None
        return self


class EvalConfig(Renamed):
    """The `eval:` section: held-out evaluation of a checkpoint (and of the SFT baseline)."""

    RENAMED: ClassVar[dict[str, str]] = {"workers": "verifiers.workers"}  # one pool size for every stage

    regression_sets: list[RegressionSetConfig] = Field(
        default_factory=list,
        description="Held-out sets outside the training domain, evaluated at the SFT baseline and every checkpoint "
        "like the main eval: [{name, path, verifier, params}].",
    )
    max_regression: float = Field(
        2.0,
        ge=0,
        le=100,
        description="Points of greedy pass@1 (0-100 scale) a checkpoint may lose against SFT on any regression set; "
        "a checkpoint that loses more is flagged in the report and never chosen as best.",
    )
    robustness_set: str | None = Field(
        None,
        description="JSONL or Parquet rows whose right answer is to decline or ask for missing information, each with "
        "its verifier (e.g. refusal), relative to the spec file; None: robustness is not measured.",
    )
    k: int = Field(4, ge=1, description="k of pass@k (unbiased estimator over n_samples).")
    n_samples: int = Field(8, ge=1, description="Sampled completions per prompt.")
    max_new_tokens: int = Field(
        24,
        ge=1,
        description="Completion length cap in tokens, greedy and sampled (in a spec: generation.max_new_tokens).",
    )
    episode_max_new_tokens: int = Field(
        128,
        ge=1,
        description="Cap in tokens of each assistant message of a held-out episode (in a spec: "
        "generation.episode_max_new_tokens).",
    )
    temperature: float = Field(
        1.0, gt=0, description="Sampling temperature of the sampled metrics (in a spec: generation.temperature)."
    )
    top_p: float = Field(
        1.0, gt=0, le=1, description="Nucleus sampling of the sampled metrics (in a spec: generation.top_p)."
    )
    max_prompts: int | None = Field(
        None,
        ge=1,
        description="Evaluate at most this many prompts (null: all): each category's share, sampled by "
        "a hash of the id.",
    )

    @field_validator("max_prompts", mode="before")
    @classmethod
    def _null_for_all(cls, value):
        if value == 0 and not isinstance(value, bool):
            raise ValueError("0 no longer means all prompts: write null (or leave it out) for all of them")
        return value

    engine: Literal["hf", "vllm"] = Field(
        "hf",
        description="What samples a checkpoint directory's completions (training.eval.evaluate): hf "
        "(transformers; reads LoRA adapter checkpoints) or vllm (vLLM's offline engine, same prompt token ids "
        "and stop tokens; merged checkpoints only; needs vllm: pip install 'rlvrflow[gpu]', or "
        "scripts/setup_vllm.sh on CPU). The evals inside GRPO and DPO use the live policy (HF) either way.",
    )
    samples_per_category: int = Field(
        3,
        ge=0,
        description="Prompts per category whose greedy and first sampled completion every eval writes to its "
        "samples file (chosen by a hash of (seed, id): the same prompts at every checkpoint); 0: none.",
    )

    @model_validator(mode="after")
    def _k_le_n(self) -> "EvalConfig":
        if self.k > self.n_samples:
            raise ValueError(f"k={self.k} exceeds n_samples={self.n_samples}; set k <= n_samples")
        names = [s.name for s in self.regression_sets]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"eval.regression_sets: name(s) {dupes} appear more than once; give each set its own name")
        if self.robustness_set is not None and not self.robustness_set.endswith((".jsonl", ".parquet")):
            raise ValueError(f"eval.robustness_set {self.robustness_set!r} must be a .jsonl or .parquet file")
        return self
