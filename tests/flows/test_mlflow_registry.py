"""The registry's MLflow backend (flows/mlflow_registry.py): against a real local MLflow server with a
SQLite backend (scripts/mlflow_local.sh, stopped at the end, pass or fail), and what happens when
MLflow cannot be reached (the local record stands, the error names the URI and `sync`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvrflow.flows.cli import main
from rlvrflow.flows.config import RegistryConfig
from rlvrflow.flows.models import MirrorError, Registry, RegistryError

from .test_week import NIGHT, generate, sample

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "mlflow_local.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tracking_uri_belongs_to_the_mlflow_backend():
    with pytest.raises(ValidationError, match="set registry.backend: mlflow"):
        RegistryConfig(tracking_uri="http://127.0.0.1:5000")
    assert RegistryConfig(backend="mlflow").model_name is None


def test_no_tracking_uri_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(RegistryError, match="registry.tracking_uri .*MLFLOW_TRACKING_URI"):
        Registry(tmp_path, RegistryConfig(backend="mlflow"))


def test_an_unreachable_mlflow_keeps_the_local_record_and_says_how_to_sync(fake_run, tmp_path, capsys):
    uri = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    reg = Registry(tmp_path, RegistryConfig(backend="mlflow", tracking_uri=uri))
    with pytest.raises(
        MirrorError,
        match=f"night1 registered in .*events.jsonl, but MLflow was not updated: "
        f"MLflow at {uri} is not reachable.*models --out .* sync",
    ) as caught:
        reg.register(fake_run(tmp_path, "night1", 0.4))
    assert caught.value.record["id"] == "night1" and [m["id"] for m in reg.models()] == ["night1"]
    with pytest.raises(MirrorError, match="night1 promoted"):
        reg.promote("night1", "first model")
    assert reg.champion()["id"] == "night1"
    assert main(["models", "--out", str(tmp_path), "--mlflow-uri", uri, "check"]) == 2
    assert f"MLflow at {uri} is not reachable" in capsys.readouterr().err
    assert main(["models", "--out", str(tmp_path), "sync"]) == 2
    assert "no MLflow backend configured" in capsys.readouterr().err


@pytest.fixture
def mlflow_server(tmp_path):
    """A local MLflow server (SQLite backend, artifacts under tmp_path) started by the project's script."""
    env = {
        **os.environ,
        "MLFLOW_HOME": str(tmp_path / "mlflow"),
        "MLFLOW_PORT": str(_free_port()),
        "MLFLOW_PYTHON": sys.executable,
    }
    try:
        done = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"mlflow_local.sh start:\n{done.stdout}\n{done.stderr}"
        yield (tmp_path / "mlflow" / "uri").read_text().strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_register_promote_rollback_in_mlflow(fake_run, tmp_path, mlflow_server, monkeypatch, capsys):
    import mlflow.artifacts
    from mlflow import MlflowClient

    uri, out = mlflow_server, tmp_path / "out"
    reg = Registry(out, RegistryConfig(backend="mlflow", tracking_uri=uri))
    reg.register(fake_run(out, "night1", 0.4))
    reg.register(fake_run(out, "night2", 0.5, points=7.0))
    reg.promote("night1", "first model")
    reg.promote("night2", "beats night1")
    reg.rollback("night2 answers in English")

    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    versions = {v.tags["rlvrflow.id"]: v for v in client.search_model_versions("name = 'rlvrflow-toy'")}
    assert sorted(versions) == ["night1", "night2"]
    night1, night2 = versions["night1"], versions["night2"]
    assert night2.tags["rlvrflow.data.prepare"] == "pnight2" and night2.tags["rlvrflow.data.attach"] == "anight2"
    assert night2.tags["rlvrflow.score"] == "0.5" and night2.tags["rlvrflow.gain"] == "7.0"
    assert night2.tags["rlvrflow.spec_sha256"] == reg.get("night2")["spec_sha256"]
    assert night2.tags["rlvrflow.champion_reason"] == "beats night1"
    assert night1.tags["rlvrflow.champion_reason"] == "rollback from night2: night2 answers in English"
    assert client.get_model_version_by_alias("rlvrflow-toy", "champion").version == night1.version
    run = client.get_run(night2.run_id)
    assert run.data.params["best"] == "step_000004" and run.data.metrics["gain_points"] == 7.0
    assert run.data.params["data.attach"] == "anight2" and run.info.status == "FINISHED"

    # the champion alias's artifacts are the exported model folder
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    got = Path(
        mlflow.artifacts.download_artifacts(
            artifact_uri="models:/rlvrflow-toy@champion", dst_path=str(tmp_path / "download")
        )
    )
    assert (got / "config.json").read_text() == (out / "registry" / "models" / "night1" / "config.json").read_text()
    assert (got / "model.safetensors").read_bytes() == b"night1" and not (got / "state.pt").exists()

    assert reg.check() == (True, f"in step: local champion night1, MLflow rlvrflow-toy@champion night1")
    # someone moves the alias in MLflow's UI, and a night is registered while MLflow is not configured
    client.set_registered_model_alias("rlvrflow-toy", "champion", night2.version)
    Registry(out).register(fake_run(out, "night3", 0.6))
    assert main(["models", "--out", str(out), "--mlflow-uri", uri, "check"]) == 1
    assert (
        "out of step: local champion night1, MLflow rlvrflow-toy@champion night2; not in MLflow: night3"
        in capsys.readouterr().out
    )
    assert main(["models", "--out", str(out), "--mlflow-uri", uri, "sync"]) == 0
    assert "night3: version 3 (registered now)" in capsys.readouterr().out
    assert main(["models", "--out", str(out), "--mlflow-uri", uri, "check"]) == 0
    assert client.get_model_version_by_alias("rlvrflow-toy", "champion").tags["rlvrflow.id"] == "night1"


