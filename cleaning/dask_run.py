"""The streaming prepare on a Dask cluster: files, hash shards and chunks fan out over the workers.

    from rlvrflow.cleaning.dask_run import prepare_on_dask, local_cluster
    result = prepare_on_dask("tcp://scheduler:8786", sources, cleaning, validation, domain, base_dir, out)
    with local_cluster(workers=2) as client:                       # or a cluster on this machine
        result = prepare_on_dask(client, sources, cleaning, validation, domain, base_dir, out)

The tasks are stream.py's (scan_file per file, exact_shard and pairs_shard per hash shard,
resolve_near once, finish_chunk per chunk), unchanged: only who runs them differs, so the outputs
are the same files with the same rows as a local run (tests/cleaning/test_dask_run.py). Exact and
near dedup shuffle by hash through the shard folders: every worker writes its chunks' entries into
`<shard>/` folders, and one task per shard reads that shard alone. Workers therefore need the
input files and `out_dir` at the same paths (one machine, or a shared filesystem on a real cluster).
The ordering steps (unique ids on running counts, writing the final files) run in the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .config import CleaningConfig, SourceSpec, ValidationConfig
from .stream import StoredResult, prepare_stream

__all__ = ["prepare_on_dask", "DaskRun", "local_cluster"]


class DaskRun:
    """Runs each pass's tasks on the client's cluster and waits for all of them, results in order."""

    local = False

    def __init__(self, client: Any, progress: bool = False) -> None:
        self.client, self.progress = client, progress

    def __call__(self, fn: Callable[..., Any], items: list[tuple], desc: str) -> list[Any]:
        from distributed import as_completed

        from .chunks import bar

        if not items:
            return []
        futures = self.client.map(fn, *zip(*items), pure=False)
        with bar(self.progress, total=len(futures), desc=desc, unit="task", leave=False) as shown:
            for _ in as_completed(futures):
                shown.update(1)
        return self.client.gather(futures)


def _client(cluster: Any) -> Any:
    from distributed import Client

    if isinstance(cluster, Client):
        return cluster
    if isinstance(cluster, str) and cluster:
        return Client(cluster)
    raise ValueError(
        f"cluster must be a distributed.Client or a scheduler address such as 'tcp://10.0.0.5:8786', got {cluster!r}"
    )


def prepare_on_dask(
    cluster: Any,
    sources: Sequence[SourceSpec],
    cleaning: CleaningConfig,
    validation: ValidationConfig,
    domain: str,
    base_dir: str | Path,
    out_dir: str | Path,
    progress: bool = False,
) -> StoredResult:
    """cleaning.prepare with its tasks on Dask. `cluster`: a distributed.Client, or a scheduler
    address (a client is opened on it and closed after). Same outputs as cleaning.prepare."""
    client = _client(cluster)
    try:
        return prepare_stream(
            sources,
            cleaning,
            validation,
            domain,
            Path(base_dir).resolve(),
            Path(out_dir).resolve(),
            progress,
            DaskRun(client, progress),
        )
    finally:
        if client is not cluster:
            client.close()


@contextmanager
def local_cluster(workers: int = 2, threads_per_worker: int = 1) -> Iterator[Any]:
    """A client on a Dask cluster of `workers` processes on this machine, closed on exit."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=threads_per_worker, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
