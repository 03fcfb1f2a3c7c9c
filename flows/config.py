"""The sections of a domain spec owned by `flows/`; the libraries never see them. Both have defaults.

orchestration: {runner: dask, task_workers: 2, chunk_rows: 256}          # fan-out and retries
promotion: {min_gain: 1.0, max_regression: 2.0}                          # champion vs challenger
registry: {backend: mlflow, tracking_uri: http://mlflow.internal:5000}   # also kept in MLflow
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rlvrflow.training.config import Renamed


class OrchestrationConfig(Renamed):
    """Task runner for the fan-out stages (verification, tiering), chunking and retries."""

    RENAMED: ClassVar[dict[str, str]] = {"workers": "task_workers"}  # `workers` is the verifier pool's

    runner: Literal["threads", "dask"] = Field(
        "threads",
        description="where the fan-out tasks run: threads (local) or dask (prefect-dask, a local "
        "cluster unless `address` is set)",
    )
    task_workers: int = Field(
        2,
        ge=1,
        description="fan-out tasks (attach row ranges, tiering chunks, prepare's "
        "files under dask) run at once: threads, or Dask worker processes. Each task scores "
        "on the verifier pool of verifiers.workers processes (one pool per Dask worker)",
    )
    address: str = Field("", description="an existing Dask scheduler address; empty starts a local cluster")
    chunk_rows: int = Field(
        256,
        ge=1,
        description="rows per fan-out task when attaching verifiers and tiering prompts "
        "(tiering rounds up to whole engine calls); results do not depend on it",
    )
    retries: int = Field(
        2, ge=0, description="retries of a task after a transient failure (e.g. a verifier worker crash)"
    )
    retry_delay_seconds: float = Field(2.0, ge=0, description="wait before each retry")
    max_rows: int | None = Field(
        None,
        ge=1,
        description="use at most this many verified rows per split (by id order) for "
        "training and eval; null: all (smoke runs set it small)",
    )

    @field_validator("max_rows", mode="before")
    @classmethod
    def _null_for_all(cls, value):
        if value == 0 and not isinstance(value, bool):
            raise ValueError("0 no longer means all rows: write null (or leave it out) for all of them")
        return value


class PromotionConfig(BaseModel):
    """When tonight's model replaces the champion (flows/promotion.py, flows/models.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    auto: bool = Field(
        True,
        description="after each run, apply this rule and promote tonight's best model when it holds (the "
        "first registered model becomes champion); false: register only, promote with `rlvrflow models promote`",
    )
    min_gain: float = Field(
        0.0,
        ge=0,
        le=100,
        description="points of greedy pass@1 tonight's best must gain over the champion on "
        "the same held-out prompts (paired); the gain must also be above zero, so a tie keeps the champion",
    )
    require_interval_above_zero: bool = Field(
        True,
        description="also require the low end of the paired 95% interval of that gain above zero, so a "
        "night's noise does not replace the champion; false: the point estimate decides",
    )
    max_regression: float | None = Field(
        None,
        ge=0,
        le=100,
        description="points of greedy pass@1 tonight's best may lose against the champion on "
        "any regression set or the robustness set; null: eval.max_regression",
    )


class RegistryConfig(BaseModel):
    """Where the registry's record is also kept (flows/models.py, flows/mlflow_registry.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["local", "mlflow"] = Field(
        "local",
        description="local: OUT/registry/ only; mlflow: OUT/registry/ stays the record the flow reads, "
        "and every register, promote and rollback is also applied to MLflow's model registry (the `mlflow` "
        "extra: pip install 'rlvrflow[mlflow]')",
    )
    tracking_uri: str | None = Field(
        None,
        description="the MLflow tracking server, e.g. http://mlflow.internal:5000; null: the "
        "MLFLOW_TRACKING_URI environment variable",
    )
    model_name: str | None = Field(
        None, min_length=1, description="the registered model's name in MLflow; null: rlvrflow-<domain>"
    )

    @model_validator(mode="after")
    def _mlflow_only(self) -> "RegistryConfig":
        if self.backend == "local" and (self.tracking_uri or self.model_name):
            raise ValueError(
                "tracking_uri and model_name apply to backend: mlflow; set registry.backend: mlflow or remove them"
            )
        return self
