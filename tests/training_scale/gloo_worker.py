"""One rank of the 2-process gloo check of training.distributed's collectives (see test_collectives.py).

Launched by torchrun; writes what this rank saw to <argv[1]>/rank<N>.json.
"""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist

from rlvrflow.training.distributed import (
    all_reduce_sum,
    broadcast_from_main,
    check_same_on_all_ranks,
    dist_env,
    dp_loss_denominator,
    leave_process_group,
)


def main() -> None:
    env = dist_env()
    dist.init_process_group("gloo")
    try:
        result = {
            "groups": broadcast_from_main([f"rollouts of rank {env.rank}"]),
            "tokens": all_reduce_sum(10.0 * (env.rank + 1)),
            "denom": dp_loss_denominator(10.0 * (env.rank + 1), env.world_size),
            "same": check_same_on_all_ranks(8, "rows"),
        }
        try:
            check_same_on_all_ranks(8 + env.rank, "rows")
            result["mismatch"] = "no error"
        except RuntimeError as exc:
            result["mismatch"] = str(exc)
        with open(os.path.join(sys.argv[1], f"rank{env.rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        leave_process_group()
    with open(os.path.join(sys.argv[1], f"rank{env.rank}.left.json"), "w") as f:
        json.dump({"initialized": dist.is_initialized()}, f)


if __name__ == "__main__":
    main()
