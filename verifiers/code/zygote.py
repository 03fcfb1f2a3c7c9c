"""Runs INSIDE a long-lived bwrap sandbox as its PID 1: forks one child per program.

Starting bwrap and Python costs ~60 ms, more than most test programs; a warm sandbox pays it once.
Protocol, per job: a JSON line on CTL_IN ({solution, tests, entry, partial, timeout, limits}),
"ready" on CTL_OUT once the solution process exists, the nonce line on CTL_IN, then one JSON
reply line on CTL_OUT ({report, timed_out, returncode, output} or {error}).
Per job: a fresh /tmp/run; a solution process, then (after the host sends the nonce) a tests
process, each forked with its own session and rlimits (see remote.py); a wall-clock wait on a
pidfd for the tests process, then kill(-1, SIGKILL) (from PID 1 that
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
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir off
import remote  # noqa: E402

RUN = "/tmp/run"


def _limits(lim):
    cpu, mem, fsize, nproc = lim["cpu"], lim["mem"], lim["fsize"], lim["nproc"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _fork(job, keep_fds, out_fd, body):
    """Fork a child that keeps only keep_fds (plus 0-2), has the job's rlimits, and runs body()."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        os.chdir(RUN)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        for fd in range(3, 256):
            if fd not in keep_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        _limits(job["limits"])
        body()
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
    """SIGKILL everything else in the namespace until no child is left; the program's status.
    kill(-1) is only safe as PID 1 of a private PID namespace: anywhere else it would signal
    every process this user may signal, so refuse outright."""
    if os.getpid() != 1:
        raise SystemExit("zygote: refusing kill(-1) outside its own PID namespace")
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


def run_job(job, ctl_in, ctl_out):
    """Solution process first (it never sees the nonce), then ask the host for the nonce, then
    the tests process; wait for the tests, kill the namespace, reply."""
    _wipe()
    os.makedirs(RUN)
    # the sources stay in memory: the solution process could rewrite files before the tests read them
    out_fd = os.open(os.path.join(RUN, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    t_sock, s_sock = socket.socketpair()
    res_r, res_w = os.pipe()
    try:
        _fork(job, {s_sock.fileno()}, out_fd, lambda: remote.serve_solution(s_sock, job["solution"]))
        s_sock.close()
        os.write(ctl_out, b"ready\n")
        nonce = ctl_in.readline().decode().strip()
        tests = _fork(job, {t_sock.fileno(), res_w}, out_fd, lambda: remote.run_tests(
            t_sock, res_w, nonce, job["tests"], job["entry"], job["partial"]))
    except OSError as exc:
        _kill_and_reap(None)
        os.close(res_r)
        return {"error": f"cannot start the program: {exc}"}
    finally:
        for fd in (res_w, out_fd):
            os.close(fd)
        t_sock.close()
    finished = _wait(tests, job["timeout"])
    code = _kill_and_reap(tests)
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
    if os.getpid() != 1:
        sys.exit("zygote.py must run as PID 1 of its own PID namespace (bwrap --unshare-pid --as-pid-1)")
    ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE = 0
    ctl_in, ctl_out = int(sys.argv[1]), int(sys.argv[2])
    reader = os.fdopen(ctl_in, "rb", buffering=0)
    while True:
        line = reader.readline()
        if not line:
            break
        reply = run_job(json.loads(line), reader, ctl_out)
        os.write(ctl_out, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    main()
