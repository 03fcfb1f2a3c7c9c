"""The content-hash stage cache: reuse on unchanged inputs, rebuild on change or force, safe under concurrency."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from rlvrflow.flows.cache import build_stage, file_digest, stage_dir, stage_key


def _builder(calls: list, payload: str = "x"):
    def build(out: Path):
        calls.append(out)
        (out / "data.txt").write_text(payload)
        return {"data": "data.txt"}, {"rows_in": 1}

    return build


def test_second_build_is_cached_and_force_rebuilds(tmp_path):
    calls: list = []
    first = build_stage(tmp_path, "s", "k1", _builder(calls))
    second = build_stage(tmp_path, "s", "k1", _builder(calls))
    assert len(calls) == 1 and not first.cached and second.cached
    assert second.path("data").read_text() == "x"
    assert second.digests == first.digests
    third = build_stage(tmp_path, "s", "k1", _builder(calls, "y"), force=True)
    assert len(calls) == 2 and not third.cached and third.path("data").read_text() == "y"


def test_a_build_records_its_cpu_seconds_with_a_waited_child_and_the_cache_keeps_them(tmp_path):
    import subprocess
    import sys
    import time

    def build(out: Path):
        spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
        subprocess.run([sys.executable, "-c", spin], check=True)
        time.sleep(0.3)  # wall, not CPU
        (out / "data.txt").write_text("x")
        return {"data": "data.txt"}, {}

    built = build_stage(tmp_path, "s", "k", build)
    # the child's 0.4 s of spinning counts; the sleep does not (the wall seconds hold both)
    assert built.cpu_seconds is not None and 0.4 <= built.cpu_seconds < built.seconds
    assert built.seconds >= 0.7
    again = build_stage(tmp_path, "s", "k", build)
    assert again.cached and again.cpu_seconds == built.cpu_seconds and again.seconds == built.seconds


def test_a_build_counts_the_cpu_of_a_worker_that_outlives_it_and_not_its_earlier_work(tmp_path):
    # the verifier pool's workers start before a stage and end after it: only their CPU during the build
    import subprocess
    import sys

    spin = (
        "import sys, time\n"
        "def spin(s):\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < s: pass\n"
        "spin(0.6)\n"  # before the stage: not its CPU
        "print('ready', flush=True); sys.stdin.readline()\n"
        "spin(0.4)\n"
        "print('done', flush=True); sys.stdin.readline()\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "ready"

        def build(out: Path):
            worker.stdin.write("go\n")
            worker.stdin.flush()
            assert worker.stdout.readline().strip() == "done"
            (out / "data.txt").write_text("x")
            return {"data": "data.txt"}, {}

        built = build_stage(tmp_path, "s", "k", build)
    finally:
        worker.stdin.close()
        worker.wait()
    # the worker's 0.4 s during the build, read from clock-tick CPU counters (1/100 s each side of the build,
    # so up to 0.02 s short), and not its 0.6 s before it
    assert 0.38 <= built.cpu_seconds < 0.9


def test_key_follows_file_content_and_config(tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("a")
    k1 = stage_key("s", {"f": file_digest(f), "cfg": {"n": 1}}, ["flows"])
    f.write_text("b")
    k2 = stage_key("s", {"f": file_digest(f), "cfg": {"n": 1}}, ["flows"])
    k3 = stage_key("s", {"f": file_digest(f), "cfg": {"n": 2}}, ["flows"])
    assert len({k1, k2, k3}) == 3
    assert stage_key("s", {"f": file_digest(f), "cfg": {"n": 2}}, ["flows"]) == k3


def test_failed_build_leaves_no_manifest_and_is_retried(tmp_path):
    def boom(out: Path):
        (out / "partial.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_stage(tmp_path, "s", "k", boom)
    folder = stage_dir(tmp_path, "s", "k")
    assert not (folder / "_manifest.json").exists() and not (folder / ".lock").exists()
    calls: list = []
    m = build_stage(tmp_path, "s", "k", _builder(calls))
    assert len(calls) == 1 and not (folder / "partial.txt").exists() and m.path("data").exists()


def test_deleted_output_invalidates_the_cache(tmp_path):
    calls: list = []
    m = build_stage(tmp_path, "s", "k", _builder(calls))
    m.path("data").unlink()
    build_stage(tmp_path, "s", "k", _builder(calls))
    assert len(calls) == 2


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    folder = stage_dir(tmp_path, "s", "k")
    folder.mkdir(parents=True)
    import socket
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (folder / ".lock").write_text(f"{socket.gethostname()} {dead}")
    calls: list = []
    build_stage(tmp_path, "s", "k", _builder(calls), wait_seconds=5)
    assert len(calls) == 1


def test_a_lock_held_by_a_process_that_exited_unreaped_is_taken_over(tmp_path, zombie):
    """A zombie still answers kill(pid, 0); its lock is as stale as a gone process's."""
    import socket

    folder = stage_dir(tmp_path, "s", "k")
    folder.mkdir(parents=True)
    (folder / ".lock").write_text(f"{socket.gethostname()} {zombie}")
    calls: list = []
    build_stage(tmp_path, "s", "k", _builder(calls), wait_seconds=5)
    assert len(calls) == 1


