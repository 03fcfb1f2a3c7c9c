"""Progress bars: shown on a terminal, silent elsewhere (captured logs, Prefect, CI)."""

import io
import logging

from rlvrflow.training.progress import bars_enabled, progress_bar


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_no_bar_when_the_stream_is_not_a_terminal():
    buf = io.StringIO()
    assert not bars_enabled(buf)
    with progress_bar(5, "sft", file=buf) as bar:
        for _ in range(5):
            bar.update(1)
            bar.set_postfix(loss="0.1")
    assert buf.getvalue() == ""


def test_bar_on_a_terminal_counts_steps_and_resumes_from_initial():
    term = _Terminal()
    assert bars_enabled(term)
    with progress_bar(5, "grpo", initial=2, file=term) as bar:
        for _ in range(3):
            bar.update(1)
    text = term.getvalue()
    assert "grpo" in text and "5/5" in text and "\r" in text


def test_log_records_go_above_the_bar_and_handlers_come_back(capsys):
    root, ours = logging.getLogger(), logging.getLogger("rlvrflow")
    already = list(ours.handlers)  # e.g. Prefect's API log handler, left by an earlier flow in this process
    handler = logging.StreamHandler()  # the console handler a CLI installs, on stderr
    prefect_console = logging.StreamHandler()  # Prefect's, on its extra logger "rlvrflow"
    captured = logging.Handler()  # not a console stream (like Prefect's API log handler): left alone
    root.addHandler(handler)
    ours.addHandler(prefect_console)
    ours.addHandler(captured)
    try:
        term = _Terminal()
        with progress_bar(2, "sft", file=term):
            # tqdm's redirect replaced the console handlers while the bar is shown
            assert handler not in root.handlers and prefect_console not in ours.handlers
            assert captured in ours.handlers
            with progress_bar(2, "eval", file=term):  # a second bar (another thread) shares the redirect
                pass
            assert handler not in root.handlers
        assert handler in root.handlers and prefect_console in ours.handlers and captured in ours.handlers
        ours.removeHandler(prefect_console)
        with progress_bar(2, "sft", file=term):  # no console handler on "rlvrflow": nothing added there,
            assert ours.handlers == [*already, captured]  # or its records would print twice (there and at the root)
    finally:
        root.removeHandler(handler)
        ours.removeHandler(prefect_console)
        ours.removeHandler(captured)


def test_a_bar_forced_off_writes_nothing_on_a_terminal():
    term = _Terminal()
    with progress_bar(3, "grpo", file=term, enabled=False) as bar:
        bar.update(3)
    assert term.getvalue() == ""
