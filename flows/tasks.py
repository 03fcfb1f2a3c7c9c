"""The one Prefect task shape every flow uses: run a library call (or a chunk of one) as a task.

Stage functions (flows/data_stages.py, flows/model_stages.py) take a `steps` object with
`call(name, fn, kwargs)` and `map(name, fn, items)`. `LocalSteps` (in data_stages) runs them inline
for the CLI and tests; `PrefectSteps` here runs each as a named Prefect task on the flow's task
runner (threads or Dask), with retries of transient failures. Prefect's own result caching is
off: the stage cache keys on content hashes and passes paths, never pickled frames.
"""
from __future__ import annotations

from typing import Any, Callable

from prefect import task
from prefect.cache_policies import NO_CACHE

from flows.common import task_options
from flows.spec import DomainSpec


@task(cache_policy=NO_CACHE, persist_result=False)
def call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run `fn(**kwargs)`: one library call with plain arguments (paths, JSON, numbers)."""
    return fn(**kwargs)


class PrefectSteps:
    """Runs stage steps as Prefect tasks in the current flow run."""

    def __init__(self, spec: DomainSpec):
        self._options = task_options(spec)

    def _task(self, name: str):
        return call.with_options(name=name.rsplit("-", 1)[0] if name[-1].isdigit() else name,
                                 task_run_name=name, **self._options)

    def call(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        return self._task(name)(fn, kwargs)

    def map(self, name: str, fn: Callable[..., Any], items: list[dict[str, Any]]) -> list[Any]:
        futures = [self._task(f"{name}-{i:05d}").submit(fn, kw) for i, kw in enumerate(items)]
        return [f.result() for f in futures]
