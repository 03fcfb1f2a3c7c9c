"""Runs INSIDE a long-lived bwrap sandbox as its PID 1: forks one child per program.

Starting bwrap and Python costs ~60 ms, more than most test programs; a warm sandbox pays it once.
warm.py starts it as `python -I -S -c BOOT CTL` and sends this module, remote.py and harness.py
as the first message on CTL, so no file of ours is mounted in the sandbox.
Protocol on CTL (a SOCK_SEQPACKET socket, one message each way per job): the host sends a JSON
header ({entry, partial, timeout, limits}) with three file descriptors: the read end of the
tests pipe (the nonce line, then the tests), the read end of the solution pipe, and the output
file (a host temp file; the host reads it). The zygote replies {report, timed_out, returncode,
recycle} or {error}. It never reads the sources, the nonce or the output itself, so nothing of one
program lives in its memory, which every later program's processes are forked from.
Per job: a fresh /tmp/run; a tests process, then a solution process, each forked with its own
session and rlimits (see remote.py) and holding only its own pipe; a wall-clock wait on a pidfd
for the tests process, then kill(-1, SIGKILL) (from PID 1 that reaches every other process in
the namespace, and nothing outside it), every child reaped, /tmp and /dev/shm wiped and every
System V IPC object of the sandbox's IPC namespace (shared memory, message queues, semaphores)
removed, so no process, file or shared memory outlives its program: detached shared memory
escapes RLIMIT_AS, and would otherwise pile up on the host across the sandbox's programs and
show itself to the next one. An object that cannot be removed makes the reply ask for a new
sandbox (`recycle`). This process is not dumpable (nor are its children, which
inherit that: they cannot ptrace each other or read each other's memory or file descriptors)
and, as a namespace's PID 1, ignores signals sent from inside. Standard library only.
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

import remote  # put in sys.modules by warm.BOOT before this module runs

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
                path = os.path.join(root, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    try:
                        os.remove(path)
                    except OSError:
                        pass


IPC_RMID = 0


def _remove_ipc():
    """Remove every System V IPC object in this IPC namespace (only our programs' can be there: the
    namespace is the sandbox's own). Run after every process but this one is dead, so removed
    shared memory is freed at once. False if any object is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    remove = {
        "shm": lambda i: libc.shmctl(i, IPC_RMID, None),
        "msg": lambda i: libc.msgctl(i, IPC_RMID, None),
        "sem": lambda i: libc.semctl(i, 0, IPC_RMID),
    }
    clean = True
    for kind, rm in remove.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]  # header; the id is the second column
        except OSError:
            continue
        for row in rows:
            clean &= rm(int(row.split()[1])) == 0
    return clean


def run_job(job, tests_fd, solution_fd, out_fd):
    """Tests process first (it reads the nonce and the tests from its own pipe), then the solution
    process (which never holds that pipe); wait for the tests, kill the namespace, reply."""
    _wipe()
    os.makedirs(RUN)
    t_sock, s_sock = socket.socketpair()
    res_r, res_w = os.pipe()
    try:
        tests = _fork(
            job,
            {t_sock.fileno(), res_w, tests_fd},
            out_fd,
            lambda: remote.run_tests(t_sock, res_w, tests_fd, job["entry"], job["partial"]),
        )
        _fork(job, {s_sock.fileno(), solution_fd}, out_fd, lambda: remote.serve_solution(s_sock, solution_fd))
    except OSError as exc:
        _kill_and_reap(None)
        os.close(res_r)
        return {"error": f"cannot start the program: {exc}"}
    finally:
        for fd in (res_w, out_fd, tests_fd, solution_fd):
            os.close(fd)
        t_sock.close()
        s_sock.close()
    finished = _wait(tests, job["timeout"])
    code = _kill_and_reap(tests)
    os.set_blocking(res_r, False)
    try:
        report = os.read(res_r, 256).decode("ascii", "replace")
    except BlockingIOError:
        report = ""
    os.close(res_r)
    _wipe()
    clean = _remove_ipc()
    return {"report": report, "timed_out": not finished, "returncode": code, "recycle": not clean}


def main(ctl):
    if os.getpid() != 1:
        sys.exit("zygote.py must run as PID 1 of its own PID namespace (bwrap --unshare-pid --as-pid-1)")
    ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE = 0
    while True:
        message, fds, _, _ = socket.recv_fds(ctl, 65536, 3)
        if not message:
            break
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            reply = {"error": f"expected 3 file descriptors with the job, got {len(fds)}"}
        else:
            reply = run_job(json.loads(message), *fds)
        ctl.send(json.dumps(reply).encode())
