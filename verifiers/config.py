"""The `verifiers:` section of a domain spec: which verifier checks which category, and the reward.

Frozen pydantic v2 models with `extra="forbid"`; every field's description doubles as the fix hint
in spec errors. An unknown verifier name fails here, at spec load, with the list of valid names.
A rule names either a `verifier` (one reply, scored alone) or an `environment` (an agent's episode
against tools, scored on the end state: verifiers/environment.py); attach marks the rows of an
environment's category with the verifier name EPISODE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .environment import Environment

EPISODE = "episode"  # the `verifier` column of an environment category's rows


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VerifierRule(_Frozen):
    """Which verifier checks the rows of one category, and with which parameters."""

    category: str = Field(
        min_length=1, description=("row category this rule applies to, exactly as in the row's `category` column")
    )
    verifier: str | None = Field(
        None,
        min_length=1,
        description=(
            "verifier name: a built-in (math, code, sql, json, keyword, regex, choice, function_call, "
            "refusal), an entry point "
            "in group 'rlvrflow.verifiers', or a dotted path 'package.module:function'; give this or environment"
        ),
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "verifier parameters as a mapping, e.g. {database: shop.db} for sql; relative paths are "
            "resolved against the spec file's folder"
        ),
    )
    environment: Environment | None = Field(
        None,
        description=(
            "instead of a verifier: the agent environment the category's rows are episodes of, {database, "
            "tools, max_turns, outcome, instructions, ...} (verifiers/environment.py); the database path is "
            "relative to the spec file's folder and each row's reference is the outcome query's expected rows. "
            "Its rows are checked at attach; with training.episodes (the default) SFT learns the worked "
            "transcripts, tiering (for GRPO, not DPO) and GRPO play the outcome-only rows as episodes, and "
            "GRPO's evals and the evaluate stage play the held-out ones, one greedy episode per row"
        ),
    )

    @field_validator("verifier")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        from .registry import UnknownVerifier, check_name

        if name is None:
            return None
        try:
            check_name(name)
        except UnknownVerifier as exc:
            raise ValueError(str(exc)) from None
        return name

    @model_validator(mode="after")
    def _one_kind(self) -> "VerifierRule":
        if (self.verifier is None) == (self.environment is None):
            raise ValueError(f"rule {self.category!r}: give exactly one of verifier or environment")
        if self.environment is not None and self.params:
            raise ValueError(
                f"rule {self.category!r}: params belong to a verifier; an environment's settings "
                "go inside `environment`"
            )
        return self

    def resolved_environment(self, base_dir: Path | str) -> Environment:
        """The rule's environment with a relative database path made absolute against `base_dir`."""
        if self.environment is None:
            raise ValueError(f"rule {self.category!r} names no environment")
        db = self.environment.database
        return (
            self.environment
            if db.is_absolute()
            else self.environment.model_copy(update={"database": (Path(base_dir) / db).resolve()})
        )


class LengthPenaltyConfig(_Frozen):
    """A bounded tanh penalty on completion length, subtracted from the reward (off by default)."""

    enabled: bool = Field(False, description="subtract a bounded length penalty from the reward")
    target_tokens: int = Field(
        256, gt=0, description=("completion length in tokens at which the penalty starts (or is centred, if two_sided)")
    )
    max_penalty: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description=("largest penalty ever subtracted; the penalty approaches it as tanh approaches 1"),
    )
    scale_tokens: int | None = Field(
        None,
        gt=0,
        description=(
            "tokens over the target at which the penalty reaches tanh(1)=76% of max_penalty; null means target_tokens"
        ),
    )
    two_sided: bool = Field(
        False, description=("also penalize completions shorter than target_tokens (|n - target| instead of n - target)")
    )

    @property
    def scale(self) -> int:
        return self.scale_tokens or self.target_tokens


class TurnPenalty(_Frozen):
    """What extra assistant messages cost an episode's reward: min(max_penalty, per_turn * turns past free_turns)."""

    per_turn: float = Field(0.02, ge=0.0, description="penalty per assistant message beyond free_turns; 0 turns it off")
    free_turns: int = Field(
        3, ge=1, description="assistant messages an episode takes without penalty (the lookups a task needs + reply)"
    )
    max_penalty: float = Field(0.2, ge=0.0, le=1.0, description="largest turn penalty ever subtracted")


