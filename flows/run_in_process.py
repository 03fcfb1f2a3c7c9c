"""`rlvrflow run`: the retrain flow in this process, on Prefect's ephemeral API (no server to start).

Prefect keeps its state in `OUT/.prefect` unless PREFECT_HOME is set, and with PREFECT_API_URL set
(a running `prefect server`) the run shows in that server's UI instead. Telemetry is off.

Two `rlvrflow run` on the same OUT take turns: each holds `OUT/.run.lock` (an flock, released by
the kernel when the process ends, however it ends) for its whole run, so they never start two
Prefect API servers on one `OUT/.prefect` database; the second then reuses every stage the first
built (the stage cache's own per-stage locks also cover processes that share a cache otherwise).

The terminal shows rlvrflow's own lines, bars and every warning; other libraries' INFO lines and
bars go to the run's log file (flows/console.py), `run.log` in the run folder (in OUT while the run
runs, and there for good when it fails).
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_LOG = "run.log"  # written to OUT while the run runs, then moved into its run folder

PREFECT_ENV_DEFAULTS = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # the libraries log under "rlvrflow.*" (SFT/GRPO progress, sampler fallbacks, re-tiering): Prefect
    # sends the loggers named here to the run's logs in the UI; flows.common sets their level to INFO
    "PREFECT_LOGGING_EXTRA_LOGGERS": "rlvrflow",
}


def prefect_environment(out: Path) -> None:
    """Set the environment Prefect reads at import: a home inside OUT, telemetry off, patient startup."""
    os.environ.setdefault("PREFECT_HOME", str((out / ".prefect").resolve()))
    for key, value in PREFECT_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)


@dataclass
class RunOutcome:
    """What `rlvrflow run` prints: success, where the report is, the final and the best checkpoint, the
    SFT-vs-final table, the eval matrix, the run doctor's findings, timing."""

    ok: bool
    seconds: float
    message: str = ""
    kind: str = "data"  # the failure's kind (flows/errors.py) when not ok
    result: dict[str, Any] = field(default_factory=dict)
    previous: dict[str, Any] = field(default_factory=dict)  # OUT/latest.json before this run
    log: str = ""  # the run's log file: third-party lines and bars the terminal leaves out (flows/console.py)

    def summary(self, domain: str) -> str:
        if not self.ok:
            return f"retrain FAILED for {domain} after {self.seconds:.1f} s:\n{self.message}\nlog: {self.log}"
        r = self.result
        stages = r.get("stages", {})
        cached = [name for name, st in stages.items() if st.get("cached")]
        lines = [
            f"retrain finished for {domain} in {self.seconds:.1f} s ({r.get('seconds', '?')} s in the flow; "
            f"{len(cached)}/{len(stages)} stages reused from the cache)"
        ]
        lines += self._versus_previous()
        if cached:
            lines += [f"  recomputed {name}: {st.get('reason')}" for name, st in stages.items() if not st.get("cached")]
        lines += [
            f"run folder: {r.get('run_dir')}",
            f"report:     {r.get('report')}",
            f"log:        {self.log}",
            f"checkpoint: {r.get('checkpoint')} (final of {str(r.get('algorithm', 'grpo')).upper()})",
        ]
        if r.get("best"):
            lines.append(r["best"])
        if r.get("registered"):
            lines.append(r["registered"])
        for key in ("comparison", "matrix", "doctor", "warnings"):  # SFT vs final; every model; advice; warnings
            if r.get(key):
                lines += ["", r[key]]
        if r.get("gain"):  # last, where a reader of the demo looks first
            lines += ["", r["gain"]]
        return "\n".join(lines)

    def _versus_previous(self) -> list[str]:
        """The previous run's flow time beside this one's (a rerun with nothing changed: a fraction)."""
        before, now = self.previous.get("seconds"), self.result.get("seconds")
        if not before or now is None:
            return []
        return [
            f"previous run in this folder: {before:.1f} s in the flow ({self.previous.get('stages_cached', '?')}/"
            f"{self.previous.get('stages', '?')} stages reused); this run: {now:.1f} s, {now / before:.0%} of that"
        ]


@contextmanager
def run_lock(out: Path):
    """Hold OUT/.run.lock for a whole run; wait (saying for whom) while another run holds it."""
    path = out / ".run.lock"
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            sys.stderr.write(f"rlvrflow run: waiting for the run already using {out} ({holder}) to finish\n")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_local(
    spec_path: str | Path,
    out: str | Path,
    force: bool = False,
    smoke: bool = False,
    runner: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run the retrain flow here; a failed run comes back as `ok=False` with the flow's message."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    prefect_environment(out)
    with run_lock(out):
        from rlvrflow.flows.artifacts import read_json
        from rlvrflow.flows.console import quiet_console
        from rlvrflow.flows.retrain import retrain  # imports Prefect, which puts its console handler on

        previous = read_json(out / "latest.json")
        log = out / RUN_LOG
        start = time.monotonic()
        with quiet_console(log), _server_start_named():
            state = retrain(
                spec_path=str(spec_path),
                out=str(out),
                force=force,
                smoke=smoke,
                runner=runner,
                overrides=overrides or None,
                return_state=True,
            )
        seconds = time.monotonic() - start
        if not state.is_completed():
            message, kind = _failure(state)
            return RunOutcome(False, seconds, message, kind, log=str(log))
        result = state.result()
        kept = Path(result["run_dir"]) / RUN_LOG
        os.replace(log, kept)  # beside report.json; a failed run's log stays at OUT/run.log
    return RunOutcome(True, seconds, result=result, previous=previous, log=str(kept))


# Prefect raises a plain RuntimeError when its ephemeral API server does not answer in time; its text
# is the one way to tell it from any other RuntimeError (prefect/server/api/server.py SubprocessASGIServer)
EPHEMERAL_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"


@contextmanager
def _server_start_named():
    """Prefect's ephemeral server not starting in time becomes a TransientError that says why and what to
    set, instead of a traceback reported as a bug: on a machine whose cores are all busy (other training
    jobs, a niced run) the server's start can take longer than the wait."""
    from rlvrflow.flows.errors import TransientError

    try:
        yield
    except RuntimeError as exc:
        # a server process that exited (a broken OUT/.prefect database, a full disk) is not slowness: Prefect
        # says so in the same message, and its traceback with the server's output is what a report needs
        if EPHEMERAL_TIMEOUT not in str(exc) or "process exited with code" in str(exc):
            raise
        wait = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "20")
        raise TransientError(
            f"Prefect's ephemeral API server did not answer within {wait} s of waiting, while still running "
            "(the cores are busy?). Run again when the machine is less loaded, or wait longer: "
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=600 rlvrflow run ..., or start a server once "
            "(prefect server start) and point PREFECT_API_URL at it. Finished stages are reused."
        ) from exc


def _failure(state) -> tuple[str, str]:
    """The flow's own exception (which stage failed and why) and its kind."""
    from rlvrflow.flows.errors import classify

    try:
        state.result()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", classify(exc)
    return state.message or f"run ended in state {state.name}", "bug"
