"""Content-addressed stage cache: a stage reruns only when its inputs, config or code changed.

A stage's key hashes (1) the content of its input files, (2) the spec section it reads, and (3) the
source of the library packages it calls. Its outputs live in `ROOT/stages/<stage>/<key>/` with a
`_manifest.json` written last (atomically), so a folder without a manifest is unfinished work.

Outputs are checked before they are trusted: the manifest holds each output's digest and a stat
fingerprint (size and mtime of every file); an output whose fingerprint changed is hashed again, and
one whose digest no longer matches (a parquet cut in half, a file edited in place), an unreadable
manifest or a missing output makes the stage rebuild, with the reason in the new manifest.

Concurrent runs that need the same stage share it: the first takes `.lock` (O_EXCL, holding its pid),
the others wait for the manifest. A lock whose process died is stale and taken over; a failed build
leaves no manifest, so the next attempt starts that folder afresh. Nothing is pickled: tasks pass
paths and hashes. A rebuilt stage's manifest says why (`reason`): its first build, deleted outputs,
`forced`, or which key parts (input names, `code:<package>`) changed since the newest earlier build.

    key = stage_key("attach", {"clean": file_digest(p), "verifiers": spec.verifiers}, ["verifiers"])
    manifest = build_stage(root, "attach", key, lambda out: {...outputs...}, force=False)
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rlvrflow.io import write_json

_REPO = Path(__file__).resolve().parent.parent
_CODE_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".sql", ".txt"}
_digest_memo: dict[tuple[str, int, int], str] = {}
# What an output folder holds about how its build ran, not what it made: the SFT's wall and CPU
# seconds (sft_stats.json), its per-step timings at the logging interval (sft_metrics.jsonl) and its
# TensorBoard events. They are left out of the folder's digest, so an SFT rebuilt to the same
# weights (a --force, a new `sft.logging_steps`) keeps the keys of tiering, GRPO and eval.
RUN_RECORDS = frozenset({"sft_stats.json", "sft_metrics.jsonl", "tb"})


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (memoized per path, size and mtime within this process)."""
    path = Path(path)
    st = path.stat()
    memo_key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo_key not in _digest_memo:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _digest_memo[memo_key] = h.hexdigest()
    return _digest_memo[memo_key]


def tree_digest(
    root: str | Path,
    suffixes: set[str] | None = None,
    skip: frozenset[str] = frozenset(),
    skip_top: frozenset[str] = frozenset(),
) -> str:
    """sha256 over the relative paths and contents of the files under `root` (sorted), leaving out
    `__pycache__` and the folders named in `skip` at any depth, and the files and folders named in
    `skip_top` directly under `root`."""
    root = Path(root)
    h = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not ({"__pycache__", *skip} & set(p.relative_to(root).parts))
        and p.relative_to(root).parts[0] not in skip_top
    )
    for p in files:
        if suffixes is not None and p.suffix not in suffixes:
            continue
        h.update(p.relative_to(root).as_posix().encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()


def code_version(packages: list[str]) -> str:
    """A digest of the source of the named top-level packages (e.g. ["cleaning"]) and of the package
    root every layer imports from (rlvrflow/: its io module)."""
    h = hashlib.sha256()
    for name in ["rlvrflow", *sorted(set(packages) - {"rlvrflow"})]:
        pkg = _REPO / name
        h.update(name.encode())
        # assets are data, not code: the tiny base's files enter the keys of the runs that use it
        # (flows.stage_calls.model_identity), not of every run
        h.update(tree_digest(pkg, _CODE_SUFFIXES, frozenset({"assets"})).encode() if pkg.is_dir() else b"missing")
    return h.hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class StageKey(str):
    """A stage's cache key (its folder name) that also carries `parts`: one short digest per input
    name and per package's code, so a rebuild can say which of them changed."""

    parts: dict[str, str]


def _digest_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(_jsonable(value), sort_keys=True, default=str).encode()).hexdigest()


def stage_key(stage: str, inputs: dict[str, Any], packages: list[str]) -> StageKey:
    """The cache key of one stage: its name, input digests / config sections, and code version."""
    payload = {"stage": stage, "inputs": _jsonable(inputs), "code": code_version(packages)}
    key = StageKey(_digest_json(payload)[:20])
    key.parts = {name: _digest_json(value)[:12] for name, value in inputs.items()}
    key.parts.update({f"code:{pkg}": code_version([pkg])[:12] for pkg in packages})
    return key


