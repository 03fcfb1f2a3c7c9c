"""The `retrain` flow: the whole chain for one domain, each stage a subflow you can watch in the UI.

prepare -> attach (+ split) -> sft -> tier -> grpo or dpo (training.algorithm) -> evaluate -> report
(with the eval matrix, the best model and the run doctor's findings) -> register the best model in
OUT/registry and promote it when it beats the champion (compare, flows/promotion.py; flows/models.py). Stages whose inputs,
spec section and code are unchanged are reused from `OUT/stages/` (content-hash keys), so a rerun
with nothing changed takes a fraction of the first run; `force=True` recomputes everything.
Each run writes its report to its own folder `OUT/runs/<time>-<run id>/`, so concurrent runs never
clobber each other; stages they share are computed once (a lock per stage folder).

`smoke=True` applies a tiny budget (flows/common.py: SMOKE_OVERRIDES) to check the chain end to end.
`runner` (threads | dask) overrides `orchestration.runner` for the fan-out stages, and
`overrides` any spec field by dotted path, e.g. {"training.grpo.max_steps": 20} (`rlvrflow run --set`).

    rlvrflow run examples/retail/spec.yaml --out runs/demo          # this flow, locally
    prefect deployment run 'retrain/smoke' --watch                   # the same, on a worker
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal, Optional

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from rlvrflow.flows import artifacts
from rlvrflow.flows.attach import attach
from rlvrflow.flows.cache import Manifest
from rlvrflow.flows.common import load_run_spec, make_task_runner
from rlvrflow.flows.dpo import dpo
from rlvrflow.flows.evaluate import evaluate
from rlvrflow.flows.grpo import grpo
from rlvrflow.flows.models import Registry
from rlvrflow.flows.preflight import preflight
from rlvrflow.flows.prepare import prepare
from rlvrflow.flows.report import figures_markdown, new_run_dir, point_latest, write_run_report
from rlvrflow.flows.runner import print_line
from rlvrflow.flows.sft import sft
from rlvrflow.flows.drift import drift_markdown, stop_if_drifted
from rlvrflow.flows.stages import champion_data, champion_model
from rlvrflow.flows.tasks import run_in_flow
from rlvrflow.flows.tier import tier


@task(name="report", cache_policy=NO_CACHE, persist_result=False)
def report_task(run_dir: str, domain: str, spec_path: str, manifests: dict, notices: list[dict]) -> dict:
    """Write report.json into the run folder (training.build_report)."""
    return write_run_report(run_dir, domain, spec_path, manifests, notices)


@task(name="register", cache_policy=NO_CACHE, persist_result=False)
def register_task(
    out: str,
    run_dir: str,
    domain: str,
    spec_path: str,
    smoke: bool,
    runner: str | None,
    overrides: dict | None,
    compared: dict | None,
) -> str:
    """Register the run's best model and apply the promotion rule (flows/promotion.py); the decision
    and its reasons go into report.json (`promotion`) and the `<domain>-promotion` artifact; returns
    the console's lines."""
    from rlvrflow.io import write_json
    from rlvrflow.flows.models import describe
    from rlvrflow.flows.promotion import register_and_promote

    spec = load_run_spec(spec_path, smoke, runner, overrides)
    done = register_and_promote(
        out,
        run_dir,
        spec.promotion,
        spec.eval.max_regression,
        Manifest.from_dict(compared).path("compare") if compared else None,
        spec.registry,
    )
    model, now, decision = done["model"], done["champion"], done["decision"]
    mlflow_note = ""
    if spec.registry.backend == "mlflow":  # the local record stands either way; say loudly when MLflow lags
        mlflow_note = (
            "MLflow NOT in step: " + " | ".join(done["mlflow_errors"])
            if done["mlflow_errors"]
            else "MLflow in step with OUT/registry (versions and the champion alias)"
        )
        logger = get_run_logger()
        (logger.error if done["mlflow_errors"] else logger.info)("%s", mlflow_note)
    report_path = Path(run_dir) / "report.json"
    report = json.loads(report_path.read_text())
    report["promotion"] = {
        "verdict": done["verdict"],
        "model": model["id"],
        **decision,
        "champion_before": (done["champion_before"] or {}).get("id"),
        "champion": now["id"] if now else None,
        **({"mlflow": mlflow_note} if mlflow_note else {}),
    }
    write_json(report_path, report, indent=1, sort_keys=True)
    artifacts.publish_markdown(
        artifacts.artifact_key(domain, "promotion"),
        artifacts.promotion_markdown(model, done["champion_before"], done["verdict"], decision)
        + (f"\n\n**{mlflow_note}**" if mlflow_note else ""),
        "tonight's model against the champion: promoted or not, and why",
    )
    # an event automations can act on (scripts/prefect_alerts.py tells the owner when a model is kept out)
    from prefect.events import emit_event

    emit_event(
        event=f"rlvrflow.model.{'promoted' if done['verdict'] == 'promoted' else 'kept'}",
        resource={"prefect.resource.id": f"rlvrflow.registry.{domain}", "prefect.resource.name": domain},
        payload={
            "model": model["id"],
            "reasons": "; ".join(decision["reasons"]),
            "champion": now["id"] if now else None,
            "mlflow": mlflow_note,
        },
    )
    return (
        f"registered: {describe(model).strip()} ({done['verdict']}: {'; '.join(decision['reasons'])})\n"
        f"champion:   {describe(now).strip() if now else 'none (rlvrflow models promote ID --reason ...)'}"
        + (f"\n{mlflow_note}" if mlflow_note else "")
    )


