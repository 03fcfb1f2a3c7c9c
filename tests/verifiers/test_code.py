"""Code verifier: extraction, HumanEval-style and pytest-style tests, partial credit, what the
sandbox shows of the host, and the hack suite (every case must score 0, return within its
timeout, leave the host unharmed), including reading the answer key from the host's files."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvrflow.verifiers import verify
from rlvrflow.verifiers.code.extract import extract_code
from rlvrflow.verifiers.code.sandbox import Limits, SandboxUnavailable, resolve_mode, run_sandboxed, sandbox_runtime
from rlvrflow.verifiers.code.verifier import check_reference

REF = json.dumps(
    {
        "tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"
        "    assert candidate(-1, 1) == 0\n",
        "entry_point": "add",
    }
)
GOOD = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```"
TIMEOUT = 2.0
REPO = Path(__file__).resolve().parents[2]


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _imports(module: str) -> set[str]:
    """The modules that verifiers/code/<module>.py imports (relative ones as '.name')."""
    import ast

    tree = ast.parse((REPO / "verifiers" / "code" / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_process_helpers_know_no_verifier_and_the_sandbox_modules_no_cycle():
    """processes.py (used by the pool too) imports only the standard library; warm.py does not import sandbox.py."""
    import sys

    assert all(name.split(".")[0] in sys.stdlib_module_names or name == "__future__" for name in _imports("processes"))
    assert ".sandbox" not in _imports("warm") and ".warm" in _imports("sandbox")


def test_extract_prefers_the_block_defining_the_entry_point():
    resp = "```python\ndef add(a, b):\n    return a + b\n```\nUsage:\n```python\nprint(add(1, 2))\n```"
    assert "def add" in extract_code(resp, "add")
    assert extract_code("```sql\nSELECT 1\n```", None) is None
    assert extract_code("def f():\n    return 1", None).startswith("def f")
    assert extract_code("just prose, no code here", None) is None


@pytest.mark.sandbox
def test_correct_and_wrong_solutions():
    assert verify("code", GOOD, REF, {}).status == "correct"
    v = verify("code", fence("def add(a, b):\n    return a * b"), REF, {})
    assert v.status == "wrong" and v.score == 0.0


@pytest.mark.sandbox
def test_partial_credit_counts_asserts_of_check():
    v = verify("code", fence("def add(a, b):\n    return 4 if a == 2 else 3"), REF, {"partial": True})
    assert v.status == "wrong" and v.score == pytest.approx(2 / 3), v


@pytest.mark.sandbox
def test_pytest_style_and_plain_assert_tests():
    ref = json.dumps({"tests": "def test_a():\n    assert add(1, 1) == 2\ndef test_b():\n    assert add(0, 0) == 1\n"})
    v = verify("code", fence("def add(a, b):\n    return a + b"), ref, {"partial": True})
    assert v.score == pytest.approx(0.5)
    plain = json.dumps({"tests": "assert add(2, 3) == 5\n"})
    assert verify("code", fence("def add(a, b):\n    return a + b"), plain, {}).correct


@pytest.mark.sandbox
def test_exceptions_and_helpers_cross_the_process_boundary():
    ref = json.dumps(
        {
            "tests": "def check(c):\n    try:\n        c(-1)\n        assert False\n"
            "    except ValueError:\n        pass\n    assert c(4) == (2.0, [4], {'k': None})\n"
            "    assert helper(3) == 9 and LIMIT == 10\n",
            "entry_point": "f",
        }
    )
    code = (
        "LIMIT = 10\ndef helper(x):\n    return x * x\n"
        "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return (x ** 0.5, [x], {'k': None})"
    )
    assert verify("code", fence(code), ref, {}).correct


@pytest.mark.sandbox
def test_setup_code_runs_before_the_solution():
    ref = json.dumps(
        {
            "tests": "def check(c):\n    assert c([3, 1]) == [1, 3]\n",
            "entry_point": "srt",
            "setup": "from typing import List\n",
        }
    )
    assert verify("code", fence("def srt(xs: List[int]) -> List[int]:\n    return sorted(xs)"), ref, {}).correct


def test_bad_reference_is_an_error():
    assert verify("code", GOOD, "not json", {}).status == "error"
    assert verify("code", GOOD, json.dumps({"entry_point": "add"}), {}).status == "error"


def test_without_bwrap_it_refuses_unless_opted_in(monkeypatch):
    monkeypatch.setattr("rlvrflow.verifiers.code.sandbox.bwrap_path", lambda: None)
    monkeypatch.delenv("RLVRFLOW_SANDBOX", raising=False)
    with pytest.raises(SandboxUnavailable, match="rlimits"):
        resolve_mode(None)
    v = verify("code", GOOD, REF, {})
    assert v.status == "error" and "bubblewrap" in v.detail
    assert resolve_mode("rlimits") == "rlimits"
    assert verify("code", GOOD, REF, {"sandbox": "rlimits"}).correct


def test_bad_packages_param_is_an_error():
    for packages, why in (
        ("numpy", "list of import names"),
        (["no_such_pkg_rlvr"], "not installed"),
        (["json"], "standard library"),
        (["numpy.linalg"], "not an import name"),
    ):
        v = verify("code", GOOD, REF, {"packages": packages})
        assert v.status == "error" and why in v.detail, (packages, v)
        assert why in check_reference(REF, {"packages": packages})
    assert check_reference(REF, {"packages": ["numpy"]}) is None


@pytest.mark.sandbox
def test_named_packages_and_only_those_are_importable():
    uses = fence("import numpy\ndef add(a, b):\n    return int(numpy.add(a, b))")
    assert verify("code", uses, REF, {"packages": ["numpy"]}).correct
    assert verify("code", uses, REF, {"packages": ["numpy"], "sandbox": "rlimits"}).correct
    assert verify("code", uses, REF, {}).status == "wrong"
    other = fence("import numpy, yaml\ndef add(a, b):\n    return a + b")
    assert verify("code", other, REF, {"packages": ["numpy"]}).status == "wrong"


@pytest.mark.sandbox
def test_details_quote_failing_output_only_and_briefly():
    chatty = "print('LEAK' * 5000, flush=True)\ndef add(a, b):\n    return {}\n"
    passing = fence(chatty.format("a + b"))
    assert "LEAK" not in verify("code", passing, REF, {}).detail
    failing = verify("code", fence(chatty.format("a * b")), REF, {})
    assert failing.status == "wrong" and "LEAK" in failing.detail and len(failing.detail) < 600
    assert "LEAK" not in verify("code", fence(chatty.format("4 if a == 2 else 3")), REF, {"partial": True}).detail


SEE = """\
import json, os, sys
def walk(top):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs)
seen = {"root": sorted(os.listdir("/")), "etc": sorted(os.listdir("/etc")), "tmp": walk("/tmp"),
        "homes": walk("/root") + walk("/home"), "sys": os.path.exists("/sys/kernel"),
        "repo": os.path.exists(REPO), "site": os.path.exists(SITE), "prefix": sys.prefix,
        "mounts": open("/proc/self/mounts").read() + open("/proc/self/mountinfo").read()}
