"""The on-disk queue between the GRPO trainer and its rollout generator process (async rollouts).

    OUT/rollout_queue/<epoch>/
        weights/v000012.pt      the policy after 12 updates, {name: tensor} (LoRA: merged); the newest only
        requests/r000031.json   prompts the trainer's sampler drew: {seq, ids, seed, min_version}
        results/r000031.json    the generator's scored groups for request 31 and the policy version that made them
        generator_setup.pkl     what the generator process is started with (model, config, tasks)
        generator.pid           the generator process's pid
        error.txt               the generator's traceback, when it failed

Every file is written under a temporary name (`.tmp-...`) and renamed into place, so a reader sees a
whole file or none. A trainer process opens a fresh epoch folder and removes the others (counting the
groups of their results, which nobody will train): a generator left over from a killed trainer writes
into its own epoch's folder, never into the new one, and stops when that folder is gone. Consuming a
request removes its request file before its result, so the generator never sees a consumed request
as unanswered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path

QUEUE_DIR = "rollout_queue"
GENERATOR_PID = "generator.pid"
_GONE = ".gone-"  # an epoch folder being removed
_SEQ = re.compile(r"^r(\d{6,})\.json$")
_VERSION = re.compile(r"^v(\d{6,})\.pt$")


class RolloutQueue:
    """One epoch's folder of the queue: weights, requests, results, the generator's error."""

    def __init__(self, root: str | Path, epoch: str) -> None:
        self.dir = Path(root) / epoch
        self.epoch = epoch

    @classmethod
    def fresh(cls, root: str | Path) -> tuple["RolloutQueue", int]:
        """A new epoch under `root` after removing the others; returns it and the groups their results held."""
        root = Path(root)
        discarded = 0
        for old in sorted(root.iterdir()) if root.is_dir() else []:
            if old.is_dir() and not old.name.startswith(_GONE):
                discarded += RolloutQueue(root, old.name).result_groups()
            RolloutQueue(root, old.name).remove() if old.is_dir() else old.unlink(missing_ok=True)
        queue = cls(root, uuid.uuid4().hex[:12])
        for sub in ("weights", "requests", "results"):
            (queue.dir / sub).mkdir(parents=True)
        return queue, discarded

    def exists(self) -> bool:
        return self.dir.is_dir()

    # ----- weights: the trainer publishes, the generator loads the newest
    def publish(self, version: int, weights: dict) -> None:
        import torch

        final = self.dir / "weights" / f"v{version:06d}.pt"
        tmp = final.with_name(f".tmp-{final.name}.{os.getpid()}")
        torch.save(weights, tmp)
        os.replace(tmp, final)
        for path in (self.dir / "weights").iterdir():
            m = _VERSION.match(path.name)
            if m and int(m.group(1)) < version:
                path.unlink(missing_ok=True)  # a generator that opened it keeps reading it

    def newest_weights(self) -> tuple[int, Path] | None:
        found = [(int(m.group(1)), p) for p in (self.dir / "weights").iterdir() if (m := _VERSION.match(p.name))]
        return max(found) if found else None

    # ----- requests and results, keyed by the request's sequence number
    def put_request(self, request: dict) -> None:
        _write(self.dir / "requests" / f"r{request['seq']:06d}.json", json.dumps(request))

    def put_result(self, seq: int, result: dict) -> None:
        _write(self.dir / "results" / f"r{seq:06d}.json", json.dumps(result))

    def read_request(self, seq: int) -> dict | None:
        return _read_json(self.dir / "requests" / f"r{seq:06d}.json")

    def read_result(self, seq: int) -> dict | None:
        return _read_json(self.dir / "results" / f"r{seq:06d}.json")

    def unanswered(self) -> list[int]:
        """Sequence numbers of the requests without a result, oldest first."""
        done = set(_seqs(self.dir / "results"))
        return [s for s in _seqs(self.dir / "requests") if s not in done]

    def consume(self, seq: int) -> None:
        (self.dir / "requests" / f"r{seq:06d}.json").unlink(missing_ok=True)
        (self.dir / "results" / f"r{seq:06d}.json").unlink(missing_ok=True)

    def result_groups(self) -> int:
        """Groups in the results on disk (for counting what is thrown away)."""
        total = 0
        for seq in _seqs(self.dir / "results"):
            result = self.read_result(seq)
            total += len(result["groups"]) if result else 0
        return total

    # ----- the generator's failure, for the trainer to raise
    def write_error(self, text: str) -> None:
        _write(self.dir / "error.txt", text)

    def write_pid(self, pid: int) -> None:
        _write(self.dir / GENERATOR_PID, str(pid))

    def error(self) -> str | None:
        path = self.dir / "error.txt"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def remove(self) -> None:
        """Rename the folder away first (atomic: a generator sees it gone at once and cannot write into it),
        then delete it."""
        gone = self.dir.with_name(f"{_GONE}{self.dir.name}")
        try:
            os.replace(self.dir, gone)
        except FileNotFoundError:
            return
        shutil.rmtree(gone, ignore_errors=True)


def _write(path: Path, text: str) -> None:
    """Temp name, then rename. Never creates folders: into a removed epoch it raises FileNotFoundError."""
    tmp = path.with_name(f".tmp-{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _seqs(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _SEQ.match(p.name)))


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
