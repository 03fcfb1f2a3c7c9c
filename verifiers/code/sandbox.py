"""Run the harness on untrusted code in a bubblewrap sandbox with rlimits and a wall clock.

Isolation (bwrap, see warm.py and zygote.py): the program sees only what mounts.py lists (the
Python runtime, read-only, without any site-packages; the system libraries; packages that the
verifier's params name), a private /tmp of 64 MiB (the working directory), a fresh read-only
/dev and its own /proc. Every namespace is unshared (no network, own PID namespace), a new
session, die-with-parent, all capabilities dropped. When this process is root it first drops
to uid/gid 65534 (nobody), because the kernel does not apply RLIMIT_NPROC to root. Limits
(setrlimit in the program's process): CPU seconds, address space, file size (this also caps
stdout/stderr, which go to a file), process count. At the wall-clock timeout every process of the
program is SIGKILLed. Output kept in the verdict is capped.

Without bwrap, `run_sandboxed` refuses unless the caller opted into mode "rlimits" (params
`sandbox: rlimits` or RLVRFLOW_SANDBOX=rlimits): same harness and limits, no namespaces and no
filesystem isolation at all (the program can read every file this user can).
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .mounts import PackageUnavailable, Runtime, package_mounts, probe_runtime
from .processes import NOBODY, become_subreaper, kill_group, wait_exit
from .warm import run_warm

HARNESS = Path(__file__).with_name("harness.py")


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run as asked: bwrap is missing (and rlimits-only mode was not chosen),
    no usable interpreter, or a package named in params cannot be exposed."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    memory_mb: int = 512
    file_mb: int = 1
    nproc: int = 32
    output_chars: int = 2000


@dataclass(frozen=True)
class RunResult:
    passed: int
    total: int
    reported: bool  # the harness wrote a valid nonce report
    timed_out: bool
    returncode: int | None
    output: str  # capped stdout + stderr, for the verdict detail


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@lru_cache(maxsize=2)
def sandbox_runtime(drop_root: bool) -> Runtime:
    """The interpreter the sandbox runs and its runtime: this process's base interpreter (never a
    virtual environment's), else the system's, whichever runs as the sandbox's user."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    for cand in (base, "/usr/bin/python3", "/usr/local/bin/python3"):
        runtime = probe_runtime(cand, _preexec(drop_root)) if os.path.exists(cand) else None
        if runtime is not None:
            return runtime
    who = "uid nobody" if drop_root else "this user"
    raise SandboxUnavailable(
        f"no Python interpreter that {who} can run ({base} and the system's "
        "were tried); make one world-readable or install /usr/bin/python3"
    )


def _package_mounts(packages: tuple[str, ...], runtime: Runtime) -> tuple[tuple[str, str], ...]:
    if not packages:
        return ()
    if runtime.version != tuple(sys.version_info[:2]):
        raise SandboxUnavailable(
            f"params.packages needs the sandbox's interpreter ({runtime.python}, Python "
            f"{'.'.join(map(str, runtime.version))}) to be this environment's Python "
            f"{sys.version_info[0]}.{sys.version_info[1]}, whose packages it would load"
        )
    try:
        return package_mounts(packages)
    except PackageUnavailable as exc:
        raise SandboxUnavailable(str(exc)) from None


def _process_count(uid: int) -> int:
    """Processes of `uid` right now. RLIMIT_NPROC counts them all (per user namespace on recent
    kernels, per user on older ones), so a program's limit is this plus its own budget: other
    sandboxes running as the same user then never starve it."""
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                n += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return n


def _preexec(drop_root: bool, limits: Limits | None = None, nproc_base: int = 0):
    """Runs in the child before exec: drop root to nobody, then (one-shot mode) set the rlimits."""

    def apply() -> None:
        if drop_root:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits is not None:
            for name, value in _rlimits(limits, nproc_base).items():
                resource.setrlimit(getattr(resource, name), (value, value))

    return apply


def _rlimits(limits: Limits, nproc_base: int) -> dict[str, int]:
    return {
        "RLIMIT_CPU": int(limits.timeout_s) + 1,
        "RLIMIT_AS": limits.memory_mb << 20,
        "RLIMIT_FSIZE": limits.file_mb << 20,
        "RLIMIT_NPROC": nproc_base + limits.nproc,
    }


