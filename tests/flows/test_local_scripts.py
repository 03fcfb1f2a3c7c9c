"""scripts/mlflow_local.sh and scripts/prefect_local.sh: a server that exited but was not reaped yet (a
zombie) counts as stopped. The verifier pool makes the Python process that starts these scripts a child
subreaper, so a server the script put in the background is reparented to it when the script exits, and
is left a zombie once stopped; `kill -0` still answers for it, and `stop` used to wait its 30 s and
send SIGKILL to a process that was already gone (the MLflow tests' teardown took 30 s each). A live
member of the server's process group still counts as running, so `stop` still signals the group."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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


def test_mlflow_local_stops_a_live_child_whose_group_leader_is_a_zombie(tmp_path, await_zombie):
    """The leader (the pid file's process) exited unreaped, a process it started in its group runs on."""
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 300 & echo $!; exit 0"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    child = int(leader.stdout.readline())
    try:
        await_zombie(leader.pid)
        assert os.getpgid(child) == leader.pid
        env = {**os.environ, "MLFLOW_HOME": str(tmp_path), "MLFLOW_PYTHON": sys.executable}
        (tmp_path / "server.pid").write_text(f"{leader.pid}\n")
        script = REPO / "scripts" / "mlflow_local.sh"
        stop = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=60)
        assert stop.stdout.strip() == f"mlflow_local: stopped (pid {leader.pid})", stop.stdout + stop.stderr
        status = Path(f"/proc/{child}/status")
        assert not status.exists() or "\nState:\tZ" in status.read_text()  # the sleep got the group's SIGTERM
    finally:
        try:
            os.kill(child, 9)
            os.waitpid(child, os.WNOHANG)  # reparented to this process when it is a child subreaper
        except (ProcessLookupError, ChildProcessError):
            pass
        leader.wait()
