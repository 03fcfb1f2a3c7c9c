"""Progress a person can follow: terminal bars, and metrics as TensorBoard event files.

    with progress_bar(total=300, desc="sft") as bar:      # a tqdm bar on a terminal, nothing otherwise
        for step in range(300):
            ...
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    scalars = Scalars(cfg.report_to, out / "tb")         # `training.report_to: [tensorboard]`
    scalars.add("grpo", {"reward_mean": 0.4, "kl": 0.01}, step=12)
    scalars.close()

Bars go to stderr and only when stderr is a terminal: a run under Prefect, in CI or piped to a
file gets the log lines alone (no carriage returns in captured logs). While a bar is shown, log
records that would go to the console (handlers on the root logger and on "rlvrflow", where
Prefect puts its console handler) are written above it (tqdm's logging redirect), so the bar and
the step lines do not garble each other; handlers that are not console streams (Prefect's API
log capture) are left alone. Used by SFT, DPO and GRPO (training/trainer.py); eval and tiering can use the
same helper. What is left out: rich's multi-bar layouts, and trackers other than TensorBoard.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
from pathlib import Path

REPORTERS = ("tensorboard",)  # the values `training.report_to` accepts

_redirect_lock = threading.Lock()
_redirect_users = 0
_redirect = None


def bars_enabled(stream=None) -> bool:
    """True when `stream` (stderr by default) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


@contextlib.contextmanager
def progress_bar(total: int, desc: str, initial: int = 0, unit: str = "step", enabled: bool | None = None, file=None):
    """A tqdm bar over `total` units, disabled (every call a no-op) when stderr is no terminal.

    `enabled` overrides the terminal check (tests pass a file and True). Bars shown from several
    threads at once share one logging redirect, which is undone when the last bar closes.
    """
    from tqdm.auto import tqdm

    file = sys.stderr if file is None else file
    on = bars_enabled(file) if enabled is None else enabled
    bar = tqdm(
        total=total, initial=initial, desc=desc, unit=unit, file=file, disable=not on, dynamic_ncols=True, leave=True
    )
    if on:
        _hold_redirect()
    try:
        yield bar
    finally:
        bar.close()
        if on:
            _release_redirect()


def _hold_redirect() -> None:
    global _redirect, _redirect_users
    from tqdm.contrib.logging import logging_redirect_tqdm

    with _redirect_lock:
        if _redirect_users == 0:
            # the root's console handlers, and the ones Prefect puts on "rlvrflow" (its extra logger);
            # Prefect's API handler is no console handler and keeps capturing every record. tqdm adds its
            # handler to every logger it is given, so only loggers with a console handler are given.
            loggers = [lg for lg in (logging.root, logging.getLogger("rlvrflow")) if any(map(_console, lg.handlers))]
            _redirect = logging_redirect_tqdm(loggers=loggers)
            _redirect.__enter__()
        _redirect_users += 1


def _console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr)


def _release_redirect() -> None:
    global _redirect, _redirect_users
    with _redirect_lock:
        _redirect_users -= 1
        if _redirect_users == 0 and _redirect is not None:
            _redirect.__exit__(None, None, None)
            _redirect = None


def check_reporters(values: list[str]) -> list[str]:
    """`values` when each is a known reporter; else a ValueError naming the field and the choices."""
    unknown = [v for v in values if v not in REPORTERS]
    if unknown:
        raise ValueError(
            f"training.report_to has {', '.join(map(repr, unknown))}; allowed values: "
            f"{', '.join(REPORTERS)} (or [] for none)"
        )
    return values


class Scalars:
    """Where a stage's numeric metrics go besides its JSONL: TensorBoard event files under `log_dir`.

    With "tensorboard" in `report_to` it writes with `torch.utils.tensorboard.SummaryWriter`; with an
    empty list every call is a no-op. Tags are "<section>/<metric>" (e.g. "grpo/reward_mean");
    a nested dict adds its own level ("eval/episodes/pass_at_1_greedy"); a "step" key (the x axis,
    passed as `step`), lists, strings, booleans and non-finite values are skipped. `purge_step`: on a resumed run, events at this step
    and after (written before the interruption) are hidden from readers, as metrics.jsonl is cut.
    """

    def __init__(self, report_to, log_dir: str | Path, purge_step: int | None = None) -> None:
        self._writer = None
        self.log_dir = Path(log_dir)
        if "tensorboard" in check_reporters(list(report_to)):
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:  # torch needs the tensorboard package for its writer
                raise ImportError(
                    "training.report_to includes tensorboard but the tensorboard package is "
                    "missing; pip install tensorboard (or set training.report_to: [])"
                ) from exc
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._writer = SummaryWriter(str(self.log_dir), purge_step=purge_step)

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def add(self, section: str, metrics: dict, step: int, leave_out: tuple[str, ...] = ()) -> None:
        """`leave_out`: keys skipped at every level (a dict keyed by names the model wrote, such as the
        episodes' `tool_calls`, would make a tag of every name)."""
        if self._writer is None:
            return
        for name, value in metrics.items():
            if name in leave_out:
                continue
            if isinstance(value, dict):  # a nested record (the held-out episodes' figures): "eval/episodes/..."
                self.add(f"{section}/{name}", value, step, leave_out)
                continue
            if (
                name == "step"
                or isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                continue
            self._writer.add_scalar(f"{section}/{name}", float(value), step)

    def flush(self) -> None:
        """Write buffered events to disk now (at a checkpoint, so a killed run keeps what it resumes from)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None

    def __enter__(self) -> "Scalars":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
