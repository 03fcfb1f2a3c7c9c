"""The scheduled-retraining walkthrough against a real Prefect server (SQLite, loopback).

scripts/prefect_local.sh starts the server, creates the process pool, deploys prefect.yaml and
starts a worker; then `prefect deployment run 'retrain/smoke' --watch` runs the full chain on the
retail sample. A second run with nothing changed reuses every stage; both times are printed.
Every process the script started is stopped at the end, pass or fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "prefect_local.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sample_domain(root: Path) -> Path:
    """A copy of the retail spec with freshly generated raw logs, shop.db and eval sets beside it (as `make sample`)."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "retail" / "spec.yaml", root / "spec.yaml")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "retail" / "generate.py"),
            "--out",
            str(root / "raw"),
            "--seed",
            "0",
            "--rows",
            "600",
            "--db",
            str(root / "shop.db"),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "retail" / "eval_sets.py"),
            "--out",
            str(root / "eval"),
            "--seed",
            "0",
        ],
        check=True,
        capture_output=True,
    )
    return root / "spec.yaml"


def _alive(pid_file: Path) -> int | None:
    if not pid_file.is_file():
        return None
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


class _Receiver:
    """A loopback webhook that keeps the JSON bodies POSTed to it (the owner's alert channel)."""

    def __init__(self):
        import http.server
        import threading

        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, text: str, timeout: float = 120) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [m for m in self.received if text in m.get("subject", "")]
            if hits:
                return hits
            time.sleep(1)
        return []


