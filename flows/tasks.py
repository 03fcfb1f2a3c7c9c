"""The Prefect side of the runner: library calls as Prefect tasks, and one stage inside a flow.

`PrefectSteps` gives flows/runner.py its `call`/`map` as named Prefect tasks on the flow's task
runner (threads, or Dask from `orchestration.runner`), each retried `orchestration.retries` times
when the failure is transient (flows/errors.py decides, by type). Prefect's own result caching is
off: the stage cache keys on content hashes and tasks pass paths, never pickled frames.
`run_in_flow` runs one stage of the table from a flow: a progress artifact per stage, the counts
line in the terminal and in the run's logs, and the manifest back as a dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from rlvrflow.flows import artifacts, stages
from rlvrflow.flows.cache import Manifest
from rlvrflow.flows.errors import is_transient
from rlvrflow.flows.runner import print_line
from rlvrflow.flows.spec import DomainSpec


def retry_if_transient(task, task_run, state) -> bool:
    """Prefect `retry_condition_fn`: retry only transient failures; data errors and bugs fail at once."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception as err:  # the result itself may be what failed to load
            exc = err
    return is_transient(exc if isinstance(exc, BaseException) else None)


def task_options(spec: DomainSpec) -> dict[str, Any]:
    """Retry settings for the tasks of a run, from `orchestration`."""
    return {
        "retries": spec.orchestration.retries,
        "retry_delay_seconds": spec.orchestration.retry_delay_seconds,
        "retry_condition_fn": retry_if_transient,
    }


@task(cache_policy=NO_CACHE, persist_result=False)
def call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run `fn(**kwargs)`: one library call with plain arguments (paths, JSON, numbers)."""
    return fn(**kwargs)


class PrefectSteps:
    """Runs stage steps as Prefect tasks in the current flow run."""

    def __init__(self, spec: DomainSpec):
        self._options = task_options(spec)

    def _task(self, name: str):
        return call.with_options(
            name=name.rsplit("-", 1)[0] if name[-1].isdigit() else name, task_run_name=name, **self._options
        )

    def call(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return self._task(name)(fn, kwargs)

    def map(
        self, name: str, fn: Callable[..., Any], items: list[dict[str, Any]], done: Callable[[int], None] | None = None
    ) -> list[Any]:
        futures = [self._task(f"{name}-{i:05d}").submit(fn, kw) for i, kw in enumerate(items)]
        out = []
        for f in futures:
            out.append(f.result())
            if done:
                done(len(out))
        return out


def run_in_flow(name: str, spec: DomainSpec, out: str | Path, upstream: dict[str, dict], force: bool) -> Manifest:
    """One stage of the table as this flow's tasks, with a `<domain>-<stage>-progress` artifact and
    its counts line printed (the terminal) and logged (the UI)."""
    logger = get_run_logger()

    def echo(line: str) -> None:
        print_line(line)
        logger.info(line.strip())

    progress = artifacts.Progress(artifacts.artifact_key(spec.domain, f"{name}-progress"), f"{name}: share done")
    return stages.run(
        name,
        spec,
        Path(out),
        {k: Manifest.from_dict(v) for k, v in upstream.items()},
        PrefectSteps(spec),
        force,
        echo=echo,
        progress=progress,
    )