def _run_id() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.id or "local")


@flow(name="retrain", log_prints=True)
def retrain(
    spec_path: str = "examples/retail/spec.yaml",
    out: str = "runs/retrain",
    force: bool = False,
    smoke: bool = False,
    runner: Optional[Literal["threads", "dask"]] = None,
    overrides: Optional[dict] = None,
) -> dict:
    """Prepare, attach, split, SFT, tier, GRPO or DPO, evaluate and report one domain; returns the summary."""
    start = time.monotonic()
    spec = load_run_spec(spec_path, smoke, runner, overrides)
    spec_abs, root = str(Path(spec_path).resolve()), Path(out).resolve()
    run_dir = new_run_dir(root, _run_id())
    logger = get_run_logger()
    logger.info(
        "retrain %s: run folder %s (smoke=%s, force=%s, runner=%s)",
        spec.domain,
        run_dir,
        smoke,
        force,
        spec.orchestration.runner,
    )
    # what the data and the spec imply (no worked rows, prompts past the model's positions, ignored settings,
    # a 16-bit dtype this CPU emulates): the run's first lines, and report.json's warnings
    notices = [{"kind": n.kind, "message": n.message} for n in preflight(spec) if n.warn]
    for n in notices:
        logger.warning("%s", n["message"])
    fan_out = make_task_runner(spec)
    common = {
        "spec_path": spec_abs,
        "out": str(root),
        "force": force,
        "smoke": smoke,
        "runner": runner,
        "overrides": overrides,
    }

    m: dict[str, dict] = {}
    m["prepare"] = prepare(**common)
    data = attach.with_options(task_runner=fan_out)(clean=m["prepare"], **common)
    m["attach"], m["split"] = data["attach"], data["split"]
    # tonight's rows against the champion's, before anything trains (flows/drift.py)
    champion = Registry(root).champion()
    if champion is not None and spec.drift.enabled:
        drifted = run_in_flow(
            "drift",
            spec,
            root,
            {
                "prepare": m["prepare"],
                "attach": m["attach"],
                "champion_data": champion_data(champion["path"]).to_dict(),
            },
            force,
        )
        m["drift"] = drifted.to_dict()
        artifacts.publish_markdown(
            artifacts.artifact_key(spec.domain, "drift"),
            drift_markdown(json.loads(drifted.path("drift").read_text())),
            "tonight's rows against the champion's: what changed, every check",
        )
        stop_if_drifted(drifted.path("drift"))
    if champion is not None and spec.training.start_from == "champion":  # continue from the model in use
        common["overrides"] = {**(overrides or {}), "training.model": champion["path"]}
        spec = load_run_spec(spec_path, smoke, runner, common["overrides"])
        line = f"training.start_from: champion: this run starts from {champion['id']} ({champion['path']})"
        print_line(line)  # the terminal, as the stage lines
        logger.info(line)
    m["sft"] = sft(verified=m["attach"], split=m["split"], **common)
    m["tier"] = tier.with_options(task_runner=make_task_runner(spec))(split=m["split"], sft=m["sft"], **common)
    trainer = {"grpo": grpo, "dpo": dpo}[spec.training.algorithm]
    m[spec.training.algorithm] = trainer(split=m["split"], sft=m["sft"], tiers=m["tier"], **common)
    # the evaluate stage reads the trained stage's checkpoints whichever it is (flows/stages.py: `policy`)
    m["evaluate"] = evaluate(split=m["split"], sft=m["sft"], grpo=m[spec.training.algorithm], **common)

    # tonight's best against the model in use, on tonight's prompts (flows/promotion.py)
    if champion is not None:
        m["compare"] = run_in_flow(
            "compare",
            spec,
            root,
            {"split": m["split"], "evaluate": m["evaluate"], "champion": champion_model(champion["path"]).to_dict()},
            force,
        ).to_dict()

    summary = report_task(str(run_dir), spec.domain, spec_abs, m, notices)
    summary["registered"] = register_task(
        str(root), str(run_dir), spec.domain, spec_abs, smoke, runner, common["overrides"], m.get("compare")
    )
    summary["seconds"] = round(time.monotonic() - start, 1)
    point_latest(root, summary)
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "stage-counts"),
        artifacts.stage_rows(m),
        "rows in / kept / rejected, seconds and cache use per stage",
    )
    artifacts.publish_table(
        artifacts.artifact_key(spec.domain, "rejects"), artifacts.rejects_rows(m), "rejected rows by stage and reason"
    )
    artifacts.publish_markdown(
        artifacts.artifact_key(spec.domain, "figures"),
        figures_markdown(summary["report"]),
        "training curves and the tier histogram, inlined",
    )
    ev = m["evaluate"]
    artifacts.publish_eval(
        spec.domain,
        ev["dir"],
        Path(ev["dir"]) / ev["outputs"]["matrix"],
        {
            name[: -len(".samples")]: str(Path(ev["dir"]) / rel)
            for name, rel in ev["outputs"].items()
            if name.endswith(".samples")
        },
    )
    logger.info("retrain %s done in %.1f s; report %s", spec.domain, summary["seconds"], summary["report"])
    return summary
