"""`rlvrflow run`'s terminal keeps rlvrflow's lines and every warning; third-party INFO lines,
transformers' bars and advisories go to the run's log file (flows/console.py). The CLI's own check,
on a real run's stderr, is in test_concurrent_runs.py."""

from __future__ import annotations

import io
import logging
import sys

from transformers.utils import logging as hf_logging

from rlvrflow.flows.console import ADVISORIES, quiet_console


def test_third_party_info_bars_and_advisories_reach_the_file_only(tmp_path, monkeypatch):
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    console = logging.StreamHandler(sys.stderr)  # where Prefect puts its console handler
    logging.root.addHandler(console)
    gx = logging.getLogger("great_expectations.data_context.types.base")
    monkeypatch.setattr(gx, "level", logging.INFO)  # as Great Expectations sets it
    ours = logging.getLogger("rlvrflow.training")
    monkeypatch.setattr(ours, "level", logging.INFO)
    monkeypatch.setattr(logging.getLogger("rlvrflow"), "handlers", [])  # Prefect's API handler: no flow run here
    modeling = hf_logging.get_logger("transformers.modeling_utils")
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    hf_logging.get_verbosity()  # transformers' own stderr handler is on from here
    hf_root = logging.getLogger("transformers")
    hf_before = (list(hf_root.handlers), hf_root.propagate)
    log = tmp_path / "run.log"
    try:
        with quiet_console(log):
            gx.info("Created temporary directory '/tmp/x' for ephemeral docs site")
            ours.info("sft step 1/4 loss 3.7")
            modeling.warning(ADVISORIES[0][1] + " and covariance.")
            modeling.warning("Some weights of the checkpoint were not used")
            for _ in hf_logging.tqdm(range(3), desc="Loading weights"):
                pass
        gx.info("after the run: Prefect's console shows what it showed before")
    finally:
        logging.root.removeHandler(console)
        if not bars_were_on:
            hf_logging.disable_progress_bar()
    shown, kept = terminal.getvalue(), log.read_text()
    assert "sft step 1/4" in shown and "Some weights of the checkpoint were not used" in shown
    for noise in ("Created temporary directory", "multivariate normal", "Loading weights"):
        assert noise not in shown, noise
        assert noise in kept, noise
    assert "sft step 1/4" in kept and "Some weights" in kept and "3/3" in kept
    assert "after the run" in shown and "after the run" not in kept
    assert (hf_root.handlers, hf_root.propagate) == hf_before and console.filters == []