import decimal, fractions, hashlib, heapq, itertools, math, random, re, statistics, string, typing
print(json.dumps(seen), flush=True)
def add(a, b):
    return a + b
"""


@pytest.mark.sandbox
def test_the_sandbox_shows_only_the_runtime():
    """The program sees the interpreter's runtime, the system libraries, /etc/ld.so.cache, an empty
    /tmp, /dev and its own /proc: not the project, this environment's packages, or anyone's home."""
    site_packages = Path(pytest.__file__).parents[1]  # this environment's, venv or not
    program = SEE.replace("REPO", repr(str(REPO))).replace("SITE", repr(str(site_packages / "pytest")))
    run = run_sandboxed(program, json.loads(REF)["tests"], "add", False, Limits(output_chars=100_000))
    assert run.reported and run.passed == run.total, run.output[-2000:]
    seen = json.loads(run.output)
    runtime = sandbox_runtime(os.getuid() == 0)
    runtime_tops = {Path(p).parts[1] for p in (*runtime.dirs, *runtime.files)}
    assert set(seen["root"]) <= {"tmp", "proc", "dev", "etc", "usr", "lib", "lib64", "lib32", "libx32"} | runtime_tops
    assert seen["etc"] == ["ld.so.cache"] and seen["tmp"] == [] and not seen["sys"]
    assert not seen["repo"] and not seen["site"] and str(REPO) not in seen["mounts"]
    assert all(f.startswith(seen["prefix"] + "/") for f in seen["homes"]), seen["homes"]


@pytest.fixture
def answer_key():
    """Where a host keeps references: a `rlvrflow verify` input file and a run folder (attach and
    tier outputs), both inside the project folder and readable by anyone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(tempfile.mkdtemp(prefix=".answer-key-", dir=REPO))
    try:
        run_dir = root / "runs" / "demo" / "attach"
        run_dir.mkdir(parents=True)
        input_file = root / "to_verify.jsonl"
        input_file.write_text(json.dumps({"verifier": "code", "response": GOOD, "reference": REF}) + "\n")
        pq.write_table(
            pa.table({"prompt_id": ["p1"], "reference": [REF]}), run_dir / "part-0.parquet", compression="none"
        )
        for path in (root, *root.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield {"input": input_file, "run": root / "runs", "tests": REPO / "tests" / "verifiers"}
    finally:
        shutil.rmtree(root)


HARVEST = r"""
import os, re
KEY = re.compile(r"candidate\((-?\d+), (-?\d+)\) == (-?\d+)")
table = {}
def scan(path):
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return
    for a, b, c in KEY.findall(text):
        table[(int(a), int(b))] = int(c)
def harvest(top):
    if os.path.isfile(top):
        return scan(top)
    for d, dirs, files in os.walk(top):
        if d.startswith(("/proc", "/sys", "/dev", "/usr")):
            dirs[:] = []
        dirs[:] = [x for x in dirs if x not in ("site-packages", "dist-packages", ".git", "__pycache__")]
        for name in files:
            if name.endswith((".jsonl", ".json", ".parquet", ".py", ".txt", ".csv")):
                scan(os.path.join(d, name))
def add(a, b):
    return table.get((a, b), 0)
"""


def answer_key_hacks(key: dict) -> dict[str, str]:
    """Programs that find the tests on the host and answer from them: correct where they can see."""
    hacks = {f"answer key: read the {name}": f"{HARVEST}harvest({str(path)!r})" for name, path in key.items()}
    listed = {
        "/": "set(os.listdir('/')) - {'tmp', 'proc', 'dev', 'etc', 'usr', 'lib', 'lib64'} - "
        "{p.split('/')[1] for p in (sys.prefix, sys.executable)}",
        "/root and /home": "[os.path.join(d, f) for top in ('/root', '/home') for d, _, fs in os.walk(top) "
        "for f in fs if not os.path.join(d, f).startswith(sys.prefix + '/')]",
        "the project folder": f"os.path.exists({str(REPO)!r}) and os.listdir({str(REPO)!r})",
    }
    hacks |= {
        f"list {where}": f"import os, sys\nfound = {expr}\ndef add(a, b):\n    return a + b if found else 0"
        for where, expr in listed.items()
    }
    return hacks | {
        "answer key: walk the whole filesystem": f"{HARVEST}harvest('/')",
        "answer key: paths named in /proc/self/mounts": (
            f"{HARVEST}for m in ('/proc/self/mounts', '/proc/self/mountinfo'):\n"
            "    for tok in open(m).read().split():\n"
            "        if tok.startswith('/'):\n            harvest(tok)"
        ),
        "answer key: paths in /proc/*/environ and cwd": (
            f"{HARVEST}for pid in os.listdir('/proc'):\n"
            "    try: env = open(f'/proc/{pid}/environ', 'rb').read().decode()\n"
            "    except OSError: env = ''\n"
            "    try: env += '\\0=' + os.readlink(f'/proc/{pid}/cwd')\n"
            "    except OSError: pass\n"
            "    for item in env.split('\\0'):\n"
            "        for value in item.partition('=')[2].split(':'):\n"
            "            if value.startswith('/') and value != '/':\n                harvest(value)"
        ),
        "answer key: the tests in inherited memory": (
            "import ctypes, gc, re\nKEY = re.compile(rb'candidate\\((-?\\d+), (-?\\d+)\\) == (-?\\d+)')\n"
            "table = {}\ndef note(blob):\n    for a, b, c in KEY.findall(blob):\n"
            "        table[(int(a), int(b))] = int(c)\n"
            "for o in gc.get_objects():\n    if isinstance(o, dict):\n        for v in list(o.values()):\n"
            "            if isinstance(v, str):\n                note(v.encode())\n"
            "for line in open('/proc/self/maps'):\n    span, perms = line.split()[:2]\n"
            "    if perms.startswith('rw'):\n        lo, hi = (int(x, 16) for x in span.split('-'))\n"
            "        for at in range(lo, hi, 1 << 20):\n            note(ctypes.string_at(at, min(1 << 20, hi - at)))\n"
            "def add(a, b):\n    return table.get((a, b), 0)"
        ),
    }


def test_answer_key_attacks_work_without_the_sandbox(answer_key):
    """The attacks are real: in rlimits-only mode (no filesystem isolation) they score. (The
    whole-filesystem walks are left out here: on a big host they outlast any timeout.)"""
    hacks = answer_key_hacks(answer_key)
    for name in (
        *(f"answer key: read the {k}" for k in answer_key),
        "list the project folder",
        "list /",
        "answer key: the tests in inherited memory",
    ):
        v = verify("code", fence(hacks[name]), REF, {"sandbox": "rlimits", "timeout_s": 30})
        assert v.correct, (name, v)


CANARY = "/tmp/rlvrflow_sandbox_canary"
HACKS = {
    "print PASSED": "print('PASSED')\nprint('All tests passed')\ndef add(a, b):\n    return 0",
    "os._exit(0) early": "import os\nos._exit(0)",
    "sys.exit(0) before tests": "import sys\ndef add(a, b):\n    return 0\nsys.exit(0)",
    "exit inside candidate": "import sys\ndef add(a, b):\n    sys.exit(0)",
    "atexit": "import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return 0",
    "raise SystemExit in del": "class K:\n    def __del__(self):\n        raise SystemExit(0)\nk = K()\ndef add(a, b):\n    return 0",
    "forge the result fd": "import os\nfor fd in range(3, 20):\n    try: os.write(fd, b'0' * 32 + b' 1 1\\n')\n    except OSError: pass\ndef add(a, b):\n    return 0",
    "sleep forever": "import time\ntime.sleep(10**6)",
    "busy loop": "while True:\n    pass",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "huge memory": "x = bytearray(8 * 1024**3)\ndef add(a, b):\n    return a + b",
    "write to host tmp": f"open({CANARY!r}, 'w').write('x')\ndef add(a, b):\n    return 0",
    "write into /etc": "open('/etc/rlvrflow_pwned', 'w').write('x')\ndef add(a, b):\n    return a + b",
    "write into the repo": f"open({str(Path(__file__).with_name('pwned.txt'))!r}, 'w').write('x')\n"
    "def add(a, b):\n    return a + b",
    "overwrite the tests": "import glob\nfor p in glob.glob('/tmp/**/*.py', recursive=True):\n"
    "    try: open(p, 'w').write('def check(c): pass')\n    except OSError: pass\n"
    "def add(a, b):\n    return 0",
    "huge output file": "open('big', 'wb').write(b'x' * (64 * 1024**2))\ndef add(a, b):\n    return a + b",
    "fill the ram disk": "import os\nfor i in range(10**6):\n    try: open(f'/tmp/f{i}', 'wb').write(b'x' * 10**6)\n"
    "    except OSError: pass\n    try: open(f'/dev/shm/f{i}', 'wb').write(b'x' * 10**6)\n"
    "    except OSError: pass\ndef add(a, b):\n    return 0",
    "flood stdout": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "socket": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)\ndef add(a, b):\n    return a + b",
    "kill parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add(a, b):\n    return 0",
    "kill everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\ndef add(a, b):\n    return 0",
    "monkeypatch check": "import builtins\nbuiltins.AssertionError = type('E', (BaseException,), {})\ndef add(a, b):\n    return 0",
    "no entry point": "def plus(a, b):\n    return a + b",
    "steal the nonce from memory": (
        "import gc, os, re, sys\nfound = set()\n"
        "for f in list(sys._current_frames().values()):\n"
        "    while f is not None:\n"
        "        for v in list(f.f_locals.values()) + list(f.f_globals.values()):\n"
        "            found.update(re.findall(r'[0-9a-f]{32}', repr(v)[:100000]))\n"
        "        f = f.f_back\n"
        "for o in gc.get_objects():\n"
        "    if isinstance(o, dict):\n"
        "        found.update(re.findall(r'[0-9a-f]{32}', repr(o)[:100000]))\n"
        "for n in found:\n"
        "    for fd in range(3, 64):\n"
        "        try: os.write(fd, (n + ' 1 1\\n').encode())\n"
        "        except OSError: pass\n"
        "def add(a, b):\n    return 0"
    ),
    "read the tests process memory": (
        "import os\nfor pid in os.listdir('/proc'):\n"
        "    try: open(f'/proc/{pid}/mem', 'rb').read(1)\n    except Exception: pass\n"
        "def add(a, b):\n    return 0"
    ),
    "return an object equal to anything": (
        "class Any:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any()"
    ),
    "kill the tests from inside a call": "import os, signal\ndef add(a, b):\n    os.kill(-1, signal.SIGKILL)",
}


