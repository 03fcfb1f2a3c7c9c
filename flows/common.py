"""What every flow shares: loading the spec for a run, the smoke budget, task runners, retries.

Prefect is imported lazily inside functions here; the flow modules import it at the top (they are
the Prefect layer) but keep torch, polars and Great Expectations inside tasks.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from flows.spec import DomainSpec, load_spec, spec_from_dict

# A budget that runs the whole chain in about a minute on two CPU cores: a handful of rows,
# a few optimizer steps, tiny groups. `retrain(smoke=True)` and `rlvrflow run --smoke` apply it.
SMOKE_OVERRIDES: dict[str, Any] = {
    "orchestration.max_rows": 24,
    "orchestration.chunk_rows": 64,
    "curriculum.n_samples": 2,
    "curriculum.k": 1,
    "curriculum.max_new_tokens": 16,
    "training.torch_threads": 1,  # on a busy 2-core box, 2 spinning torch threads made SFT 40x slower
    "training.sft.steps": 4,
    "training.sft.batch_size": 8,
    "training.sft.warmup_steps": 1,
    "training.grpo.steps": 2,
    "training.grpo.prompts_per_step": 2,
    "training.grpo.group_size": 2,
    "training.grpo.max_new_tokens": 8,
    "training.grpo.warmup_steps": 1,
    "training.grpo.grad_accum": 1,
    "training.checkpoint.every": 1,
    "eval.n_samples": 2,
    "eval.k": 1,
    "eval.max_new_tokens": 8,
    "eval.max_prompts": 6,
}

TRANSIENT_ERRORS = ("BrokenProcessPool", "BrokenExecutor", "ConnectionError", "ConnectionResetError",
                    "TimeoutError", "TransientError", "KilledWorker", "CommClosedError")


def with_overrides(spec: DomainSpec, overrides: dict[str, Any]) -> DomainSpec:
    """A copy of the spec with dotted-path overrides applied and re-validated."""
    data = spec.model_dump(mode="json")
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    origin = str(spec.path) if spec.path else "<spec>"
    new = spec_from_dict(data, spec.base_dir, origin=f"{origin} (with overrides {sorted(overrides)})")
    new._path = spec.path
    return new


LIBRARY_LOGGER = "rlvrflow"


def route_library_logs(level: int = logging.INFO) -> None:
    """Let the libraries' lines (rlvrflow.training, rlvrflow.curriculum, ...) reach the run's logs.

    Prefect forwards the loggers named in PREFECT_LOGGING_EXTRA_LOGGERS (`rlvrflow`: set by
    `rlvrflow run` and by prefect.yaml's job env) to the API; this sets what level they send.
    """
    lib = logging.getLogger(LIBRARY_LOGGER)
    if lib.level == logging.NOTSET or lib.level > level:
        lib.setLevel(level)


def load_run_spec(spec_path: str | Path, smoke: bool = False, runner: str | None = None,
                  overrides: dict[str, Any] | None = None) -> DomainSpec:
    """The spec a run uses: the file, then the smoke budget, a task-runner override and the caller's
    dotted-path overrides (e.g. {"training.grpo.steps": 20}), in that order. Every flow starts here,
    so this is also where the libraries' log lines are routed to the run's logs."""
    route_library_logs()
    spec = load_spec(spec_path)
    changes: dict[str, Any] = dict(SMOKE_OVERRIDES) if smoke else {}
    if runner:
        changes["orchestration.runner"] = runner
    changes.update(overrides or {})
    return with_overrides(spec, changes) if changes else spec


def make_task_runner(spec: DomainSpec):
    """The Prefect task runner for the fan-out stages, from `orchestration.runner`."""
    cfg = spec.orchestration
    if cfg.runner == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=cfg.workers)
    if cfg.runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise RuntimeError("orchestration.runner: dask needs prefect-dask; "
                               "pip install 'prefect-dask>=0.3.7' 'dask[distributed]'") from None
        if cfg.address:
            return DaskTaskRunner(address=cfg.address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    raise ValueError(f"orchestration.runner {cfg.runner!r} is not threads or dask")


def is_transient(exc: BaseException | None) -> bool:
    """A failure worth retrying: a crashed worker process or a dropped connection, not bad data."""
    seen = 0
    while exc is not None and seen < 5:
        if type(exc).__name__ in TRANSIENT_ERRORS:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def retry_if_transient(task, task_run, state) -> bool:
    """Prefect `retry_condition_fn`: retry only transient failures; data errors fail at once."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception as err:  # the result itself may be what failed to load
            exc = err
    return is_transient(exc if isinstance(exc, BaseException) else None)


def task_options(spec: DomainSpec) -> dict[str, Any]:
    """Retry settings for the tasks of a run, from `orchestration`."""
    return {"retries": spec.orchestration.retries,
            "retry_delay_seconds": spec.orchestration.retry_delay_seconds,
            "retry_condition_fn": retry_if_transient}


def cache_note(manifest) -> str:
    """For the logs: 'cached', or 'computed: <why>' (see flows.cache.explain_miss)."""
    return "cached" if manifest.cached else f"computed: {manifest.reason or 'no cached build'}"


def guarded(stage: str, spec: DomainSpec, fn: Callable[[], Any],
            on_error: Callable[[BaseException], None] | None = None) -> Any:
    """Run one stage; a failure becomes StageFailed naming the stage, the domain and the spec."""
    try:
        return fn()
    except Exception as exc:
        if on_error is not None:
            on_error(exc)
        raise stage_failed(stage, spec, exc) from exc


def stage_failed(stage: str, spec: DomainSpec, exc: BaseException) -> RuntimeError:
    """The error a failed stage raises: what failed, for which domain and spec, and the cause."""
    from flows.data_stages import StageFailed

    where = spec.path or spec.base_dir
    return StageFailed(f"stage '{stage}' failed (domain {spec.domain}, spec {where}): "
                       f"{type(exc).__name__}: {exc}")
