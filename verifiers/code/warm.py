"""Warm bwrap sandboxes: one long-lived sandbox per concurrent caller, running zygote.py as PID 1.

`run_warm` takes an idle sandbox (or starts one), sends the job, and waits for the reply with a
margin over the program's timeout; a sandbox that misses it, dies or garbles the protocol is
killed (its whole PID namespace with it) and replaced. Sandboxes are started with the same
isolation as sandbox.py describes and are recycled after MAX_JOBS programs.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).parent
MAX_JOBS = 500
REPLY_MARGIN_S = 10.0

_IDLE: list["WarmSandbox"] = []
_LOCK = threading.Lock()
_ATEXIT = []


class WarmSandbox:
    def __init__(self, bwrap: str, python: str, drop_root: bool, preexec) -> None:
        from .sandbox import become_subreaper

        become_subreaper()
        if not _ATEXIT:  # kill and reap our sandboxes before exiting, or they linger as zombies
            atexit.register(close_all)
            _ATEXIT.append(True)
        self.code_dir = tempfile.mkdtemp(prefix="rlvr-zygote-")
        os.chmod(self.code_dir, 0o755)
        for name in ("zygote.py", "harness.py", "remote.py"):
            shutil.copy(HERE / name, self.code_dir)
            os.chmod(Path(self.code_dir, name), 0o644)
        in_r, self._in_w = os.pipe()
        self._out_r, out_w = os.pipe()
        info_r, info_w = os.pipe()
        cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--remount-ro", "/dev", "--proc", "/proc",
               *_tmpfs_size(bwrap), "--tmpfs", "/tmp",
               "--ro-bind", self.code_dir, "/tmp/.zygote", "--unshare-all", "--as-pid-1", "--die-with-parent",
               "--new-session", "--cap-drop", "ALL", "--info-fd", str(info_w), "--clearenv",
               "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--chdir", "/tmp",
               python, "-I", "-S", "/tmp/.zygote/zygote.py", str(in_r), str(out_w)]
        self._stderr = Path(self.code_dir, "stderr.log")
        with open(self._stderr, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         pass_fds=(in_r, out_w, info_w), start_new_session=True,
                                         preexec_fn=preexec)
        for fd in (in_r, out_w, info_w):
            os.close(fd)
        self._info_r = info_r
        self._reader = os.fdopen(self._out_r, "rb")
        self.jobs = 0

    def run(self, job: dict, nonce: str) -> dict:
        """The zygote's reply, or {"error": why} when the sandbox failed (it is then closed).
        The nonce goes out only after the solution process was forked, so it never holds it."""
        try:
            os.write(self._in_w, (json.dumps(job) + "\n").encode())
            first = self._line(10.0)
            if first != {"ready": True}:
                reply = first if isinstance(first, dict) and "error" in first else None
            else:
                os.write(self._in_w, (nonce + "\n").encode())
                reply = self._line(job["timeout"] + REPLY_MARGIN_S)
        except (OSError, ValueError):
            reply = None
        self.jobs += 1
        if reply is None:
            reply = {"error": self._failure()}
            self.close()
        return reply

    def _failure(self) -> str:
        err = self._stderr.read_bytes()[-600:].decode("utf-8", "replace").strip() if self._stderr.exists() else ""
        hint = ""
        if "uid map" in err or "Operation not permitted" in err or "Permission denied" in err:
            hint = (" (bwrap needs unprivileged user namespaces: on Ubuntu 24.04 run "
                    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`)")
        return f"the sandbox did not answer; bwrap said: {err or 'nothing'}{hint}"

    def _line(self, timeout: float):
        ready, _, _ = select.select([self._out_r], [], [], timeout)
        line = self._reader.readline() if ready else b""
        if line.strip() == b"ready":
            return {"ready": True}
        return json.loads(line) if line else None

    def healthy(self) -> bool:
        return self.proc.poll() is None and self.jobs < MAX_JOBS

    def close(self) -> None:
        from .sandbox import _wait_namespace_gone

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
        _wait_namespace_gone(info)
        for closer in (self._reader.close, lambda: os.close(self._in_w), lambda: os.close(self._info_r)):
            try:
                closer()
            except OSError:
                pass
        shutil.rmtree(self.code_dir, ignore_errors=True)


TMPFS_BYTES = 64 << 20  # the program's whole writable space (files are also capped by RLIMIT_FSIZE)


@lru_cache(maxsize=4)
def _tmpfs_size(bwrap: str) -> tuple[str, ...]:
    """`--size` caps the private /tmp (tmpfs lives in RAM); bwrap older than 0.7 lacks it."""
    try:
        usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        usage = ""
    return ("--size", str(TMPFS_BYTES)) if "--size" in usage else ()


def run_warm(job: dict, nonce: str, bwrap: str, python: str, drop_root: bool, preexec) -> dict:
    with _LOCK:
        box = _IDLE.pop() if _IDLE else None
    if box is None or not box.healthy():
        if box is not None:
            box.close()
        box = WarmSandbox(bwrap, python, drop_root, preexec)
    reply = box.run(job, nonce)
    if "error" not in reply:
        with _LOCK:
            _IDLE.append(box)
    return reply


def close_all() -> None:
    from .sandbox import reap_sandbox_orphans

    with _LOCK:
        boxes = list(_IDLE)
        _IDLE.clear()
    for box in boxes:
        box.close()
    reap_sandbox_orphans()
