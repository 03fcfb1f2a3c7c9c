"""Runs INSIDE the sandbox: the solution and the tests in two processes, so the verdict cannot be
forged by the solution.

The solution process (`serve_solution`, untrusted) executes the solution and then only answers
calls: `name(*args)` in, a value or an exception name out. The tests process (`run_tests`,
trusted code from the reference, never runs solution code) executes the tests with the entry
point and the other solution names the tests use (no built-in, no `check` or `test_*`: see
harness.visible) bound to proxies that make such a call, and alone knows the nonce it
writes with the result. Each reads its source from its own pipe (see zygote.py): the tests and
the nonce never exist in the solution process, not even in memory it inherited. Values cross
as `marshal` data (ints, floats including inf/nan, str, bytes, tuples, lists, dicts, sets,
None): never pickle, which would run code in the tests process. The tests process is not
dumpable, so the solution cannot ptrace it or read its memory.
Limits: a solution's return value must be plain data (no generators, custom objects or
functions), and in-place mutation of arguments is not seen by the tests.
Standard library only.
"""

import builtins
import ctypes
import marshal
import os
import struct
import sys

import harness

MAX_MESSAGE = 64 << 20


def send(sock, obj):
    data = marshal.dumps(obj)
    sock.sendall(struct.pack("!I", len(data)) + data)


def recv(sock):
    head = _exact(sock, 4)
    (size,) = struct.unpack("!I", head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is over the limit")
    return marshal.loads(_exact(sock, size))


def _exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the other side closed")
        buf += chunk
    return bytes(buf)


def _transferable(value):
    try:
        marshal.dumps(value)
        return not isinstance(value, type(compile("0", "", "eval")))
    except ValueError:
        return False


def read_source(fd):
    """Everything the host writes to fd, until it closes its end."""
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def serve_solution(sock, source_fd):
    """Untrusted side: read and exec the solution, publish its names, answer calls until EOF."""
    source = read_source(source_fd)
    sys.stdin = open(os.devnull)
    ns = {"__name__": "__solution__", "__builtins__": builtins}
    exec(compile(source, "solution.py", "exec"), ns)
    names = {}
    for key, value in list(ns.items()):
        if key.startswith("__") or type(value).__name__ == "module":
            continue
        if callable(value):
            names[key] = ("fn",)
        elif _transferable(value):
            names[key] = ("val", value)
    send(sock, names)
    while True:
        try:
            _, name, args, kwargs = recv(sock)
        except EOFError:
            os._exit(0)
        try:
            result = ns[name](*args, **kwargs)
            reply = (
                ("ok", result)
                if _transferable(result)
                else ("exc", "TypeError", f"{name} returned a {type(result).__name__}, which cannot be checked")
            )
        except Exception as exc:  # the tests may expect it; SystemExit etc. end the process
            reply = ("exc", type(exc).__name__, str(exc)[:2000])
        send(sock, reply)


class RemoteError(Exception):
    """An exception raised in the solution whose type is not a builtin exception."""


class Remote:
    """Stands for a solution function inside the tests process."""

    def __init__(self, sock, name):
        self._sock, self.__name__ = sock, name

    def __call__(self, *args, **kwargs):  # a proxy forwards whatever signature the tests use
        send(self._sock, ("call", self.__name__, args, kwargs))
        kind, *rest = recv(self._sock)
        if kind == "ok":
            return rest[0]
        exc_type = getattr(builtins, str(rest[0]), None)
        if not (isinstance(exc_type, type) and issubclass(exc_type, Exception)):
            exc_type = RemoteError
        raise exc_type(rest[1])


def run_tests(sock, result_fd, source_fd, entry, partial):
    """Trusted side: read the nonce and the tests, run the tests against proxies, then write
    `<nonce> <passed> <total>`."""
    ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE = 0 (inherited from the zygote; made sure)
    nonce, _, tests = read_source(source_fd).partition("\n")
    sys.stdin = open(os.devnull)
    names = recv(sock)
    ns = {"__name__": "__tests__", "__builtins__": builtins}
    for name in harness.visible(tests, names, entry):
        ns[name] = Remote(sock, name) if names[name][0] == "fn" else names[name][1]
    exec(compile(tests, "tests.py", "exec"), ns)
    harness.finish(harness.units(tests, ns, entry, partial), partial, result_fd, nonce)