def test_the_night_promotes_locally_when_mlflow_is_down_and_says_so(fake_run, tmp_path):
    from rlvrflow.flows.config import PromotionConfig
    from rlvrflow.flows.promotion import register_and_promote

    uri = f"http://127.0.0.1:{_free_port()}"
    done = register_and_promote(
        tmp_path,
        fake_run(tmp_path, "night1", 0.4),
        PromotionConfig(),
        2.0,
        None,
        RegistryConfig(backend="mlflow", tracking_uri=uri, model_name="shop"),
    )
    assert done["verdict"] == "promoted" and Registry(tmp_path).champion()["id"] == "night1"
    assert [e.split(",")[0] for e in done["mlflow_errors"]] == [
        "night1 registered in " + str(tmp_path / "registry" / "events.jsonl"),
        "night1 promoted in " + str(tmp_path / "registry" / "events.jsonl"),
    ]


def test_models_reads_the_registry_section_from_a_spec(fake_run, tmp_path, capsys):
    spec = tmp_path / "domain" / "spec.yaml"  # fake_run writes its own tmp_path/spec.yaml
    spec.parent.mkdir()
    spec.write_text(
        (REPO / "examples" / "retail" / "spec.yaml").read_text()
        + f"\nregistry: {{backend: mlflow, tracking_uri: 'http://127.0.0.1:{_free_port()}'}}\n"
    )
    Registry(tmp_path).register(fake_run(tmp_path, "night1", 0.4))
    assert main(["models", "--out", str(tmp_path), "--spec", str(spec), "sync"]) == 2
    assert "is not reachable" in capsys.readouterr().err


@pytest.mark.slow
def test_the_retrain_flow_moves_the_champion_alias_with_its_promotions(
    prefect_harness, tmp_path, mlflow_server, capsys
):
    """Two nights of the week test (tests/flows/test_week.py) with `registry.backend: mlflow`: each
    registers a version, and the `champion` alias follows the flow's promotions: night 1 (4 SFT steps)
    is the first champion, night 2 (150 SFT steps on a new day's log) beats it and takes the alias."""
    from mlflow import MlflowClient

    uri, out = mlflow_server, tmp_path / "nightly"
    spec = sample(tmp_path / "retail")
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    night = [
        "run",
        str(spec),
        "--out",
        str(out),
        *NIGHT,
        "--set",
        "registry.backend=mlflow",
        "--set",
        f"registry.tracking_uri={uri}",
    ]
    for n, extra in ((1, []), (2, ["--set", "training.sft.max_steps=150"])):
        if n == 2:
            generate(spec.parent, "--day", "1")
        code = main(night + extra)
        log = "".join(capsys.readouterr())
        assert code == 0, log
        assert "MLflow in step with OUT/registry (versions and the champion alias)" in log
        registry = Registry(out)
        report = json.loads(Path(json.loads((out / "latest.json").read_text())["report"]).read_text())
        assert report["promotion"]["verdict"] == "promoted", report["promotion"]["reasons"]
        versions = {v.tags["rlvrflow.id"]: v for v in client.search_model_versions("name = 'rlvrflow-retail'")}
        assert sorted(versions) == sorted(m["id"] for m in registry.models())
        alias = client.get_model_version_by_alias("rlvrflow-retail", "champion")
        assert alias.tags["rlvrflow.id"] == registry.champion()["id"] == report["promotion"]["model"]
        assert str(alias.version) == str(versions[report["promotion"]["model"]].version) == str(n)
        assert alias.tags["rlvrflow.champion_reason"] == "; ".join(report["promotion"]["reasons"])
    assert report["promotion"]["reasons"][0].startswith("gain +")
    registry = Registry(out, RegistryConfig(backend="mlflow", tracking_uri=uri))
    assert registry.check() == (
        True,
        f"in step: local champion {registry.champion()['id']}, "
        f"MLflow rlvrflow-retail@champion {registry.champion()['id']}",
    )
