"""Start a long-lived Python helper process that talks through two pipes.

Used by the warm pool and the sympy helper instead of multiprocessing's start methods: a fresh
`python -c` never re-imports the caller's `__main__` (no `if __name__ == "__main__"` guard needed),
does not inherit the caller's threads, and gets the caller's `sys.path` so user verifiers resolve.
The child asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from multiprocessing.connection import Connection

_BOOT = (
    "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
    "from rlvrflow.verifiers._proc import child_boot; child_boot(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))"
)


class Child:
    """A helper process and its two connections (send to `tx`, receive from `rx`)."""

    def __init__(self, target: str) -> None:
        import json

        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        path = [p for p in sys.path if p] + [os.getcwd()]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, json.dumps(path), target, str(to_child_r), str(from_child_w)],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.tx = Connection(to_child_w, readable=False)
        self.rx = Connection(from_child_r, writable=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.tx.close()
        self.rx.close()


def die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_boot(target: str, rfd: int, wfd: int) -> None:
    die_with_parent()
    module, _, func = target.partition(":")
    import importlib

    fn = getattr(importlib.import_module(module), func)
    fn(Connection(rfd, writable=False), Connection(wfd, readable=False))
