"""Typed configuration for the curriculum: pass@k tiering, the held-out split and the sampler.

`CurriculumConfig` is the `curriculum:` section of a domain spec (`flows/spec.py` composes it into
`DomainSpec`). Every model here is frozen, rejects unknown keys and describes each field; cross-field
rules (k <= n_samples, too_hard_max < too_easy_min) fail at load time and say how to fix them.

Tiers are decided on the per-prompt success rate c/n (= pass@1):
    rate <= too_hard_max  -> too_hard      (default 0.0: 0/n correct)
    rate >= too_easy_min  -> too_easy      (default 1.0: n/n correct)
    otherwise             -> learnable
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

TIERS: tuple[str, ...] = ("learnable", "too_hard", "too_easy")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TierBoundaries(_Frozen):
    """Where the tiers split on a prompt's success rate c/n."""

    too_hard_max: float = Field(
        0.0, ge=0.0, le=1.0, description="A success rate at or below this is too_hard (0.0: only 0/n)."
    )
    too_easy_min: float = Field(
        1.0, ge=0.0, le=1.0, description="A success rate at or above this is too_easy (1.0: only n/n)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> "TierBoundaries":
        if self.too_hard_max >= self.too_easy_min:
            raise ValueError(
                f"boundaries.too_hard_max={self.too_hard_max} must be below "
                f"boundaries.too_easy_min={self.too_easy_min}, or no prompt can be learnable; "
                "e.g. too_hard_max: 0.0, too_easy_min: 1.0"
            )
        return self

    def tier_of(self, rate: float) -> str:
        """The tier of one success rate in [0, 1]."""
        if rate <= self.too_hard_max:
            return "too_hard"
        if rate >= self.too_easy_min:
            return "too_easy"
        return "learnable"


class TierWeights(_Frozen):
    """Share of each sampler batch drawn from each tier (normalized to sum to 1)."""

    learnable: float = Field(0.8, ge=0.0, description="Weight of prompts with a mixed success rate.")
    too_hard: float = Field(0.1, ge=0.0, description="Weight of prompts the model never solved.")
    too_easy: float = Field(0.1, ge=0.0, description="Weight of prompts the model always solved.")

    @model_validator(mode="after")
    def _positive(self) -> "TierWeights":
        if self.learnable + self.too_hard + self.too_easy <= 0:
            raise ValueError("weights must not all be 0; give at least one tier a positive weight, e.g. learnable: 1.0")
        return self

    def normalized(self) -> dict[str, float]:
        """Tier -> share, summing to 1."""
        total = self.learnable + self.too_hard + self.too_easy
        return {t: getattr(self, t) / total for t in TIERS}


class AdaptiveSampling(_Frozen):
    """How `sampler: adaptive` values and draws prompts (curriculum/adaptive.py)."""

    step: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="How far one batch moves an arm's value towards the share of its "
        "groups that came back mixed (an exponential moving average; 1 keeps only the last batch).",
    )
    sharpness: float = Field(
        4.0,
        ge=0.0,
        le=16.0,
        description="A prompt's draw weight is its arm's value to this power (0 draws every "
        "eligible prompt alike; higher concentrates the batch on the arms most likely to come back mixed).",
    )
    retire_solved: bool = Field(
        True,
        description="A prompt whose group came back all correct is not drawn again in this run (its "
        "group would be zero-variance and dropped); false keeps it drawable.",
    )


