"""Process helpers for sandboxes and the verifier pool: reaping, waiting, killing. Standard library only.

Nothing here knows a verifier or how a sandbox is built. `become_subreaper` makes this process the
parent of its descendants' orphans (bwrap's PID-namespace init once the outer bwrap exits, the
sandboxes of a killed pool worker), `reap_sandbox_orphans` reaps the ones that were sandbox
processes, `wait_namespace_gone` waits for a sandbox's whole PID namespace to die, and
`wait_exit`/`kill_group` time and end a one-shot program. Used by sandbox.py (one-shot runs),
warm.py (warm sandboxes) and verifiers/pool.py (its workers).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from functools import lru_cache
from pathlib import Path

NOBODY = 65534  # the uid sandboxed programs run as when this process is root


def wait_exit(proc: subprocess.Popen, timeout_s: float) -> bool:
    """True if the process exited within timeout_s. A pidfd wakes us the moment it exits
    (Popen.wait(timeout) polls with sleeps of up to 50 ms, which would dominate short programs)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)
    if ready:
        proc.wait()
    return bool(ready)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@lru_cache(maxsize=1)
def become_subreaper() -> None:
    """Orphans of our sandboxes (bwrap's PID-namespace init once the outer bwrap exits) are
    reparented to this process instead of PID 1, so we can reap them; a container whose PID 1
    never reaps would otherwise pile up zombies that count against RLIMIT_NPROC."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_sandbox_orphans() -> int:
    """Reap zombie children of this (subreaper) process that were sandbox processes: bwrap, or
    anything that lived in a nested PID namespace, or ran as nobody. Other children are left to
    whoever waits for them. Returns how many were reaped."""
    me, n = str(os.getpid()), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if status.get("PPid", "").strip() != me or not status.get("State", "").strip().startswith("Z"):
            continue
        sandboxed = (
            status.get("Name", "").strip() == "bwrap"
            or len(status.get("NSpid", "").split()) > 1
            or status.get("Uid", "").split()[:1] == [str(NOBODY)]
        )
        if sandboxed:
            try:
                n += os.waitpid(int(entry), os.WNOHANG)[0] != 0
            except ChildProcessError:
                pass
    return n


def wait_namespace_gone(info: bytes, limit_s: float = 10.0) -> None:
    """Reap the sandbox's PID-namespace init. The kernel lets it exit only after every process in
    the namespace died, so a fork bomb cannot outlive its verdict."""
    try:
        pid = int(json.loads(info.decode() or "{}").get("child-pid", 0))
    except (ValueError, AttributeError):
        return
    deadline = time.monotonic() + limit_s
    while pid and time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (no subreaper support): just wait for it to go
            if not Path(f"/proc/{pid}").exists() or zombie(pid):
                return
            done = 0
        if done:
            return
        time.sleep(0.001)


def zombie(pid: int, unreadable: bool = True) -> bool:
    """Whether `pid` has exited and its parent has not reaped it yet (it still answers kill(pid, 0)),
    read from /proc/PID/stat; `unreadable` when that cannot be read: the process is gone, or there is
    no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return unreadable
