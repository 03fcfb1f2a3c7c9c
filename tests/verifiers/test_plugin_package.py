"""A real verifier plugin: examples/plugin_verifier is pip-installed (offline, into a temporary
--target folder, so the test environment is left as it was) and its entry point is found by the
`rlvrflow verify` command and by attach in fresh processes, with PYTHONPATH pointing there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "examples" / "plugin_verifier"
REF = json.dumps({"ticket": "TCK-10442", "status": "resolved"})


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The plugin installed with pip into its own folder (nothing touches the test environment)."""
    work = tmp_path_factory.mktemp("plugin")
    src, site = work / "src", work / "site"
    # a copy, so the build's egg-info and build/ folders never land in the repository
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            "--target",
            str(site),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip install of the plugin failed (setuptools must be installed):\n{done.stderr}"
    entry_points = list(site.glob("rlvrflow_ticket_checks-*.dist-info/entry_points.txt"))
    assert entry_points and "ticket_status = ticket_checks.status:verify_ticket_status" in entry_points[0].read_text()
    return site


def run(args: list[str], site: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_rlvrflow_verify_finds_the_installed_plugin(plugin_site, tmp_path):
    cli = Path(sys.executable).parent / "rlvrflow"
    assert cli.is_file(), "the rlvrflow console script is missing; run `make setup` (pip install -e .)"
    rows = [
        ("Ticket TCK-10442 is now resolved.", REF),
        ("Good news: TCK-10442 has been solved!", REF),
        ("Ticket TCK-10442 has been closed.", REF),
        ("Ticket TCK-10442 is now resolved (TCK-10443 was closed).", REF),
        ("Status: resolved. Or maybe it is now pending.", REF),
        ("We are looking into TCK-10442.", REF),
        ("Ticket TCK-10442 is now resolved.", json.dumps({"ticket": "10442", "status": "resolved"})),
    ]
    src, out = tmp_path / "replies.jsonl", tmp_path / "verdicts.jsonl"
    src.write_text(
        "".join(json.dumps({"id": i, "response": r, "reference": ref}) + "\n" for i, (r, ref) in enumerate(rows)),
        encoding="utf-8",
    )
    args = [str(cli), "verify", "--verifier", "ticket_status", "--workers", "1", str(src), str(out)]

    missing = run(args, None, tmp_path)  # not installed: the name is unknown
    assert missing.returncode == 2 and "unknown verifier 'ticket_status'" in missing.stderr

    done = run(args, plugin_site, tmp_path)
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(g["id"], g["status"], g["score"]) for g in got] == [
        (0, "correct", 1.0),
        (1, "correct", 1.0),
        (2, "wrong", 0.0),
        (3, "wrong", 0.0),
        (4, "wrong", 0.0),
        (5, "unparsed", 0.0),
        (6, "error", 0.0),
    ]
    assert "status closed, expected resolved" in got[2]["detail"] and "no other" in got[3]["detail"]


ATTACH = """
import json, sys
import polars as pl
from rlvrflow.verifiers import VerifierConfig, attach, available
assert "ticket_status" in available()
cfg = VerifierConfig.model_validate({"rules": [{"category": "tickets", "verifier": "ticket_status"}],
                                  "answer_only_targets": True})  # so the plugin's solution hook runs
df = pl.DataFrame({"id": ["t1", "t2", "t3"], "category": ["tickets"] * 3, "prompt": ["Update the customer."] * 3,
                   "reference": [sys.argv[1], json.dumps({"ticket": "TCK-7", "status": "resolved"}), sys.argv[1]],
                   "solution": ["", "", "TCK-10442 is now open."]})
kept, rejects, stats = attach(df, cfg, ".", workers=1)
print(json.dumps({"kept": kept.select("id", "solution").to_dicts(),
                  "rejects": rejects.select("id", "reason", "detail").to_dicts()}))
"""


def test_attach_runs_the_plugins_hooks(plugin_site, tmp_path):
    done = run([sys.executable, "-c", ATTACH, REF], plugin_site, tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["kept"] == [{"id": "t1", "solution": "Your ticket TCK-10442 is now resolved."}]
    rejects = {r["id"]: r for r in got["rejects"]}
    assert set(rejects) == {"t2", "t3"} and {r["reason"] for r in rejects.values()} == {"reference_self_check"}
    assert "'TCK-7' is not an ID like TCK-10442" in rejects["t2"]["detail"]
    assert "status open, expected resolved" in rejects["t3"]["detail"]
