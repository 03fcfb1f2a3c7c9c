"""Warm bwrap sandboxes: one long-lived sandbox per concurrent caller, running zygote.py as PID 1.

`run_warm` takes an idle sandbox with the same view (interpreter and packages) or starts one,
sends the job, feeds the tests and the solution through their own pipes, and waits for the
reply with a margin over the program's timeout; a sandbox that misses it, dies or garbles the
protocol is killed (its whole PID namespace with it) and replaced. What the sandbox mounts is
mounts.py's list plus a fresh /dev, its own /proc and a private /tmp; our code reaches it as a
message, not a file. Sandboxes are recycled after MAX_JOBS programs, or at once when the zygote
could not clean up after one.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path

from .mounts import PACKAGES_DIR, Runtime, view_args
from .processes import become_subreaper, reap_sandbox_orphans, wait_namespace_gone

HERE = Path(__file__).parent
MAX_JOBS = 500
REPLY_MARGIN_S = 10.0
FEED_TIMEOUT_S = 10.0
MODULES = ("harness", "remote", "zygote")  # in import order
# One thread per BLAS call: threads count against RLIMIT_NPROC and each reserves address space.
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
BOOT = """\
import json, socket, sys, types
ctl = socket.socket(fileno=int(sys.argv[1]))
boot = json.loads(ctl.recv(1 << 20))
sys.path[:0] = boot["path"]
for name, source in boot["modules"]:
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source, name + ".py", "exec"), module.__dict__)
sys.modules["zygote"].main(ctl)
"""

_IDLE: dict[tuple, list["WarmSandbox"]] = {}
_LOCK = threading.Lock()
_ATEXIT = []


class WarmSandbox:
    def __init__(self, bwrap: str, runtime: Runtime, packages: tuple[tuple[str, str], ...], preexec) -> None:
        become_subreaper()
        if not _ATEXIT:  # kill and reap our sandboxes before exiting, or they linger as zombies
            atexit.register(close_all)
            _ATEXIT.append(True)
        self._ctl, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        info_r, info_w = os.pipe()
        env = [a for name in THREAD_ENV for a in ("--setenv", name, "1")]
        cmd = [
            bwrap,
            *view_args(runtime, packages),
            "--dev",
            "/dev",
            "--remount-ro",
            "/dev",
            "--proc",
            "/proc",
            *_tmpfs_size(bwrap),
            "--tmpfs",
            "/tmp",
            "--remount-ro",
            "/",
            "--unshare-all",
            "--as-pid-1",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--info-fd",
            str(info_w),
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "HOME",
            "/tmp",
            *env,
            "--chdir",
            "/tmp",
            runtime.python,
            "-I",
            "-S",
            "-c",
            BOOT,
            str(inside.fileno()),
        ]
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._stderr,
            stderr=self._stderr,
            pass_fds=(inside.fileno(), info_w),
            start_new_session=True,
            preexec_fn=preexec,
        )
        inside.close()
        os.close(info_w)
        self._info_r = info_r
        self.jobs = 0
        boot = {
            "path": [PACKAGES_DIR] if packages else [],
            "modules": [(name, (HERE / f"{name}.py").read_text()) for name in MODULES],
        }
        try:
            self._ctl.send(json.dumps(boot).encode())
        except OSError:
            pass  # the sandbox did not start; the first run() reports why

    def run(self, job: dict, nonce: str, solution: str, tests: str) -> dict:
        """The zygote's reply plus the program's output, or {"error": why} when the sandbox failed
        (it is then closed). Only the tests process ever reads the nonce and the tests."""
        reply = None
        tests_r, tests_w = os.pipe()
        solution_r, solution_w = os.pipe()
        with tempfile.TemporaryFile() as out:
            try:
                socket.send_fds(self._ctl, [json.dumps(job).encode()], [tests_r, solution_r, out.fileno()])
                sent = True
            except OSError:
                sent = False
            for fd in (tests_r, solution_r):
                os.close(fd)
            deadline = time.monotonic() + FEED_TIMEOUT_S
            fed = [
                _feed(tests_w, f"{nonce}\n{tests}".encode() if sent else b"", deadline),
                _feed(solution_w, solution.encode() if sent else b"", deadline),
            ]
            if sent and all(fed):
                reply = self._message(job["timeout"] + REPLY_MARGIN_S)
            if isinstance(reply, dict) and "report" in reply:
                reply["output"] = os.pread(out.fileno(), job["output_bytes"], 0).decode("utf-8", "replace")
            elif not (isinstance(reply, dict) and "error" in reply):
                reply = None
        self.jobs += 1
        if isinstance(reply, dict) and reply.pop("recycle", False):
            self.jobs = MAX_JOBS  # something of this program is left inside: replace the sandbox
        if reply is None:
            reply = {"error": self._failure()}
        if "error" in reply:
            self.close()
        return reply

    def _message(self, timeout: float):
        try:
            ready, _, _ = select.select([self._ctl], [], [], timeout)
            return json.loads(self._ctl.recv(1 << 20)) if ready else None
        except (OSError, ValueError):
            return None

    def _failure(self) -> str:
        self._stderr.seek(0)
        err = self._stderr.read()[-600:].decode("utf-8", "replace").strip()
        hint = ""
        if "uid map" in err or "Operation not permitted" in err or "Permission denied" in err:
            hint = (
                " (bwrap needs unprivileged user namespaces: on Ubuntu 24.04 run "
                "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`)"
            )
        return f"the sandbox did not answer; bwrap said: {err or 'nothing'}{hint}"

    def healthy(self) -> bool:
        return self.proc.poll() is None and self.jobs < MAX_JOBS

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        os.set_blocking(self._info_r, False)
        try:
            info = os.read(self._info_r, 4096)
        except BlockingIOError:
            info = b""
        wait_namespace_gone(info)
        for closer in (self._ctl.close, lambda: os.close(self._info_r), self._stderr.close):
            try:
                closer()
            except OSError:
                pass


def _feed(fd: int, data: bytes, deadline: float) -> bool:
    """Write data into a pipe and close it; False when the reader did not take it by the deadline.
    A reader that is gone (its process died) is no sandbox failure: the reply says what happened."""
    try:
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return False
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
        return True
    except BrokenPipeError:
        return True
    finally:
        os.close(fd)


TMPFS_BYTES = 64 << 20  # the program's whole writable space (files are also capped by RLIMIT_FSIZE)


@lru_cache(maxsize=4)
def _tmpfs_size(bwrap: str) -> tuple[str, ...]:
    """`--size` caps the private /tmp (tmpfs lives in RAM); bwrap older than 0.7 lacks it."""
    try:
        usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        usage = ""
    return ("--size", str(TMPFS_BYTES)) if "--size" in usage else ()


def run_warm(
    job: dict,
    nonce: str,
    solution: str,
    tests: str,
    bwrap: str,
    runtime: Runtime,
    packages: tuple[tuple[str, str], ...],
    preexec,
) -> dict:
    key = (bwrap, runtime, packages)
    with _LOCK:
        idle = _IDLE.get(key)
        box = idle.pop() if idle else None
    if box is None or not box.healthy():
        if box is not None:
            box.close()
        box = WarmSandbox(bwrap, runtime, packages, preexec)
    reply = box.run(job, nonce, solution, tests)
    if "error" in reply:
        return reply
    if box.healthy():
        with _LOCK:
            _IDLE.setdefault(key, []).append(box)
    else:
        box.close()
    return reply


def close_all() -> None:
    with _LOCK:
        boxes = [box for idle in _IDLE.values() for box in idle]
        _IDLE.clear()
    for box in boxes:
        box.close()
    reap_sandbox_orphans()