class RewardConfig(_Frozen):
    """How a verdict becomes a GRPO reward: weighted format, correctness and process layers, minus
    the optional length penalty (`verifiers.reward`); an episode's: format and correctness minus the
    turn penalty (verifiers/episode.py)."""

    format_weight: float = Field(
        0.1,
        ge=0.0,
        description=("weight of the format layer: 1 when the verifier could read an answer from the response"),
    )
    correctness_weight: float = Field(
        1.0, ge=0.0, description=("weight of the correctness layer: the verdict's score in [0, 1]")
    )
    process_weight: float = Field(
        0.0,
        ge=0.0,
        description=("weight of the optional process layer, scored by process_verifier on the whole response"),
    )
    process_verifier: str | None = Field(
        None,
        description=(
            "verifier that scores the process layer, e.g. working (arithmetic that holds), keyword or regex; "
            "null disables the layer"
        ),
    )
    process_params: dict[str, Any] = Field(
        default_factory=dict,
        description=("reference for process_verifier, e.g. {required: ['return policy']} for keyword"),
    )
    turn_penalty: TurnPenalty = Field(
        default_factory=TurnPenalty,
        description=(
            "{per_turn, free_turns, max_penalty}: what each assistant message past free_turns costs an episode's "
            "GRPO reward (an environment's rows; tiering counts successes only), bounded by max_penalty"
        ),
    )
    length_penalty: LengthPenaltyConfig = Field(
        default_factory=LengthPenaltyConfig,
        description=(
            "optional tanh-shaped length penalty: enabled, target_tokens, max_penalty, scale_tokens, two_sided"
        ),
    )

    @model_validator(mode="after")
    def _process_layer(self) -> "RewardConfig":
        if self.process_weight > 0 and not self.process_verifier:
            raise ValueError(
                "process_weight > 0 needs process_verifier (e.g. keyword); set one or set process_weight: 0"
            )
        if self.process_verifier:
            VerifierRule._known(self.process_verifier)
        return self


class CanaryConfig(_Frozen):
    """Reward canaries: garbage and universal answers that no rule's verifier may score."""

    enabled: bool = Field(
        True,
        description=(
            "probe every rule with garbage and universal answers at attach time and stop the run when "
            "one scores (see verifiers/canary.py)"
        ),
    )
    max_share: float = Field(
        0.01,
        ge=0.0,
        lt=1.0,
        description=(
            "a canary that scores on more than this share of a rule's sampled rows (and on at least "
            "two rows) stops the run"
        ),
    )
    sample_rows: int = Field(
        50,
        ge=1,
        description=(
            "rows per rule that every canary is scored against (seeded sample; a verifier module may "
            "set CANARY_SAMPLE_ROWS lower, as the code verifier does)"
        ),
    )
    seed: int = Field(0, description="seed of the row sample")
    prior_golds: int = Field(
        3,
        ge=0,
        description=(
            "prior canary: the most frequent golds of each rule's rows probed as constant answers "
            "(`Answer: 2`); one scoring above max_share is reported as a skewed prior; 0 turns the probe off"
        ),
    )
    max_prior_share: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description=(
            "prior canary: a constant answer right on more than this share of a rule's sampled rows stops the "
            "run (GRPO would learn to answer it to everything). Well above one half, so a balanced two-way "
            "choice does not stop on its sample's noise."
        ),
    )

    @model_validator(mode="after")
    def _bounds(self) -> "CanaryConfig":
        if self.max_prior_share < self.max_share:
            raise ValueError(
                f"max_prior_share ({self.max_prior_share}) is below max_share ({self.max_share}); "
                "the stop bound must be at or above the warning threshold"
            )
        return self


class VerifierConfig(_Frozen):
    """The `verifiers:` section: the rules, the reward, the verifier pool (workers, timeout_s) and the
    attach-time checks (self_check, canaries)."""

    rules: list[VerifierRule] = Field(
        min_length=1,
        description=(
            "one rule per category: {category, verifier, params}; rows of other categories are "
            "rejected with reason no_verifier_rule"
        ),
    )
    reward: RewardConfig = Field(
        default_factory=RewardConfig,
        description=(
            "reward layers and their weights: format_weight, correctness_weight, process_weight, length_penalty"
        ),
    )
    workers: int | None = Field(
        None,
        ge=1,
        description=(
            "processes of the one verifier pool that every stage scores with (attach, canaries, tiering, GRPO "
            "rewards, DPO's and eval's held-out scoring); null: one per CPU core"
        ),
    )
    timeout_s: float = Field(
        10.0,
        gt=0,
        description=(
            "wall-clock limit per verification in seconds, at attach, canaries, tiering, GRPO rewards and evals; "
            "a verdict past it gets status timeout (attach's self-check of the references allows at least 5 s, "
            "and 3x + 5 s of a rule's own params.timeout_s)"
        ),
    )
    answer_only_targets: bool = Field(
        False,
        description=(
            "give a row without a logged solution an answer-only SFT target built from its reference (math: "
            "`Answer: gold`, choice: `Answer: B`, sql: the gold query in a fence) and count them in attach's "
            "stats; off: such rows keep an empty solution, SFT skips them and they are the rows GRPO learns "
            "from (curriculum.rl_rows). On, SFT memorizes the gold of every row and tiering then calls "
            "memorized rows learnable"
        ),
    )
    self_check: bool = Field(
        True, description=("check each row's reference against its own verifier at attach time and reject failures")
    )
    canaries: CanaryConfig = Field(
        default_factory=CanaryConfig,
        description=(
            "reward canaries at attach time: enabled, max_share, sample_rows, seed, prior_golds, max_prior_share"
        ),
    )

    @field_validator("rules")
    @classmethod
    def _unique_categories(cls, rules: list[VerifierRule]) -> list[VerifierRule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.category in seen:
                raise ValueError(f"category {rule.category!r} has more than one rule; keep one")
            seen.add(rule.category)
        return rules

    def rule_for(self, category: str) -> VerifierRule | None:
        return next((r for r in self.rules if r.category == category), None)