def explain_miss(stage_root: Path, key: str, parts: dict[str, str] | None) -> str:
    """Why a stage is computed: first build, missing or corrupted outputs, or which key parts
    changed since the newest earlier build of this stage (e.g. "code:cleaning, files changed since 1a2b...")."""
    mpath = stage_root / key / "_manifest.json"
    if mpath.is_file():
        data = _load_manifest(mpath)
        problem = "the manifest is unreadable" if data is None else check_outputs(mpath.parent, data)
        if problem.startswith("missing"):
            return "the earlier build's outputs are missing"
        return f"the earlier build is corrupted ({problem or 'unfinished'})"
    earlier = []
    for other in stage_root.glob("*/_manifest.json"):
        data = _load_manifest(other)
        if data is not None:
            earlier.append((other.stat().st_mtime, data))
    if not earlier:
        return "first build of this stage here"
    _, newest = max(earlier, key=lambda pair: pair[0])
    before = newest.get("key_parts") or {}
    if not parts or not before:
        return f"inputs differ from the newest earlier build {newest.get('key')}"
    changed = sorted(name for name in parts.keys() | before.keys() if parts.get(name) != before.get(name))
    return f"{', '.join(changed) or 'the key'} changed since the newest earlier build {newest.get('key')}"


def _load_manifest(mpath: Path) -> dict | None:
    try:
        data = json.loads(mpath.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("outputs"), dict) and isinstance(data.get("digests"), dict)
    return data if ok else None


def fingerprint(path: Path) -> str:
    """A cheap stat digest of a file or folder (relative names, sizes, mtimes): when it is unchanged
    the content digest need not be recomputed."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        rows = [(p.relative_to(path).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    else:
        st = path.stat()
        rows = [("", st.st_size, st.st_mtime_ns)]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:24]


def check_outputs(folder: Path, data: dict) -> str:
    """'' when every output the manifest names exists and still has its recorded digest; else what
    is wrong ("missing tiers", "tiers: content differs from the manifest's digest")."""
    prints = data.get("fingerprints") or {}
    for name, rel in data["outputs"].items():
        path = folder / rel
        if not path.exists():
            return f"missing {name}"
        if name in prints and prints[name] == fingerprint(path):
            continue
        want = data["digests"].get(name)
        # a manifest written before RUN_RECORDS were left out holds the whole tree's digest: still valid
        if output_digest(path) != want and not (path.is_dir() and tree_digest(path) == want):
            return f"{name}: content differs from the manifest's digest"
    return ""


@dataclass(frozen=True)
class Manifest:
    """What a finished stage left: its folder, output files (relative) with digests, and stats."""

    stage: str
    key: str
    dir: Path
    outputs: dict[str, str] = field(default_factory=dict)  # name -> relative path
    digests: dict[str, str] = field(default_factory=dict)  # name -> sha256 (files) or tree digest
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    # CPU seconds of the build (this process and the child processes it waited for): on a shared machine
    # the wall clock also counts the neighbours. None for a stage built before it was recorded.
    cpu_seconds: float | None = None
    cached: bool = False
    reason: str = ""  # why it was computed (empty when it came from the cache)
    key_parts: dict[str, str] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.dir / self.outputs[name]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Manifest":
        return cls(
            stage=data["stage"],
            key=data["key"],
            dir=Path(data["dir"]),
            outputs=data["outputs"],
            digests=data["digests"],
            stats=data.get("stats", {}),
            seconds=data.get("seconds", 0.0),
            cpu_seconds=data.get("cpu_seconds"),
            cached=data.get("cached", False),
            reason=data.get("reason", ""),
            key_parts=data.get("key_parts", {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "key": self.key,
            "dir": str(self.dir),
            "outputs": self.outputs,
            "digests": self.digests,
            "stats": self.stats,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "cached": self.cached,
            "reason": self.reason,
            "key_parts": self.key_parts,
        }


def stage_dir(root: str | Path, stage: str, key: str) -> Path:
    return Path(root) / "stages" / stage / key


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest of a finished stage folder, or None if unfinished, unreadable, or any output is
    missing or no longer matches its digest (then the stage is rebuilt, never trusted)."""
    data = _load_manifest(folder / "_manifest.json")
    if data is None or check_outputs(folder, data):
        return None
    return Manifest(
        stage=data["stage"],
        key=data["key"],
        dir=folder,
        outputs=data["outputs"],
        digests=data["digests"],
        stats=data.get("stats", {}),
        seconds=data.get("seconds", 0.0),
        cpu_seconds=data.get("cpu_seconds"),
        cached=True,
        key_parts=data.get("key_parts", {}),
    )