def _artifact_images(port: int, key: str) -> list[tuple[str, bool, int]]:
    """(src prefix, complete, natural width) of each image on the newest `key` artifact's page of the
    Prefect UI, as headless chromium (the system's, driven by playwright) renders it."""
    import urllib.request

    from playwright.sync_api import sync_playwright

    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser_path, "chromium not found: scripts/setup.sh installs it (apt-get install chromium)"
    query = json.dumps({"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/artifacts/filter", data=query, headers={"Content-Type": "application/json"}
    )
    (artifact,) = json.loads(urllib.request.urlopen(request, timeout=30).read())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(
                f"http://127.0.0.1:{port}/artifacts/artifact/{artifact['id']}", wait_until="networkidle", timeout=90_000
            )
            page.wait_for_function("document.images.length > 0", timeout=30_000)
            return page.evaluate("[...document.images].map(i => [i.src.slice(0, 21), i.complete, i.naturalWidth])")
        finally:
            browser.close()


def _flow_run_processes(home: Path) -> list[int]:
    """Flow-run processes the test's worker started (their environment holds this test's PREFECT_HOME)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = environ.read_bytes().split(b"\0")
        except OSError:
            continue
        if f"PREFECT_HOME={home}".encode() in env and any(e.startswith(b"PREFECT__FLOW_RUN_ID=") for e in env):
            found.append(int(environ.parent.name))
    return found


@pytest.mark.prefect_server
@pytest.mark.slow
def test_smoke_deployment_on_a_real_server(tmp_path):
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_PORT=str(_free_port()), DO_NOT_TRACK="1")
    spec = _sample_domain(tmp_path / "retail")
    out = tmp_path / "runs" / "smoke"
    run_args = ["bash", str(SCRIPT), "run", "retrain/smoke", "--param", f"spec_path={spec}", "--param", f"out={out}"]

    def sh(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SCRIPT), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
        )

    def worker_log() -> str:
        return (home / "worker.log").read_text()[-6000:] if (home / "worker.log").is_file() else ""

    try:
        for step in ("server", "pool", "deploy", "worker"):
            done = sh(step)
            assert done.returncode == 0, f"prefect_local.sh {step}:\n{done.stdout}\n{done.stderr}"
        # the nightly deployment exists with its cron; pause it so no scheduled run starts during the test
        schedules = sh("cli", "deployment", "schedule", "ls", "retrain/scheduled")
        assert "0 3 * * *" in schedules.stdout, schedules.stdout + schedules.stderr
        paused = sh("cli", "--no-prompt", "deployment", "schedule", "pause", "--all")
        assert paused.returncode == 0, paused.stdout + paused.stderr
        # the owner's alerts: a failed night and a kept champion reach this webhook
        receiver = _Receiver()
        alerts = sh("alerts", "--webhook", receiver.url, "--allow-private")
        assert alerts.returncode == 0 and alerts.stdout.count("automation: rlvrflow: ") == 2, (
            alerts.stdout + alerts.stderr
        )

        start = time.monotonic()
        first = subprocess.run(run_args, env=env, cwd=REPO, capture_output=True, text=True, timeout=420)
        first_s = time.monotonic() - start
        assert first.returncode == 0, (
            f"smoke run failed:\n{first.stdout[-4000:]}\n{first.stderr[-4000:]}\n" + worker_log()
        )
        assert "Completed" in first.stdout
        latest = json.loads((out / "latest.json").read_text())
        report = json.loads(Path(latest["report"]).read_text())
        assert Path(latest["run_dir"]).parent == out / "runs" and latest["stages_cached"] == 0
        assert Path(report["checkpoint"]).is_dir() and (Path(report["checkpoint"]) / "config.json").is_file()
        assert {"baseline", "final", "evals", "tiers", "stages"} <= set(report)
        assert not any(st["cached"] for st in report["stages"].values())
        # the run's figures show in the UI's artifact page (inlined, not file:// links a browser refuses)
        images = _artifact_images(int(env["PREFECT_PORT"]), "retail-figures")
        assert len(images) == 2 and all(
            src == "data:image/png;base64" and done and width > 100 for src, done, width in images
        ), images

        # two reruns at once with nothing changed: every stage comes from the cache, each run has its folder
        start = time.monotonic()
        procs = [
            subprocess.Popen(run_args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        again_s = time.monotonic() - start
        assert all(p.returncode == 0 for p in procs), "\n".join(o[-3000:] for o in outputs) + worker_log()
        run_dirs = sorted(d for d in (out / "runs").iterdir() if d.name != Path(latest["run_dir"]).name)
        assert len(run_dirs) == 2
        flow_s = []
        for run_dir in run_dirs:
            again = json.loads((run_dir / "report.json").read_text())
            flow_s.append(json.loads((run_dir / "run.json").read_text())["seconds"])
            assert again["run_dir"] == str(run_dir)
            # every stage of the first run comes from the cache (which stage, and why it was rebuilt); new are
            # drift and compare, against the champion the first run became
            assert all(st["cached"] for name, st in again["stages"].items() if name not in ("drift", "compare")), {
                name: st["reason"] for name, st in again["stages"].items() if not st["cached"]
            }
            assert {"drift", "compare"} <= set(again["stages"]) and again["promotion"]["verdict"] == "not promoted"
            assert again["checkpoint"] == report["checkpoint"]
        kept = receiver.wait_for("kept its champion")
        assert kept and "was not promoted: gain +0.0 points over the champion" in kept[0]["body"], receiver.received
        broken = subprocess.run(
            [
                "bash",
                str(SCRIPT),
                "run",
                "retrain/smoke",
                "--param",
                f"spec_path={tmp_path / 'missing.yaml'}",
                "--param",
                f"out={out}",
            ],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert broken.returncode != 0
        failed = receiver.wait_for("failed")
        assert failed and "ended Failed" in failed[0]["body"] and "missing.yaml" in failed[0]["body"], receiver.received
        print(
            f"\nretrain/smoke on a real server: first run {first_s:.1f} s end to end, {latest['seconds']:.1f} s "
            f"in the flow; two concurrent reruns with nothing changed {again_s:.1f} s end to end together, "
            f"{max(flow_s):.1f} s in the flow each at most ({max(flow_s) / latest['seconds']:.0%} of the first); "
            "the rest is Prefect starting the flow-run processes"
        )
    finally:
        stopped = sh("stop", timeout=90)
        orphans = _flow_run_processes(home)  # a run still going when the test failed outlives its worker
        for pid in orphans:
            os.kill(pid, 9)
        assert _alive(home / "worker.pid") is None and _alive(home / "server.pid") is None, stopped.stdout
        assert not orphans, f"flow-run processes outlived the worker: {orphans}"
