"""Fixtures for the flows tests: a toy domain spec on disk and an isolated Prefect environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TOY_SPEC = """\
domain: toy
description: arithmetic questions for the flow tests
sources:
  - name: qa
    path: raw/*.jsonl
    format: jsonl
    fields: {id: qid, question: q, reference: a, solution: s}
    defaults: {category: arithmetic}
validation:
  categories: [arithmetic]
verifiers:
  rules:
    - {category: arithmetic, verifier: math}
curriculum:
  eval_fraction: 0.25
orchestration:
  chunk_rows: 16
  retry_delay_seconds: 0
"""


def write_toy_rows(path: Path, n: int = 40, start: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(start, start + n):
            a, b = i % 17 + 2, i % 11 + 3
            fh.write(
                json.dumps(
                    {
                        "qid": f"q{i:04d}",
                        "q": f"What is {a} plus {b} (case {i})?",
                        "a": str(a + b),
                        "s": f"{a} + {b} = {a + b}. Answer: {a + b}",
                    }
                )
                + "\n"
            )


@pytest.fixture
def toy_spec(tmp_path: Path) -> Path:
    """A valid spec with 40 arithmetic rows next to it; returns the spec path."""
    spec = tmp_path / "toy" / "spec.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(TOY_SPEC)
    write_toy_rows(spec.parent / "raw" / "part-0.jsonl")
    return spec


@pytest.fixture
def prefect_env(tmp_path: Path, monkeypatch):
    """PREFECT_HOME inside the test folder, telemetry off, a patient ephemeral server."""
    home = tmp_path / ".prefect"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return home


def env_without_prefect_api() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
    )
    return env


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    """A test on the temporary Prefect API carries the prefect_api marker: the API takes ~20 s to start,
    so `make test-fast` leaves these tests out."""
    for item in items:
        if "prefect_harness" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.prefect_api)


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory):
    """One temporary Prefect API (SQLite) for the in-process flow tests, results kept in a temp folder."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ.update(
        PREFECT_HOME=str(home),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        PREFECT_LOGGING_EXTRA_LOGGERS="rlvrflow",
    )  # as `rlvrflow run` and prefect.yaml set it
    import prefect.main  # noqa: F401  configures Prefect's log handlers now, on pytest's session-long

    # stderr; first imported inside a test using capsys, they would keep that test's closed stream
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: home / "results"}):
        with prefect_test_harness(server_startup_timeout=120):
            yield


@pytest.fixture
def read_logs():
    """read_logs(text): (logger name, message) of the log lines in the current Prefect API containing text.

    The harness is shared by the whole session, so a test searches for its own lines (an unfiltered
    read would stop at the API's page limit among earlier tests' lines).
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterTextSearch
    from prefect.logging.handlers import APILogWorker

    def read(text: str) -> list[tuple[str, str]]:
        APILogWorker.drain_all(timeout=10)  # lines are sent in batches by a background worker
        with get_client(sync_client=True) as client:
            found = client.read_logs(log_filter=LogFilter(text=LogFilterTextSearch(query=text)), limit=200)
        return [(log.name, log.message) for log in found]

    return read


@pytest.fixture
def read_artifact():
    """read_artifact(key): the newest artifact with this key from the current Prefect API, or None."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    def read(key: str):
        with get_client(sync_client=True) as client:
            found = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                sort=ArtifactSort.CREATED_DESC,
                limit=1,
            )
        return found[0] if found else None

    return read


@pytest.fixture
def fake_run():
    """fake_run(out, name, score, points=5.0): a finished run folder (report.json) whose best model is a
    plain model folder, as the model registry reads it (flows/models.py)."""

    def make(out: Path, name: str, score: float, points: float = 5.0) -> Path:
        ckpt = out / "stages" / "grpo" / name / "step_000004"
        ckpt.mkdir(parents=True)
        (ckpt / "config.json").write_text(json.dumps({"model_type": "llama", "run": name}))
        (ckpt / "model.safetensors").write_bytes(name.encode())
        (ckpt / "state.pt").write_bytes(b"optimizer")  # training state: not part of a registered model
        spec = out / "spec.yaml"
        spec.write_text("domain: toy\n")
        raw = out / "raw" / f"{name}.jsonl"
        raw.parent.mkdir(exist_ok=True)
        raw.write_text("{}\n" * 3)
        prepare, attach = out / "stages" / "prepare" / name, out / "stages" / "attach" / name
        prepare.mkdir(parents=True)
        attach.mkdir(parents=True)
        (prepare / "stats.json").write_text(
            json.dumps({"files": [{"source": "qa", "file": f"raw/{name}.jsonl", "rows": 3, "rejected": 0}]})
        )
        import polars as pl

        pl.DataFrame(
            {
                "id": ["a", "b", "c"],
                "category": ["arithmetic"] * 3,
                "question": ["What is 1+1?"] * 3,
                "reference": ["2", "3", "4"],
                "solution": ["", "", ""],
                "source": [f"raw/{name}.jsonl:{i}" for i in (1, 2, 3)],
            }
        ).write_parquet(attach / "attach.parquet")
        run = out / "runs" / name
        run.mkdir(parents=True)
        report = {
            "domain": "toy",
            "spec": str(spec),
            "best_checkpoint": str(ckpt),
            "checkpoint": str(ckpt),
            "best_decision": {"best": "step_000004", "metric": "pass_at_1_greedy", "no_gain": False},
            "evals": [{"name": "sft", "pass_at_1_greedy": 0.1}, {"name": "step_000004", "pass_at_1_greedy": score}],
            "gain": {"greedy": {"points": points, "low": points - 3, "high": points + 3, "metric": "pass_at_1_greedy"}},
            "stages": {
                "prepare": {"key": "p" + name, "dir": str(prepare)},
                "attach": {"key": "a" + name, "dir": str(attach)},
            },
            "eval_matrix": str(run / "matrix.json"),
        }
        (run / "report.json").write_text(json.dumps(report))
        return run

    return make
