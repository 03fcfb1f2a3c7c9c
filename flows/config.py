"""The `orchestration:` section of a domain spec: how the Prefect flows fan out and retry.

Owned by `flows/`; the libraries never see it. All fields have defaults, so a spec may omit it.

    orchestration: {runner: dask, workers: 2, chunk_rows: 256, retries: 2}
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class OrchestrationConfig(BaseModel):
    """Task runner for the fan-out stages (verification, tiering), chunking and retries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runner: Literal["threads", "dask"] = Field(
        "threads",
        description="where the fan-out tasks run: threads (local) or dask (prefect-dask, a local "
        "cluster unless `address` is set)",
    )
    workers: int = Field(2, ge=1, description="threads, or Dask worker processes, that run the fan-out "
                         "tasks; the verifier pool's size is verifiers.workers")
    address: str = Field(
        "", description="an existing Dask scheduler address; empty starts a local cluster"
    )
    chunk_rows: int = Field(
        256, ge=1, description="rows per fan-out task when attaching verifiers and tiering prompts "
        "(tiering rounds up to whole engine calls); results do not depend on it"
    )
    retries: int = Field(
        2, ge=0, description="retries of a task after a transient failure (e.g. a verifier worker crash)"
    )
    retry_delay_seconds: float = Field(2.0, ge=0, description="wait before each retry")
    max_rows: int = Field(
        0, ge=0, description="use at most this many verified rows per split (by id order) for "
        "training and eval; 0 = all (smoke runs set it small)"
    )
