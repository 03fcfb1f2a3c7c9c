"""What every flow shares: loading the spec for a run (smoke budget, overrides) and the task runner.

Prefect is imported lazily inside functions here; the flow modules import it at the top (they are
the Prefect layer) but keep torch, polars and Great Expectations inside tasks. Retries live with the
tasks (flows/tasks.py), failure kinds in flows/errors.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rlvrflow.flows.spec import DomainSpec, SpecError, load_spec, spec_data, spec_from_dict

# A budget that runs the whole chain in about a minute on two CPU cores: a handful of rows,
# a few optimizer steps, tiny groups. `retrain(smoke=True)` and `rlvrflow run --smoke` apply it.
SMOKE_OVERRIDES: dict[str, Any] = {
    "orchestration.max_rows": 24,
    "orchestration.chunk_rows": 64,
    "curriculum.n_samples": 2,
    "curriculum.k": 1,
    "generation.max_new_tokens": 8,
    "training.torch_threads": 1,  # on a busy 2-core box, 2 spinning torch threads made SFT 40x slower
    "training.sft.max_steps": 4,
    "training.sft.batch_size": 8,
    "training.sft.warmup_steps": 1,
    "training.grpo.max_steps": 2,
    "training.grpo.prompts_per_step": 2,
    "training.grpo.num_generations": 2,
    "training.grpo.warmup_steps": 1,
    "training.grpo.gradient_accumulation_steps": 1,
    "training.dpo.max_steps": 2,
    "training.dpo.batch_size": 4,
    "training.dpo.warmup_steps": 1,
    "training.checkpoint.every": 1,
    "eval.n_samples": 2,
    "eval.k": 1,
    "eval.max_prompts": 6,
}


def with_overrides(spec: DomainSpec, overrides: dict[str, Any]) -> DomainSpec:
    """A copy of the spec with dotted-path overrides applied and re-validated."""
    data = spec_data(spec)  # generation.* stays live: --set generation.max_new_tokens=N reaches its sections
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        if not leaf or not all(parents):
            raise SpecError(f"override {dotted!r}: a field is a dotted path of names, e.g. training.grpo.max_steps")
        for depth, name in enumerate(parents):
            if node.get(name) is None:  # an unset section (`lora: null`) is created by its first field
                node[name] = {}
            node = node[name]
            if not isinstance(node, dict):
                path = ".".join(parents[: depth + 1])
                raise SpecError(
                    f"override {dotted!r}: {path} is a value ({node!r}), not a section; "
                    f"set it directly, e.g. --set {path}=..."
                )
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


def load_run_spec(
    spec_path: str | Path, smoke: bool = False, runner: str | None = None, overrides: dict[str, Any] | None = None
) -> DomainSpec:
    """The spec a run uses: the file, then the smoke budget, a task-runner override and the caller's
    dotted-path overrides (e.g. {"training.grpo.max_steps": 20}), in that order. Every flow starts here,
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

        return ThreadPoolTaskRunner(max_workers=cfg.task_workers)
    if cfg.runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise RuntimeError(
                "orchestration.runner: dask needs prefect-dask; pip install 'prefect-dask>=0.3.7' 'dask[distributed]'"
            ) from None
        if cfg.address:
            return DaskTaskRunner(address=cfg.address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": cfg.task_workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    raise ValueError(f"orchestration.runner {cfg.runner!r} is not threads or dask")
