"""The registry's record mirrored into MLflow's model registry, for teams whose UI and serving read it.

    registry:                       # in the domain spec (flows.config.RegistryConfig)
      backend: mlflow
      tracking_uri: http://mlflow.internal:5000
      model_name: retail-assistant  # default rlvrflow-<domain>

OUT/registry/events.jsonl (flows/models.py) stays the record the flow reads: the promotion rule and the
drift check use it. Each register, promote and rollback is written there first and then applied here:
- register: an MLflow run (experiment = the model name) with the exported model folder as artifacts
  under `model/` and the record's fields as params, metrics and tags, then a new version of the
  registered model, tagged with the rlvrflow id, spec sha256, data keys, score and gain;
- promote and rollback: the `champion` alias moves to the champion's version, with the reason as a tag.
Versions are found by their `rlvrflow.id` tag, so a model missing from MLflow (registered while the server
was down, or before the backend was configured) is registered when it is next needed; `sync` replays the
whole local record. `check` says whether MLflow's champion alias agrees with the local champion.

The mlflow client is imported here only, when the backend is used (the `mlflow` extra).
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

ALIAS = "champion"
ID_TAG = "rlvrflow.id"


class MlflowUnreachable(Exception):
    """MLflow could not be reached or refused a request; carries the tracking URI in its message."""


def _client(tracking_uri: str):
    try:
        from mlflow import MlflowClient
    except ImportError:
        raise MlflowUnreachable(
            "registry.backend is mlflow but the mlflow client is not installed; pip install 'rlvrflow[mlflow]'"
        ) from None
    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def _flat(prefix: str, value) -> dict[str, str]:
    """{'gain.points': '5.0', ...}: nested record fields as MLflow's flat string params and tags."""
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}.{key}", sub).items()}
    return {} if value is None else {prefix: str(value)[:500]}


class MlflowRegistry:
    def __init__(self, tracking_uri: str | None, model_name: str | None):
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
        if not self.tracking_uri:
            raise MlflowUnreachable(
                "registry.backend is mlflow but no tracking URI is set; set "
                "registry.tracking_uri in the spec, --mlflow-uri, or MLFLOW_TRACKING_URI"
            )
        self.model_name = model_name
        self._mlflow = None

    def name(self, model: dict) -> str:
        return self.model_name or f"rlvrflow-{model.get('domain') or 'model'}"

    @property
    def client(self):
        """The MlflowClient, after a quick health check of an http(s) server (its own retries take minutes)."""
        if self._mlflow is None:
            if self.tracking_uri.startswith(("http://", "https://")):
                try:
                    urllib.request.urlopen(self.tracking_uri.rstrip("/") + "/health", timeout=10).read()
                except OSError as exc:
                    raise MlflowUnreachable(
                        f"MLflow at {self.tracking_uri} is not reachable ({exc}); start it "
                        "(scripts/mlflow_local.sh start for a local one) or fix "
                        "registry.tracking_uri"
                    ) from None
            self._mlflow = _client(self.tracking_uri)
        return self._mlflow

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MlflowUnreachable:
            raise
        except Exception as exc:  # the client's RestException, connection errors, a refused request
            raise MlflowUnreachable(
                f"MLflow at {self.tracking_uri}: {what} failed ({type(exc).__name__}: {str(exc)[:300]})"
            ) from exc

    # -- reading ----------------------------------------------------------------------------------------
    def version_of(self, model: dict):
        """The model version tagged with this record's id, or None."""
        found = self._call(
            "searching model versions",
            self.client.search_model_versions,
            f"name = '{self.name(model)}'",
            max_results=10000,
        )
        return next((v for v in found if v.tags.get(ID_TAG) == model["id"]), None)

    def champion_id(self, model: dict) -> str | None:
        """The rlvrflow id behind the `champion` alias of `model`'s registered model, or None."""
        from mlflow.exceptions import MlflowException

        try:
            version = self.client.get_model_version_by_alias(self.name(model), ALIAS)
        except Exception as exc:  # the client's errors, or a connection that dropped
            if isinstance(exc, MlflowException) and exc.error_code in (
                "RESOURCE_DOES_NOT_EXIST",
                "INVALID_PARAMETER_VALUE",
            ):
                return None  # no registered model, or no alias on it yet
            raise MlflowUnreachable(f"MLflow at {self.tracking_uri}: reading the {ALIAS} alias failed ({exc})") from exc
        return version.tags.get(ID_TAG, f"version {version.version} (no {ID_TAG} tag)")

    # -- writing ----------------------------------------------------------------------------------------
    def register(self, model: dict):
        """The record's model as a new version (once: an id already there is returned as it is)."""
        existing = self.version_of(model)
        if existing is not None:
            return existing
        from mlflow.entities import Metric, Param, RunTag

        client, name = self.client, self.name(model)
        experiment = self._call("reading the experiment", client.get_experiment_by_name, name)
        experiment_id = (
            experiment.experiment_id
            if experiment
            else self._call("creating the experiment", client.create_experiment, name)
        )
        tags = {
            ID_TAG: model["id"],
            **_flat("rlvrflow.data", model.get("data")),
            "rlvrflow.spec_sha256": str(model.get("spec_sha256")),
            "rlvrflow.score": str(model.get("score")),
            "rlvrflow.gain": str((model.get("gain") or {}).get("points")),
        }
        run = self._call("creating the run", client.create_run, experiment_id, run_name=model["id"], tags=tags)
        run_id = run.info.run_id
        params = {
            k: v
            for k, v in _flat(
                "",
                {
                    key: model.get(key)
                    for key in ("id", "domain", "best", "metric", "spec", "spec_sha256", "source", "no_gain", "data")
                },
            ).items()
        }
        now = int(time.time() * 1000)
        metrics = {
            "score": model.get("score"),
            **{f"gain_{k}": v for k, v in (model.get("gain") or {}).items() if k in ("points", "low", "high")},
        }
        self._call(
            "logging params and metrics",
            client.log_batch,
            run_id,
            params=[Param(k.lstrip("."), v) for k, v in params.items()],
            metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items() if isinstance(v, (int, float))],
            tags=[RunTag("rlvrflow.report", str(model.get("report")))],
        )
        self._call("uploading the model folder", client.log_artifacts, run_id, str(Path(model["path"])), "model")
        self._call("finishing the run", client.set_terminated, run_id)
        if not self._call("searching registered models", client.search_registered_models, f"name = '{name}'"):
            self._call(
                "creating the registered model",
                client.create_registered_model,
                name,
                description="models registered by rlvrflow (OUT/registry/); the champion alias is the model in use",
            )
        return self._call(
            "creating the model version",
            client.create_model_version,
            name,
            f"runs:/{run_id}/model",
            run_id=run_id,
            tags=tags,
        )

    def set_champion(self, model: dict, reason: str):
        """Point the `champion` alias at `model`'s version (registering it first when missing)."""
        version = self.register(model)
        name = self.name(model)
        self._call(
            "tagging the version",
            self.client.set_model_version_tag,
            name,
            version.version,
            "rlvrflow.champion_reason",
            reason[:5000],
        )
        self._call(f"setting the {ALIAS} alias", self.client.set_registered_model_alias, name, ALIAS, version.version)
        return version

    def clear_champion(self, model: dict) -> None:
        """No local champion: no alias either."""
        if self.champion_id(model) is not None:
            self._call(
                f"deleting the {ALIAS} alias", self.client.delete_registered_model_alias, self.name(model), ALIAS
            )
