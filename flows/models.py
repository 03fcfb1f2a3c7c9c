"""The model registry: every finished run's best model, and which one is the champion.

    registry = Registry("runs/retail")            # OUT/registry/ of `rlvrflow run --out runs/retail`
    model = registry.register(run_dir)            # the run's best model, exported beside its record
    registry.promote(model["id"], "first model")
    registry.champion()                           # the record of the model in use
    registry.rollback("tonight's model answers in English")   # the previous champion is current again

Layout under OUT/registry/:
- `events.jsonl`: append-only, one JSON object per line (`register`, `promote`, `rollback`), each with
  its time and reason. Every append holds an flock on the file, so concurrent runs never interleave a
  line; an event is written once its newline is (a line a crashed writer left without one is dropped
  by the next append); the champion is what the events say when read in order, never a second file
  to keep in step.
- `models/<id>/`: the registered model as a plain Hugging Face folder (training/export.py: a LoRA
  checkpoint merged into its base), so a rollback never depends on a stage folder or a base model that
  a later run replaced, and `data_profile.json`, the rows it was trained on as a later night's drift
  check reads them (flows/drift.py). `<id>` is the run folder's name.

A record carries what the model was measured with: the spec's sha256, the data's fingerprint (the
prepare and attach stage keys, content hashes of the logs and the rules), the eval matrix's best row and
the gain over SFT with its interval, and the run's report.

With `Registry(out, RegistryConfig(backend="mlflow", ...))` (the spec's `registry:` section) every
register, promote and rollback is written here first and then applied to MLflow's model registry
(flows/mlflow_registry.py). When MLflow cannot be reached the local write stands and a `MirrorError`
(carrying the local result as `.record`) says so and how to catch up: `rlvrflow models sync`.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from rlvrflow.flows.cache import file_digest
from rlvrflow.flows.config import RegistryConfig

EVENTS = "events.jsonl"


class RegistryError(Exception):
    """A registry request that cannot be carried out (unknown model, no champion to roll back to)."""


class MirrorError(RegistryError):
    """The local record was written but MLflow was not updated; `record` is what the local call returned."""

    def __init__(self, message: str, record: dict | None):
        super().__init__(message)
        self.record = record


class ChampionChanged(RegistryError):
    """A promotion measured against a champion that another run or person has since replaced."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Registry:
    def __init__(self, out: str | Path, backend: RegistryConfig | None = None):
        """backend: the spec's `registry:` section; with `backend: mlflow` MLflow is kept in step."""
        self.dir = Path(out) / "registry"
        self.events_path = self.dir / EVENTS
        self.mirror = None
        if backend is not None and backend.backend == "mlflow":
            from rlvrflow.flows.mlflow_registry import MlflowRegistry, MlflowUnreachable

            try:
                self.mirror = MlflowRegistry(backend.tracking_uri, backend.model_name)
            except MlflowUnreachable as exc:
                raise RegistryError(str(exc)) from None

    # -- reading ----------------------------------------------------------------------------------------
    def events(self) -> list[dict]:
        """Every event in order. A last line without its newline (a writer that crashed) is not an
        event; any other unreadable line is an error that names it (nothing is silently skipped)."""
        if not self.events_path.is_file():
            return []
        text = self.events_path.read_text()
        lines = text.split("\n")
        events = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if number == len(lines) and not text.endswith("\n"):
                    break
                raise RegistryError(
                    f"{self.events_path}:{number}: not a JSON event ({exc.msg}); fix or remove that line"
                ) from None
        return events

    def models(self) -> list[dict]:
        """Registered models, oldest first, each with `champion: bool`."""
        champion = self._champions()[-1:] or [None]
        return [
            {**e["model"], "champion": e["model"]["id"] == champion[0]}
            for e in self.events()
            if e["event"] == "register"
        ]

    def get(self, model_id: str) -> dict:
        for model in self.models():
            if model["id"] == model_id:
                return model
        known = ", ".join(m["id"] for m in self.models()[-5:]) or "none yet"
        raise RegistryError(
            f"no registered model {model_id!r} in {self.dir} (latest: {known}); `rlvrflow models list` shows them"
        )

    def champion(self) -> dict | None:
        ids = self._champions()
        return self.get(ids[-1]) if ids else None

    def _champions(self) -> list[str]:
        """The champion stack: a promotion pushes, a rollback pops; the last is the model in use."""
        stack: list[str] = []
        for event in self.events():
            if event["event"] == "promote":
                stack.append(event["id"])
            elif event["event"] == "rollback":
                stack.pop()
        return stack

    # -- writing ----------------------------------------------------------------------------------------
    def register(self, run_dir: str | Path) -> dict:
        """Export a finished run's best model into the registry and record it (not promoted)."""
        from rlvrflow.flows.drift import PROFILE_FILE, data_profile
        from rlvrflow.training.export import export_checkpoint

        run_dir = Path(run_dir)
        report_path = run_dir / "report.json"
        if not report_path.is_file():
            raise RegistryError(
                f"{run_dir}: no report.json; register a run folder that finished (OUT/runs/<time>-<run id>/)"
            )
        report = json.loads(report_path.read_text())
        model_id = run_dir.name
        if any(m["id"] == model_id for m in self.models()):
            raise RegistryError(f"{model_id} is already registered")
        source = report.get("best_checkpoint") or report.get("checkpoint")
        if not source or not Path(source).is_dir():
            raise RegistryError(f"{report_path}: the best model's folder {source!r} is gone; rerun the run")
        stages = report.get("stages", {})
        data_dirs = [Path(stages.get(name, {}).get("dir") or "") for name in ("prepare", "attach")]
        if not report.get("spec") or not all(
            (d / f).is_file() for d, f in zip(data_dirs, ("stats.json", "attach.parquet"))
        ):
            raise RegistryError(
                f"{report_path}: the run's prepare and attach stage folders are gone, and with "
                "them the rows a later night's drift check compares with; rerun the run"
            )
        profile = data_profile(data_dirs[0], data_dirs[1], Path(report["spec"]).parent)  # before the export: cheap
        dest = self.dir / "models" / model_id
        export_checkpoint(source, dest, merge=True)
        (dest / PROFILE_FILE).write_text(json.dumps(profile, indent=1, ensure_ascii=False))
        decision = report.get("best_decision") or {}
        best_name = decision.get("best") or report.get("best_model")
        best_row = next((e for e in report.get("evals", []) if e.get("name") == best_name), {})
        model = {
            "id": model_id,
            "time": _now(),
            "domain": report.get("domain"),
            "path": str(dest.resolve()),
            "source": str(source),
            "best": best_name,
            "spec": report.get("spec"),
            "spec_sha256": file_digest(report["spec"])
            if report.get("spec") and Path(report["spec"]).is_file()
            else None,
            "data": {name: stages[name]["key"] for name in ("prepare", "attach") if name in stages},
            "metric": decision.get("metric", "pass_at_1_greedy"),
            "score": best_row.get(decision.get("metric", "pass_at_1_greedy")),
            # the report's gain is the final checkpoint's over SFT: the best model's only when it is that one
            "gain": (report.get("gain") or {}).get("greedy")
            if best_name == Path(str(report.get("checkpoint"))).name
            else None,
            "no_gain": bool(decision.get("no_gain")),
            "report": str(report_path.resolve()),
            "eval_matrix": report.get("eval_matrix"),
        }
        with self._locked():
            if any(m["id"] == model_id for m in self.models()):
                raise RegistryError(f"{model_id} is already registered")
            self._write({"event": "register", "time": model["time"], "model": model})
        return self._to_mlflow(f"{model_id} registered", model, lambda m: m.register(model))

    def promote(self, model_id: str, reason: str, expected_champion: str | None | type[Ellipsis] = ...) -> dict:
        """Make a registered model the champion. With `expected_champion` (an id, or None for "no champion
        yet"), only when that is still the champion: the check and the write hold the registry's lock, so
        of two runs that measured the same champion, one promotes and the other is told it changed."""
        with self._locked():
            model = self.get(model_id)
            current = (self._champions()[-1:] or [None])[0]
            if expected_champion is not ... and current != expected_champion:
                raise ChampionChanged(
                    f"the champion is now {current or 'none'}, not {expected_champion or 'none'} "
                    "as measured; rerun to compare with it"
                )
            if current == model_id:
                raise RegistryError(f"{model_id} is already the champion")
            self._write({"event": "promote", "time": _now(), "id": model_id, "previous": current, "reason": reason})
        return self._to_mlflow(
            f"{model_id} promoted", {**model, "champion": True}, lambda m: m.set_champion(model, reason)
        )

    def rollback(self, reason: str) -> dict:
        """Make the champion before the current one current again; returns its record."""
        with self._locked():
            stack = self._champions()
            if len(stack) < 2:
                raise RegistryError("no earlier champion to roll back to" if stack else "there is no champion yet")
            self._write({"event": "rollback", "time": _now(), "id": stack[-1], "to": stack[-2], "reason": reason})
        back = self.get(stack[-2])
        return self._to_mlflow(
            f"rolled back to {back['id']}", back, lambda m: m.set_champion(back, f"rollback from {stack[-1]}: {reason}")
        )

    # -- MLflow (flows/mlflow_registry.py) --------------------------------------------------------------
    def _to_mlflow(self, done: str, record: dict, apply) -> dict:
        """Apply a local change that is already written to MLflow too; outside the lock (network I/O)."""
        from rlvrflow.flows.mlflow_registry import MlflowUnreachable

        if self.mirror is not None:
            try:
                apply(self.mirror)
            except MlflowUnreachable as exc:
                raise MirrorError(
                    f"{done} in {self.events_path}, but MLflow was not updated: {exc}. The local "
                    f"record stands; once MLflow is reachable, `rlvrflow models --out "
                    f"{self.dir.parent} sync` (with the same --spec or --mlflow-uri) applies it there",
                    record,
                ) from None
        return record

    def _need_mirror(self):
        if self.mirror is None:
            raise RegistryError(
                "no MLflow backend configured: pass --spec with `registry: {backend: mlflow}` or --mlflow-uri"
            )
        return self.mirror

    def check(self) -> tuple[bool, str]:
        """Whether MLflow's champion alias names the local champion; (agree, a line saying so)."""
        from rlvrflow.flows.mlflow_registry import MlflowUnreachable

        mirror, local = self._need_mirror(), self.champion()
        models = self.models()
        if not models:
            return True, "no models registered locally; nothing to compare"
        try:
            remote = mirror.champion_id(models[-1])
            missing = [m["id"] for m in models if mirror.version_of(m) is None]
        except MlflowUnreachable as exc:
            raise RegistryError(str(exc)) from None
        name = mirror.name(models[-1])
        agree = remote == (local or {}).get("id") and not missing
        text = f"local champion {local['id'] if local else 'none'}, MLflow {name}@champion {remote or 'none'}" + (
            f"; not in MLflow: {', '.join(missing)}" if missing else ""
        )
        return agree, (
            f"in step: {text}"
            if agree
            else f"out of step: {text}; `rlvrflow models --out "
            f"{self.dir.parent} sync` applies the local record to MLflow"
        )

    def sync(self) -> list[str]:
        """Apply the whole local record to MLflow: every model as a version, the alias on the champion."""
        from rlvrflow.flows.mlflow_registry import MlflowUnreachable

        mirror, lines = self._need_mirror(), []
        try:
            for model in self.models():
                known = mirror.version_of(model)
                version = known or mirror.register(model)
                lines.append(f"{model['id']}: version {version.version}{'' if known else ' (registered now)'}")
            champion, models = self.champion(), self.models()
            if champion is not None:
                reason = next(e.get("reason", "") for e in reversed(self.events()) if e["event"] != "register")
                mirror.set_champion(champion, reason)
                lines.append(f"champion alias: {champion['id']}")
            elif models:
                mirror.clear_champion(models[-1])
                lines.append("champion alias: none (no local champion)")
        except MlflowUnreachable as exc:
            raise RegistryError(str(exc)) from None
        return lines

    @contextmanager
    def _locked(self):
        """The registry's lock (an flock on OUT/registry/.lock) around a read-check-write."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / ".lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _write(self, event: dict) -> None:
        """Append one event line; the caller holds the lock."""
        line = json.dumps(event, sort_keys=True, default=str) + "\n"
        with self.events_path.open("a+b") as fh:
            fh.seek(0)
            data = fh.read()
            if data and not data.endswith(b"\n"):  # a crashed writer's torn line was never an event
                fh.truncate(data.rfind(b"\n") + 1)
            fh.seek(0, os.SEEK_END)
            fh.write(line.encode())
            fh.flush()
            os.fsync(fh.fileno())


def describe(model: dict) -> str:
    """One line for `rlvrflow models list`."""
    mark = "*" if model.get("champion") else " "
    score = model.get("score")
    gain = model.get("gain") or {}
    gain_text = (
        f"{gain['points']:+.1f} points over SFT [{gain['low']:+.1f}, {gain['high']:+.1f}]"
        if {"points", "low", "high"} <= set(gain)
        else "the SFT model (no checkpoint beat it)"
        if model.get("best") == "sft"
        else "no gain figure"
    )
    score_text = f"{score:.1%}" if isinstance(score, (int, float)) else "?"
    return f"{mark} {model['id']}  {model.get('best')}  {model.get('metric')} {score_text}  {gain_text}"