def resolve_mode(requested: str | None) -> str:
    mode = requested or os.environ.get("RLVRFLOW_SANDBOX") or "bwrap"
    if mode not in ("bwrap", "rlimits"):
        raise SandboxUnavailable(f"sandbox mode {mode!r} is not 'bwrap' or 'rlimits'")
    if mode == "bwrap" and bwrap_path() is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so untrusted code cannot be sandboxed; install it "
            "(apt-get install bubblewrap) or opt into rlimits-only mode with params "
            '{"sandbox": "rlimits"} or RLVRFLOW_SANDBOX=rlimits (no filesystem or network isolation)'
        )
    return mode


def run_sandboxed(
    solution: str,
    tests: str,
    entry: str | None,
    partial: bool,
    limits: Limits,
    mode: str | None = None,
    packages: tuple[str, ...] = (),
) -> RunResult:
    """Run the harness on (solution, tests): in a warm bwrap sandbox, or one-shot with rlimits only."""
    mode = resolve_mode(mode)
    become_subreaper()
    drop_root = os.getuid() == 0
    runtime = sandbox_runtime(drop_root)
    mounts = _package_mounts(tuple(packages), runtime)
    nonce = secrets.token_hex(16)
    nproc_base = _process_count(NOBODY if drop_root else os.getuid())
    if mode == "rlimits":  # no isolation: the named packages' site-packages folders go on sys.path
        paths = tuple(sorted({os.path.dirname(source) for source, _ in mounts}))
        return _run_once(solution, tests, entry, partial, limits, runtime.python, drop_root, nproc_base, nonce, paths)
    lim = _rlimits(limits, nproc_base)
    job = {
        "entry": entry or "",
        "partial": partial,
        "timeout": limits.timeout_s,
        "output_bytes": limits.output_chars * 4,
        "limits": {
            "cpu": lim["RLIMIT_CPU"],
            "mem": lim["RLIMIT_AS"],
            "fsize": lim["RLIMIT_FSIZE"],
            "nproc": lim["RLIMIT_NPROC"],
        },
    }
    reply = run_warm(job, nonce, solution, tests, bwrap_path() or "bwrap", runtime, mounts, _preexec(drop_root))
    if "error" in reply:
        raise SandboxUnavailable(reply["error"])
    passed, total, ok = _parse_report(reply["report"].encode(), nonce)
    return RunResult(
        passed,
        total,
        ok and not reply["timed_out"],
        reply["timed_out"],
        reply["returncode"],
        reply["output"][: limits.output_chars],
    )


def _run_once(
    solution: str,
    tests: str,
    entry: str | None,
    partial: bool,
    limits: Limits,
    python: str,
    drop_root: bool,
    nproc_base: int,
    nonce: str,
    paths: tuple[str, ...],
) -> RunResult:
    """rlimits-only mode: one process per program, no namespaces, no filesystem isolation; `paths`
    (the site-packages folders of params.packages) go on the program's sys.path."""
    with tempfile.TemporaryDirectory(prefix="rlvr-code-") as work:
        os.chmod(work, 0o777 if drop_root else 0o755)
        for name, text in (("solution.py", solution), ("tests.py", tests), ("harness.py", HARNESS.read_text())):
            Path(work, name).write_text(text)
            os.chmod(Path(work, name), 0o644)
        out_path = Path(work, "output.txt")
        res_r, res_w = os.pipe()
        in_r, in_w = os.pipe()
        os.write(in_w, (nonce + "\n").encode())
        os.close(in_w)
        cmd = [python, "-I", "-S", "harness.py", str(res_w), entry or "", "1" if partial else "0", *paths]
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=in_r,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(res_w,),
                cwd=work,
                start_new_session=True,
                preexec_fn=_preexec(drop_root, limits, nproc_base),
                env={"PATH": "/usr/bin:/bin", "HOME": work},
            )
            for fd in (res_w, in_r):
                os.close(fd)
            timed_out = not wait_exit(proc, limits.timeout_s)
            kill_group(proc)
        report = _read_report(res_r)
        os.close(res_r)
        output = out_path.read_bytes()[: limits.output_chars * 4].decode("utf-8", "replace")
    passed, total, ok = _parse_report(report, nonce)
    return RunResult(passed, total, ok and not timed_out, timed_out, proc.returncode, output[: limits.output_chars])


def _read_report(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def _parse_report(report: bytes, nonce: str) -> tuple[int, int, bool]:
    parts = report.decode("ascii", "replace").strip().split()
    if len(parts) != 3 or not secrets.compare_digest(parts[0], nonce):
        return 0, 0, False
    try:
        passed, total = int(parts[1]), int(parts[2])
    except ValueError:
        return 0, 0, False
    if not 0 <= passed <= total or total < 1:
        return 0, 0, False
    return passed, total, True
