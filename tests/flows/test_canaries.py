"""Reward canaries in the pipeline: a verifier that accepts everything stops `rlvrflow run` at attach."""

from __future__ import annotations

import json
import textwrap

import pytest

from rlvrflow.flows.cli import main

BROKEN_PLUGIN = textwrap.dedent('''
    """A user verifier with the bug the canaries exist for: it never looks at the answer."""
    from rlvrflow.verifiers.verdict import Verdict


    def lenient(response, reference, params):
        return Verdict(1.0, "correct", response[:20], "looks fine")


    def check_reference(reference, params):
        return None if reference.strip() else "empty reference"


    def solution_from_reference(reference, prompt):
        return f"Answer: {reference}"
''')


def _spec_with(toy_spec, verifier: str, extra: str = "") -> None:
    text = toy_spec.read_text().replace("verifier: math}", f"verifier: '{verifier}'}}")
    toy_spec.write_text(text + extra)


def test_a_broken_plugin_verifier_stops_the_run_at_attach(prefect_harness, toy_spec, tmp_path, capsys, monkeypatch):
    pkg = tmp_path / "plugins"
    pkg.mkdir()
    (pkg / "lenient_checks.py").write_text(BROKEN_PLUGIN)
    monkeypatch.syspath_prepend(str(pkg))
    _spec_with(toy_spec, "lenient_checks:lenient")
    out = tmp_path / "out"
    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 1
    printed = capsys.readouterr().out
    assert "stage 'attach' failed" in printed and "reward canaries FAILED" in printed
    assert "lenient_checks:lenient" in printed and "'empty'" in printed
    report = json.loads((out / "canary_report.json").read_text())
    assert report["ok"] is False
    failed = {f["canary"] for f in report["failed"]}
    assert {"empty", "infinity", "the row's own prompt", "another row's reference"} <= failed
    assert all(f["hits"] == f["rows"] for f in report["failed"])
    assert not list(out.glob("stages/sft/*")), "no training may start after a failed canary"


@pytest.mark.slow
def test_canaries_pass_on_the_math_verifier_and_land_in_the_attach_stats(toy_spec, tmp_path):
    from pathlib import Path

    from rlvrflow.flows import stages
    from rlvrflow.flows.spec import load_spec

    spec = load_spec(toy_spec)
    root = Path(tmp_path / "root")
    verified = stages.run("attach", spec, root, {"prepare": stages.run("prepare", spec, root, {})})
    canaries = verified.stats["canaries"]
    assert canaries["ok"] and canaries["rules"] == 1 and canaries["verdicts"] >= 40 * 45
    report = json.loads((root / "canary_report.json").read_text())
    assert report["rules"][0]["rows_probed"] == verified.stats["rows_kept"] == 40  # fewer than sample_rows: all


def test_a_plugin_adds_its_own_canaries(tmp_path, monkeypatch):
    from rlvrflow.verifiers import canary

    (tmp_path / "ticket_checks.py").write_text(
        textwrap.dedent("""
        from rlvrflow.verifiers.verdict import Verdict
        CANARIES = ["Status: unknown"]
        def canaries(reference, params):
            return [f"Ticket {reference} is open, closed and pending"]
        def verify_ticket(response, reference, params):
            ok = "pending" in response  # the bug its own canary catches
            return Verdict(float(ok), "correct" if ok else "wrong")
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pairs = dict(canary.battery("ticket_checks:verify_ticket", {}, "T-7"))
    assert pairs["plugin canary 0"] == "Status: unknown"
    assert pairs["plugin canary for this row 0"] == "Ticket T-7 is open, closed and pending"

    class Rule:
        category, verifier = "tickets", "ticket_checks:verify_ticket"

    rows = [
        {
            "id": f"r{i}",
            "category": "tickets",
            "prompt": "Which status?",
            "reference": f"T-{i}",
            "verifier": Rule.verifier,
            "verifier_params": "{}",
        }
        for i in range(5)
    ]
    report = canary.probe(rows, [Rule], canary.CanaryConfig(), workers=1)
    assert not report["ok"] and {f["canary"] for f in report["failed"]} == {"plugin canary for this row 0"}
