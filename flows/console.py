"""What `rlvrflow run` shows on the terminal, and the run's log file that gets the rest.

    with quiet_console(out / "run.log"):
        retrain(...)

The terminal keeps rlvrflow's own lines (the `rlvrflow` logger and its children), the bars rlvrflow
draws and every other library's warnings. The log file gets every line the run logs, third-party
INFO lines and transformers' bars included. Where each library's noise comes from, and where it goes:

- Great Expectations logs "Created temporary directory ... for ephemeral docs site" at INFO, once
  per validated source, on a logger it sets to INFO itself. It propagates to the root logger, where
  Prefect puts its console handler: a filter on that handler (ConsoleFilter) drops it there, the
  file handler on the root keeps it.
- transformers writes to stderr through its own handler: that handler is taken off for the run, so
  its records propagate to the root like everyone else's. Its tqdm bars ("Loading weights",
  "Writing model shards") are drawn into the log file through transformers' tqdm hook.
- A third-party warning about a choice rlvrflow makes on purpose (ADVISORIES) goes to the file only.

Nothing here changes a logger's level: what a library logs is what the file gets.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from rlvrflow.flows.common import LIBRARY_LOGGER

# (logger, start of the message): warnings that describe what rlvrflow asked for
ADVISORIES = (
    # training/tiny_base.py resizes the base's embeddings with mean_resizing=True; transformers says it will
    ("transformers.modeling_utils", "The new embeddings will be initialized from a multivariate normal"),
)

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s - %(message)s"


class ConsoleFilter(logging.Filter):
    """rlvrflow's own records, and other libraries' warnings that are not ADVISORIES."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == LIBRARY_LOGGER or record.name.startswith(LIBRARY_LOGGER + "."):
            return True
        if record.levelno < logging.WARNING:
            return False
        return not any(record.name == name and str(record.msg).startswith(text) for name, text in ADVISORIES)


def is_console(handler: logging.Handler) -> bool:
    """A handler that writes to this process's stdout or stderr (Prefect's console handler is one)."""
    return isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr)


@contextmanager
def quiet_console(log_path: Path):
    """Route third-party lines and bars to `log_path` (written afresh) for the block; undone after it."""
    from transformers.utils import logging as hf_logging

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8", buffering=1) as stream:
        to_file = logging.StreamHandler(stream)
        to_file.setFormatter(logging.Formatter(LOG_FORMAT))
        only_ours = ConsoleFilter()
        consoles = [h for h in logging.root.handlers if is_console(h)]
        for handler in consoles:
            handler.addFilter(only_ours)
        logging.root.addHandler(to_file)
        hf_logging.get_verbosity()  # transformers puts its stderr handler on at first use: now, to take it off
        hf_root = logging.getLogger("transformers")
        hf_handlers, hf_propagate = list(hf_root.handlers), hf_root.propagate
        hf_root.handlers = [h for h in hf_handlers if not is_console(h)]
        hf_root.propagate = True
        previous_hook = hf_logging.set_tqdm_hook(
            lambda make, args, kwargs: make(*args, **{**kwargs, "file": stream, "ascii": True, "ncols": 100})
        )
        try:
            yield
        finally:
            hf_logging.set_tqdm_hook(previous_hook)
            hf_root.handlers, hf_root.propagate = hf_handlers, hf_propagate
            logging.root.removeHandler(to_file)
            for handler in consoles:
                handler.removeFilter(only_ours)
