"""training.distributed's collectives on 2 real gloo processes (torchrun, no DeepSpeed needed).

Checks what single-process tests cannot: rank 0's batch reaches every rank, token counts sum over
ranks, and ranks that disagree on a row count get an error naming the fix instead of a hang.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rlvrflow.training.distributed import (
    all_reduce_sum,
    broadcast_from_main,
    check_same_on_all_ranks,
    dp_loss_denominator,
    leave_process_group,
)

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_collectives_on_two_gloo_ranks(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        str(Path(__file__).with_name("gloo_worker.py")),
        str(tmp_path),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r in results:
        assert r["groups"] == ["rollouts of rank 0"]
        assert r["tokens"] == 30.0
        assert r["denom"] == 15.0
        assert r["same"] == 8
        assert "ranks disagree on rows: [8, 9]" in r["mismatch"] and "broadcast_from_main" in r["mismatch"]
    for r in range(2):  # each rank tore its group down before exiting (an exit with it up can abort)
        assert json.loads((tmp_path / f"rank{r}.left.json").read_text()) == {"initialized": False}


def test_collectives_are_identities_in_one_process():
    assert broadcast_from_main({"a": 1}) == {"a": 1}
    assert all_reduce_sum(3.5) == 3.5
    assert check_same_on_all_ranks(4, "rows") == 4
    with pytest.raises(ValueError, match="no real completion tokens"):
        dp_loss_denominator(0.0, 1)
    leave_process_group()  # no group: nothing to tear down, no error
