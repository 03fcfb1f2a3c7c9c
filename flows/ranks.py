"""Several ranks under one launcher: rank 0 runs the pipeline, the other ranks train with it.

    torchrun --nproc_per_node 4 -m rlvrflow.flows.cli run SPEC --out OUT
    deepspeed --num_gpus 4 --module rlvrflow.flows.cli run SPEC --out OUT --set training.grpo.backend=deepspeed

Rank 0 runs `rlvrflow run` exactly as one process does (the Prefect flow, the data stages, SFT,
tiering, eval, the report) and is the only rank that reads or writes the stage cache. The other ranks
start no flow: `follow()` waits until rank 0 reaches a stage the table marks `all_ranks` (GRPO), then
runs that stage's library call with rank 0's job (the same input files and output folder), so every
rank enters `train_grpo` together and the backend's collectives pair up. When rank 0's run ends (done,
failed, or with that stage found in the cache) it says so and the other ranks exit.

The handshake travels over its own gloo group with a long timeout: the other ranks may wait hours
while rank 0 cleans, trains SFT and tiers, far longer than a training collective may take
(`training.grpo.dist_timeout_minutes` bounds those, on the launcher's default group: NCCL on GPUs).
Left out: several nodes sharing one stage cache (rank 0's folders must be readable by every rank,
which one machine, or a shared filesystem, gives).
"""

from __future__ import annotations

import logging
import sys
from datetime import timedelta
from typing import Any, Callable

log = logging.getLogger("rlvrflow.ranks")

HANDSHAKE_TIMEOUT = timedelta(days=7)  # the other ranks wait through rank 0's data stages, SFT and tiering
_group: Any = None  # the handshake's process group, once joined


def world() -> tuple[int, int]:
    """(rank, world size) from the launcher's environment; (0, 1) for a plain process."""
    from rlvrflow.training.distributed import dist_env

    env = dist_env()
    return env.rank, env.world_size


def join(spec) -> None:
    """Every rank, first thing: join the launcher's process group (NCCL when training on CUDA, else gloo)
    and open the handshake group."""
    global _group
    import torch.distributed as dist

    from rlvrflow.training.distributed import bind_local_device, init_process_group
    from rlvrflow.training.modeling import pick_device

    device = bind_local_device(pick_device(spec.training.device))
    init_process_group(device, spec.training.grpo.dist_timeout_minutes)
    _group = dist.new_group(backend="gloo", timeout=HANDSHAKE_TIMEOUT)


def _send(message: tuple) -> None:
    import torch.distributed as dist

    dist.broadcast_object_list([message], src=0, group=_group)


def active() -> bool:
    """Whether this process is rank 0 of a multi-rank launch that joined the handshake."""
    return _group is not None


def abort(stage: str, exc: BaseException) -> None:
    """Rank 0, when an all-ranks stage fails: the other ranks are blocked in its collectives and would
    wait `dist_timeout_minutes` for a partner that never comes, so print the error and end this
    process at once with the failure's exit code; the launcher then stops the other ranks."""
    import atexit
    import os
    import traceback

    from rlvrflow.flows.errors import exit_code

    text = "".join(traceback.format_exception(exc)) + (
        f"rank 0: stage {stage} failed on a multi-rank launch ({type(exc).__name__}: {exc}); "
        "ending the launch so the other ranks do not wait out their collective timeout\n"
    )
    os.write(2, text.encode("utf-8", "replace"))  # the real stderr: a flow may have replaced sys.stderr
    sys.stdout.flush()
    code = exit_code(exc)
    try:  # what a normal exit would run first: Prefect stops its ephemeral API server, for one
        atexit._run_exitfuncs()
    finally:
        os._exit(code)  # not sys.exit: it would wait on this rank's collectives and threads


def publish(stage: str, call: Callable[[Any], Any], job: Any) -> None:
    """Rank 0, just before running an all-ranks stage itself: hand the other ranks the same call and job."""
    if _group is not None:
        log.info("ranks: starting %s on all ranks", stage)
        _send(("run", stage, call, job))


def close(ok: bool) -> None:
    """Rank 0, when its run ends: release the other ranks (they exit; a failed run fails on rank 0)."""
    global _group
    if _group is not None:
        try:
            _send(("done", ok))
        except Exception as exc:  # a rank already gone: the run's own outcome still decides the exit code
            log.warning("ranks: could not release the other ranks (%s: %s)", type(exc).__name__, exc)
        _group = None


def leave() -> None:
    """Every rank of a multi-rank launch, last thing: tear down the process group it joined (see
    training.distributed.leave_process_group); a no-op in a one-process run."""
    from rlvrflow.training.distributed import leave_process_group

    leave_process_group()


def follow() -> int:
    """Every rank but 0: run the all-ranks stages rank 0 announces, until it says it is done."""
    import torch.distributed as dist

    while True:
        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0, group=_group)
        message = box[0]
        if message[0] == "done":
            return 0
        _, stage, call, job = message
        rank = dist.get_rank()
        print(f"rank {rank}: running {stage} with rank 0", file=sys.stderr, flush=True)
        call(job)  # what it returns is rank 0's to write; this rank writes no stage folder