def test_concurrent_builders_share_one_build(tmp_path):
    calls: list = []
    gate = threading.Event()

    def slow(out: Path):
        calls.append(out)
        gate.wait(5)
        (out / "data.txt").write_text("x")
        return {"data": "data.txt"}, {}

    results = []
    threads = [threading.Thread(target=lambda: results.append(build_stage(tmp_path, "s", "k", slow))) for _ in range(3)]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.05)
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 3
    assert sum(not r.cached for r in results) == 1
    manifest = json.loads((stage_dir(tmp_path, "s", "k") / "_manifest.json").read_text())
    assert manifest["outputs"] == {"data": "data.txt"} and os.path.exists(results[0].path("data"))


def test_a_build_that_finished_while_this_one_waited_for_the_lock_is_reused(tmp_path, monkeypatch):
    """The race the concurrent test hit under load: the other builder writes its manifest and releases
    the lock between this builder's manifest check and its lock. The check is repeated under the lock."""
    import rlvrflow.flows.cache as cache

    calls: list = []
    build_stage(tmp_path, "s", "k", _builder(calls))
    real, seen = cache.read_manifest, []

    def stale_first(folder):  # the first look happened before the other build's manifest existed
        seen.append(folder)
        return None if len(seen) == 1 else real(folder)

    monkeypatch.setattr(cache, "read_manifest", stale_first)
    again = build_stage(tmp_path, "s", "k", _builder(calls))
    assert len(calls) == 1 and again.cached and len(seen) == 2
    assert not (stage_dir(tmp_path, "s", "k") / ".lock").exists()


