"""Runs INSIDE a long-lived bwrap sandbox as its PID 1: forks one child per program.

Starting bwrap and Python costs ~60 ms, more than most test programs; a warm sandbox pays it once.
Protocol: one JSON job per line on CTL_IN ({solution, tests, entry, partial, nonce, limits}),
one JSON reply per line on CTL_OUT ({report, timed_out, returncode, output}).
Per job: a fresh /tmp/run, a forked child with its own session and rlimits that runs
harness.run_and_report, a wall-clock wait on a pidfd, then kill(-1, SIGKILL) (from PID 1 that
reaches every other process in the namespace, and nothing outside it), every child reaped, and
/tmp and /dev/shm wiped, so no process or file outlives its program. This process is not
dumpable (the children cannot ptrace it or read its memory) and, as a namespace's PID 1, ignores
signals sent from inside. Standard library only.
"""
import ctypes
import json
import os
import resource
import select
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir off
import harness  # noqa: E402

RUN = "/tmp/run"


def _limits(lim):
    cpu, mem, fsize, nproc = lim["cpu"], lim["mem"], lim["fsize"], lim["nproc"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(job, res_w, out_fd):
    try:
        os.setsid()
        os.chdir(RUN)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.closerange(3, res_w)
        os.closerange(res_w + 1, 1 << 16)
        _limits(job["limits"])
        harness.run_and_report(res_w, job["nonce"], job["entry"], job["partial"])
    except BaseException:  # noqa: BLE001 - anything here is a failed program
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _wait(pid, timeout):
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = None
    if fd is not None:
        ready, _, _ = select.select([fd], [], [], timeout)
        os.close(fd)
        return bool(ready)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
        time.sleep(0.002)
    return False


def _kill_and_reap(pid):
    """SIGKILL everything else in the namespace until no child is left; the program's status."""
    status = None
    while True:
        try:
            os.kill(-1, 9)
        except ProcessLookupError:
            pass
        try:
            got, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        if got == pid:
            status = os.waitstatus_to_exitcode(st)


def _wipe():
    for root in ("/tmp", "/dev/shm"):
        if os.path.isdir(root):
            for name in os.listdir(root):
                if name == ".zygote":  # our own read-only code
                    continue
                path = os.path.join(root, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    try:
                        os.remove(path)
                    except OSError:
                        pass


def run_job(job):
    _wipe()
    os.makedirs(RUN)
    for name in ("solution", "tests"):
        with open(os.path.join(RUN, name + ".py"), "w") as f:
            f.write(job[name])
    res_r, res_w = os.pipe()
    out_fd = os.open(os.path.join(RUN, "output.txt"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (res_r, res_w, out_fd):
            os.close(fd)
        return {"error": f"cannot fork the program: {exc}"}
    if pid == 0:
        _child(job, res_w, out_fd)
    os.close(res_w)
    os.close(out_fd)
    finished = _wait(pid, job["timeout"])
    code = _kill_and_reap(pid)
    os.set_blocking(res_r, False)
    try:
        report = os.read(res_r, 65536).decode("ascii", "replace")
    except BlockingIOError:
        report = ""
    os.close(res_r)
    with open(os.path.join(RUN, "output.txt"), "rb") as f:
        output = f.read(job["output_bytes"]).decode("utf-8", "replace")
    _wipe()
    return {"report": report, "timed_out": not finished, "returncode": code, "output": output}


def main():
    ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE = 0
    ctl_in, ctl_out = int(sys.argv[1]), int(sys.argv[2])
    reader = os.fdopen(ctl_in, "rb")
    for line in reader:
        reply = run_job(json.loads(line))
        os.write(ctl_out, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    main()