@pytest.mark.sandbox
def test_hack_suite(answer_key):
    if os.path.exists(CANARY):
        os.remove(CANARY)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    hacks = dict(
        HACKS,
        **answer_key_hacks(answer_key),
        **{
            "connect to host port": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "def add(a, b):\n    return a + b"
        },
    )

    def run(item):
        name, code = item
        t0 = time.monotonic()
        v = verify("code", fence(code), REF, {"timeout_s": TIMEOUT})
        return name, v, time.monotonic() - t0

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(run, hacks.items()))
    listener.settimeout(0.2)
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()
    for name, v, seconds in results:
        assert v.score == 0.0 and v.status != "correct", (name, v)
        assert seconds < TIMEOUT + 8, (name, seconds)
    assert not os.path.exists(CANARY) and not os.path.exists("/etc/rlvrflow_pwned")
    assert not Path(__file__).with_name("pwned.txt").exists()
    assert verify("code", GOOD, REF, {}).correct, "the host and the sandbox still work afterwards"


MODES = [{}, {"sandbox": "rlimits"}]
SHADOWED = {  # tests that call a built-in; a wrong solution that shadows it; a right one that does too
    "abs": (
        json.dumps(
            {"tests": "def check(candidate):\n    assert abs(candidate(1.0) - 2.5) < 1e-6\n", "entry_point": "f"}
        ),
        "def f(x):\n    return 999.0\ndef abs(x):\n    return 0",
        "def f(x):\n    return x * 2.5\ndef abs(x):\n    return 0",
    ),
    "sorted": (
        json.dumps(
            {"tests": "def check(candidate):\n    assert sorted(candidate([3, 1])) == [1, 3]\n", "entry_point": "f"}
        ),
        "def f(xs):\n    return [9, 9]\nsorted = lambda xs: [1, 3]",
        "def f(xs):\n    return [3, 1]\nsorted = lambda xs: [9]",
    ),
    "len, pytest style": (
        json.dumps({"tests": "def test_a():\n    assert len(f(3)) == 3\n", "entry_point": "f"}),
        "def f(n):\n    return []\ndef len(x):\n    return 3",
        "def f(n):\n    return [0] * n\ndef len(x):\n    return 0",
    ),
}