def test_a_rebuild_says_which_key_part_changed(tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("a")

    def key(n: int):
        return stage_key("s", {"f": file_digest(f), "cfg": {"n": n}}, ["flows"])

    calls: list = []
    first = build_stage(tmp_path, "s", key(1), _builder(calls))
    assert first.reason == "first build of this stage here"
    assert set(first.key_parts) == {"f", "cfg", "code:flows"}
    assert build_stage(tmp_path, "s", key(1), _builder(calls)).reason == ""  # cached
    changed = build_stage(tmp_path, "s", key(2), _builder(calls))
    assert changed.reason.startswith("cfg changed since the newest earlier build") and first.key in changed.reason
    f.write_text("b")
    both = build_stage(tmp_path, "s", key(1), _builder(calls))
    assert both.reason.startswith("cfg, f changed")
    assert build_stage(tmp_path, "s", key(1), _builder(calls), force=True).reason == "forced"
    both.path("data").unlink()
    assert build_stage(tmp_path, "s", key(1), _builder(calls)).reason == "the earlier build's outputs are missing"
    assert len(calls) == 5


def _parquet_builder(calls: list):
    import polars as pl

    def build(out: Path):
        calls.append(out)
        pl.DataFrame({"id": [f"r{i}" for i in range(2000)], "x": list(range(2000))}).write_parquet(out / "rows.parquet")
        return {"rows": "rows.parquet"}, {"rows_in": 2000}

    return build


def test_a_truncated_or_altered_output_is_rebuilt_not_trusted(tmp_path):
    import polars as pl

    calls: list = []
    first = build_stage(tmp_path, "s", "k", _parquet_builder(calls))
    path = first.path("rows")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a parquet cut in half
    again = build_stage(tmp_path, "s", "k", _parquet_builder(calls))
    assert len(calls) == 2 and not again.cached
    assert again.reason.startswith("the earlier build is corrupted (rows: content differs")
    assert pl.read_parquet(again.path("rows")).height == 2000

    flipped = bytearray(path.read_bytes())  # same size, one byte changed in place
    flipped[len(flipped) // 2] ^= 0xFF
    path.write_bytes(bytes(flipped))
    build_stage(tmp_path, "s", "k", _parquet_builder(calls))
    assert len(calls) == 3

    untouched = build_stage(tmp_path, "s", "k", _parquet_builder(calls))
    assert untouched.cached and len(calls) == 3
    os.utime(path)  # touched, not changed: hashed again, found equal, still trusted
    assert build_stage(tmp_path, "s", "k", _parquet_builder(calls)).cached and len(calls) == 3


def test_a_manifest_that_lies_or_is_cut_short_is_rebuilt(tmp_path):
    calls: list = []
    m = build_stage(tmp_path, "s", "k", _builder(calls))
    manifest = m.dir / "_manifest.json"
    record = json.loads(manifest.read_text())
    record["digests"]["data"] = "0" * 64
    record["fingerprints"] = {}
    manifest.write_text(json.dumps(record))
    assert not build_stage(tmp_path, "s", "k", _builder(calls)).cached and len(calls) == 2
    manifest.write_text(manifest.read_text()[:40])  # half a JSON file
    rebuilt = build_stage(tmp_path, "s", "k", _builder(calls))
    assert not rebuilt.cached and len(calls) == 3 and "manifest is unreadable" in rebuilt.reason


def test_a_rebuild_to_the_same_weights_keeps_the_model_digest_whatever_its_timings(tmp_path):
    """The SFT folder's run records (seconds, per-step timings, TensorBoard events) are not part of
    the digest downstream keys hash; its weights, config and tokenizer are."""

    def sft_like(weights: bytes, seconds: float):
        def build(out: Path):
            model = out / "sft"
            (model / "tb").mkdir(parents=True)
            (model / "model.safetensors").write_bytes(weights)
            (model / "config.json").write_text('{"hidden_size": 8}')
            (model / "sft_stats.json").write_text(json.dumps({"steps": 4, "seconds": seconds}))
            (model / "sft_metrics.jsonl").write_text(json.dumps({"step": 3, "step_seconds": seconds / 4}) + "\n")
            (model / "tb" / "events.out.tfevents.1").write_bytes(str(seconds).encode())
            return {"model": "sft"}, {}

        return build

    first = build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x02", 12.5))
    again = build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x02", 40.0), force=True)
    assert not again.cached and again.digests == first.digests
    other = build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x03", 12.5), force=True)
    assert other.digests != first.digests

    (other.path("model") / "config.json").write_text('{"hidden_size": 16}')  # the model edited in place
    assert not build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x03", 12.5)).cached
    # a run record edited after the build is still the same model: the stage stays cached
    again = build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x03", 12.5))
    (again.path("model") / "sft_stats.json").write_text("{}")
    assert build_stage(tmp_path, "sft", "k", sft_like(b"\x01\x03", 99.0)).cached


def test_only_the_records_at_the_top_of_an_output_folder_are_left_out(tmp_path):
    from rlvrflow.flows.cache import output_digest

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "sft_stats.json").write_text("1")
    before = output_digest(tmp_path)
    (tmp_path / "sub" / "sft_stats.json").write_text("2")  # a file of that name deeper down is content
    assert output_digest(tmp_path) != before


def test_a_manifest_written_with_the_whole_tree_s_digest_stays_valid(tmp_path):
    """Caches built before run records were left out recorded the whole folder's digest; their outputs
    are checked against it, not rebuilt as corrupted."""
    from rlvrflow.flows.cache import tree_digest

    def build(out: Path):
        (out / "sft").mkdir()
        (out / "sft" / "model.safetensors").write_bytes(b"\x01")
        (out / "sft" / "sft_stats.json").write_text('{"seconds": 3}')
        return {"model": "sft"}, {}

    first = build_stage(tmp_path, "sft", "k", build)
    manifest = first.dir / "_manifest.json"
    data = json.loads(manifest.read_text())
    data["digests"]["model"] = tree_digest(first.path("model"))  # as the older code wrote it
    manifest.write_text(json.dumps(data))
    os.utime(first.path("model") / "model.safetensors")  # a copied folder: its fingerprint changed
    again = build_stage(tmp_path, "sft", "k", build)
    assert again.cached and again.digests["model"] == tree_digest(first.path("model"))
    (first.path("model") / "model.safetensors").write_bytes(b"\x02")  # changed weights are still caught
    assert not build_stage(tmp_path, "sft", "k", build).cached