def build_stage(
    root: str | Path,
    stage: str,
    key: str,
    build: Callable[[Path], tuple[dict[str, str], dict[str, Any]]],
    force: bool = False,
    resumable: bool = False,
    wait_seconds: float = 3600.0,
) -> Manifest:
    """Return the stage's manifest, running `build(folder) -> (outputs, stats)` unless cached.

    `outputs` maps names to paths relative to `folder`. With `force`, a finished folder is rebuilt.
    `resumable` keeps an unfinished folder's files for `build` to resume from (GRPO checkpoints).
    """
    folder = stage_dir(root, stage, key)
    folder.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        if not force:
            found = read_manifest(folder)
            if found is not None:
                return found
        if _try_lock(folder):
            # another builder may have finished (manifest written, lock released) between the check above
            # and this lock: look again under the lock, or this run would build the stage a second time
            found = None if force else read_manifest(folder)
            if found is None:
                break
            (folder / ".lock").unlink(missing_ok=True)
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"stage {stage}: {folder}/.lock held by another run for over {wait_seconds:.0f} s; "
                "if no other run is active, delete the lock file"
            )
        time.sleep(0.5)
    parts = getattr(key, "parts", None) or {}
    reason = "forced" if force else explain_miss(folder.parent, str(key), parts)
    try:
        (folder / "_manifest.json").unlink(missing_ok=True)
        if force or not resumable:
            for child in list(folder.iterdir()):  # leftovers of an unfinished or forced build
                if child.name != ".lock":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        start, cpu_start = time.monotonic(), cpu_seconds()
        outputs, stats = build(folder)
        seconds = round(time.monotonic() - start, 3)
        cpu = round(cpu_seconds() - cpu_start, 3)
        digests = {name: output_digest(folder / rel) for name, rel in outputs.items()}
        manifest = Manifest(
            stage,
            str(key),
            folder,
            dict(outputs),
            digests,
            dict(stats),
            seconds,
            cpu,
            cached=False,
            reason=reason,
            key_parts=dict(parts),
        )
        record = {k: v for k, v in manifest.to_dict().items() if k not in ("dir", "cached", "reason")}
        record["fingerprints"] = {name: fingerprint(folder / rel) for name, rel in outputs.items()}
        write_json(folder / "_manifest.json", record, indent=1, sort_keys=True)
        return manifest
    finally:
        (folder / ".lock").unlink(missing_ok=True)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads), of the child processes it has waited
    for, and of its live children so far (the verifier pool's workers outlive a stage; read from /proc
    where there is one). A stage's difference of two readings is then its own CPU, workers included.
    Not counted: processes that are not this one's descendants (the other ranks of a torchrun or
    deepspeed launch, Dask workers), and CPU of builds running at once in other threads of this process
    is counted in each."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + _live_children_cpu()


def _live_children_cpu() -> float:
    """CPU seconds of this process's live children, each with its own waited-for children (/proc, Linux)."""
    proc, me, total = Path("/proc"), str(os.getpid()), 0
    if not proc.is_dir():
        return 0.0
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) > 14 and fields[1] == me:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def output_digest(path: Path) -> str:
    """The digest of a stage output: a file's content, or a folder's tree without the RUN_RECORDS
    directly under it."""
    if path.is_dir():
        return tree_digest(path, skip_top=RUN_RECORDS)
    return file_digest(path)


def _try_lock(folder: Path) -> bool:
    """Take the folder's lock (creating the folder), or take over a stale one; False if held."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".lock"
    me = f"{socket.gethostname()} {os.getpid()}"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        if _lock_is_stale(lock):
            lock.unlink(missing_ok=True)
            return _try_lock(folder)
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(me)
    return True


def _lock_is_stale(lock: Path) -> bool:
    try:
        host, pid = lock.read_text().split()
    except (OSError, ValueError):
        return False  # being written right now
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # a zombie (exited, not reaped: e.g. a killed build under a parent that made itself a child subreaper,
    # as the verifier pool does) still answers kill(pid, 0); where /proc cannot tell, the holder lives
    from rlvrflow.verifiers.code.processes import zombie

    return zombie(int(pid), unreadable=False)