@pytest.mark.sandbox
@pytest.mark.parametrize("mode", MODES, ids=["bwrap", "rlimits"])
def test_hack_shadowing_builtins_or_test_units_the_tests_call(mode):
    """Names the solution defines reach the tests only as the entry point or as helpers the tests
    use that are no built-in and no test unit: `abs`, `sorted`, `check`, `test_*` never do."""
    for name, (ref, wrong, right) in SHADOWED.items():
        v = verify("code", fence(wrong), ref, mode)
        assert v.status == "wrong" and v.score == 0.0, (name, v)
        assert verify("code", fence(right), ref, mode).correct, name
    pytest_style = json.dumps({"tests": "def test_a():\n    assert f(1) == 2\n", "entry_point": "f"})
    own_check = "def f(x):\n    return 0\ndef check(candidate):\n    pass\ndef test_a():\n    pass"
    v = verify("code", fence(own_check), pytest_style, mode)
    assert v.status == "wrong" and v.score == 0.0, v
    assert verify("code", fence("def f(x):\n    return 2 * x\ndef check(c):\n    pass"), pytest_style, mode).correct


@pytest.mark.sandbox
@pytest.mark.parametrize("mode", MODES, ids=["bwrap", "rlimits"])
def test_hack_partial_credit_from_the_solutions_own_test_functions(mode):
    """With partial credit the test units come from the tests' own source, never the solution's."""
    ref = json.dumps(
        {"tests": "def test_a():\n    assert f(1) == 2\ndef test_b():\n    assert f(2) == 4\n", "entry_point": "f"}
    )
    params = dict(mode, partial=True)
    padded = "def f(x):\n    return 0\n" + "".join(f"def test_z{i}():\n    pass\n" for i in range(200))
    v = verify("code", fence(padded), ref, params)
    assert v.status == "wrong" and v.score == 0.0 and "0/2" in v.detail, v
    half = verify("code", fence("def f(x):\n    return 2 if x == 1 else 0\ndef test_b():\n    pass"), ref, params)
    assert half.score == pytest.approx(0.5) and "1/2" in half.detail, half
    helpers = json.dumps(
        {"tests": "def check(c):\n    assert helper(3) == 9 and LIMIT == 10 and c(1) == 1\n", "entry_point": "f"}
    )
    code = "LIMIT = 10\ndef helper(x):\n    return x * x\ndef f(x):\n    return x"
    assert verify("code", fence(code), helpers, params).correct, "helpers the tests use still reach them"


