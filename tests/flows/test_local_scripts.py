"""scripts/mlflow_local.sh and scripts/prefect_local.sh: a server that exited but was not reaped yet (a
zombie) counts as stopped. The verifier pool makes the Python process that starts these scripts a child
subreaper, so a server the script put in the background is reparented to it when the script exits, and
is left a zombie once stopped; `kill -0` still answers for it, and `stop` used to wait its 30 s and
send SIGKILL to a process that was already gone (the MLflow tests' teardown took 30 s each)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def zombie():
    """The pid of a child of this process that has exited and is not reaped until the test ends."""
    child = subprocess.Popen(["true"])
    status = Path(f"/proc/{child.pid}/status")
    for _ in range(200):
        if "\nState:\tZ" in status.read_text():
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"child {child.pid} never became a zombie")
    os.kill(child.pid, 0)  # kill -0 still answers: what the scripts used to take for a live server
    try:
        yield child.pid
    finally:
        child.wait()


def test_mlflow_local_takes_a_zombie_server_for_stopped(zombie, tmp_path):
    env = {**os.environ, "MLFLOW_HOME": str(tmp_path), "MLFLOW_PYTHON": sys.executable}
    (tmp_path / "server.pid").write_text(f"{zombie}\n")
    (tmp_path / "uri").write_text("http://127.0.0.1:1\n")
    script = REPO / "scripts" / "mlflow_local.sh"
    status = subprocess.run(["bash", script, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert status.stdout.strip() == "not running", status.stdout + status.stderr
    stop = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0 and stop.stdout.strip() == "mlflow_local: not running", stop.stdout + stop.stderr
    assert not (tmp_path / "server.pid").exists()


def test_prefect_local_takes_a_zombie_worker_for_stopped(zombie, tmp_path):
    if not (REPO / ".venv" / "bin" / "prefect").exists():
        pytest.fail("scripts/prefect_local.sh needs .venv/bin/prefect: run `make setup`")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path)}
    (tmp_path / "worker.pid").write_text(f"{zombie}\n")
    script = REPO / "scripts" / "prefect_local.sh"
    stop = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=60)
    # a live worker would be signalled and reported as "worker stopped (pid N)"; a zombie is already gone
    assert stop.returncode == 0 and "stopped" not in stop.stdout, stop.stdout + stop.stderr
    assert not (tmp_path / "worker.pid").exists()