class CurriculumConfig(_Frozen):
    """pass@k tiering of the SFT model, the train/eval split and the stratified, deduplicated sampler."""

    n_samples: int = Field(8, ge=1, description="Completions sampled per prompt when tiering (n).")
    k: int = Field(4, ge=1, description="k of the reported pass@k; must be <= n_samples.")
    boundaries: TierBoundaries = Field(
        default_factory=TierBoundaries, description="Success-rate cut points between the three tiers."
    )
    weights: TierWeights = Field(
        default_factory=TierWeights, description="Share of each batch per tier (within each category)."
    )
    category_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Share of each batch per category; empty means proportional to the category's train rows. "
        "Categories missing from a non-empty map get weight 0.",
    )
    dedup_window: int = Field(
        4, ge=0, description="A prompt id drawn in one of the last W batches is not drawn again (0 disables)."
    )
    eval_fraction: float = Field(
        0.15, ge=0.0, lt=1.0, description="Share of rows held out as split=eval (by a hash of id and seed)."
    )
    fallback: Literal["category_first", "tier_first"] = Field(
        "category_first",
        description="Where a dry (category, tier) cell's slots go: category_first borrows from the same "
        "category's other tiers, then other categories; tier_first borrows the same tier in other "
        "categories first.",
    )
    when_exhausted: Literal["relax_window", "short_batch"] = Field(
        "relax_window",
        description="When no eligible prompt is left anywhere: relax_window reuses the least recently drawn "
        "ids from the dedup window; short_batch returns a smaller batch.",
    )
    temperature: float = Field(
        1.0, ge=0.0, description="Sampling temperature when tiering, 0 = greedy (in a spec: generation.temperature)."
    )
    top_p: float = Field(
        1.0, gt=0.0, le=1.0, description="Nucleus sampling mass when tiering (in a spec: generation.top_p)."
    )
    max_new_tokens: int = Field(
        48, ge=1, description="Completion length cap in tokens when tiering (in a spec: generation.max_new_tokens)."
    )
    episode_max_new_tokens: int = Field(
        128,
        ge=1,
        description="Cap in tokens of each assistant message when tiering episodes (in a spec: "
        "generation.episode_max_new_tokens).",
    )
    engine: Literal["hf", "vllm"] = Field(
        "hf",
        description="What samples the tiering completions: hf (transformers, batches of engine_batch_size) "
        "or vllm (vLLM's offline engine, same prompt token ids and stop tokens; needs vllm installed: "
        "pip install 'rlvrflow[gpu]', or scripts/setup_vllm.sh on CPU).",
    )
    engine_batch_size: int = Field(64, ge=1, description="Sequences per generate call of the HF engine when tiering.")
    rl_rows: Literal["auto", "unseen", "all"] = Field(
        "auto",
        description="Which train rows tiering and GRPO draw from: unseen (the rows SFT did not train "
        "on: no solution, outcome only), all (every train row; the run states how many SFT also trained on), "
        "or auto (unseen when at least a tenth of the train rows are outcome only, else all). On rows SFT "
        "memorized, a 'learnable' tier means memorized, and GRPO's training reward rises while held-out "
        "pass@1 does not.",
    )
    max_rows: int | None = Field(
        None,
        ge=1,
        description="Tier at most this many of those rows (a seeded sample by id hash; null: all). "
        "Tiering samples n_samples completions per row, so the pool GRPO can use in its steps x "
        "prompts_per_step draws is all it needs.",
    )
    sampler: Literal["quota", "adaptive", "uniform"] = Field(
        "quota",
        description="How GRPO draws its prompts: quota (category x tier quotas, online re-tiering; "
        "curriculum/sampler.py), adaptive (each prompt weighted by the chance that its group comes back "
        "mixed, learned online per category and offline success count; curriculum/adaptive.py) or uniform "
        "(shuffled epochs over the tiered pool, as a plain data loader draws: the baseline the other two "
        "are measured against; it reads none of the other sampler settings: tiers, weights, category_weights, "
        "dedup_window, fallback, when_exhausted, retier_window; the tier stage still runs, for its report). Under adaptive the tier weights multiply each prompt's weight instead of setting "
        "batch shares.",
    )
    adaptive: AdaptiveSampling = Field(
        default_factory=AdaptiveSampling, description="Settings of sampler: adaptive (read by no other sampler)."
    )
    retier_window: int = Field(
        4,
        ge=1,
        description="Online re-tiering averages a prompt's last W group success rates "
        "(the offline pass@1 counts as the first one).",
    )

    @model_validator(mode="after")
    def _k_fits(self) -> "CurriculumConfig":
        if self.k > self.n_samples:
            raise ValueError(
                f"k={self.k} exceeds n_samples={self.n_samples}; pass@k needs at least k samples per prompt: "
                f"lower k or raise n_samples to >= {self.k}"
            )
        bad = {c: w for c, w in self.category_weights.items() if w < 0}
        if bad:
            raise ValueError(f"category_weights must be >= 0, got {bad}; use 0 to exclude a category")
        return self