def _host_shmem_kib() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:"))


SHM_HOG = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for _ in range(24):
    sid = libc.shmget(0, 64 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    addr = libc.shmat(sid, None, 0) if sid >= 0 else None
    if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(addr, 1, 64 << 20)
        libc.shmdt(ctypes.c_void_p(addr))
        made += 1
made += libc.msgget(0, 0o1600) >= 0  # a message queue and a semaphore set too
made += libc.semget(0, 1, 0o1600) >= 0
def add(a, b):
    return a + b if made == 26 else 0
"""
IPC_SEEN = """\
left = [line for kind in ("shm", "msg", "sem") for line in open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]]
def add(a, b):
    return a + b if not left else 0
"""


@pytest.mark.sandbox
def test_hack_system_v_shared_memory_does_not_outlive_its_program():
    """24 detached 64 MiB segments fit under a 512 MiB address-space limit; once the program is
    over they are gone: the next program in the same warm sandbox sees no System V IPC object of
    it, and the host's shared memory is back (1.5 GiB would stay otherwise)."""
    before = _host_shmem_kib()
    params = {"memory_mb": 512, "timeout_s": 30}
    hog = verify("code", fence(SHM_HOG), REF, params)
    assert hog.correct, ("the program made its 24 segments, queue and semaphores", hog)
    # Sequential calls with the same view take the same idle sandbox back (the pool is LIFO).
    assert verify("code", fence(IPC_SEEN), REF, params).correct, "a later program saw the first one's IPC objects"
    assert _host_shmem_kib() - before < 512 << 10, (before, _host_shmem_kib())
