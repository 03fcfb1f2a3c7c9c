"""Champion against challenger on one yardstick, and the spec's rule that decides a promotion.

The `compare` stage runs when the registry (flows/models.py) has a champion: it evaluates the
champion on tonight's held-out prompts and episodes, regression sets and robustness set, with the same eval
settings as the evaluate stage, beside tonight's best model (the eval matrix's `best`), and writes
the measurements (`compare.json`, with the paired gain, training.report.gain_interval). When the
model is registered, `decide` applies the `promotion:` section to them, so a change of the rule never
re-evaluates the champion; the decision and its reasons go into report.json's `promotion`.

    promotion: {min_gain: 1.0, max_regression: 2.0}    # and the default require_interval_above_zero: true
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvrflow.flows.cache import tree_digest
from rlvrflow.flows.config import PromotionConfig, RegistryConfig
from rlvrflow.flows.runner import Job, Result


def _pass(result: dict | None) -> float | None:
    value = (result or {}).get("pass_at_1_greedy")
    return None if value is None else 100 * float(value)


def decide(
    challenger: dict,
    champion: dict,
    challenger_sets: dict,
    champion_sets: dict,
    cfg: PromotionConfig,
    max_regression: float,
) -> dict:
    """{promote, reasons, gain, regressions}: whether `challenger` replaces `champion` under `cfg`.

    challenger/champion: evaluate results on the same held-out rows (with `by_prompt`); *_sets: their
    {"regression": {set: result}, "robustness": result | None}. A regression is a drop of greedy pass@1
    points against the champion on a regression set or the robustness set, or on the held-out episodes
    (the results' `episodes`, when both have them; episode success counts apart from the headline gain)
    a drop of more than that whose paired interval lies below zero."""
    from rlvrflow.training.report import gain_interval

    gain = gain_interval(champion, challenger, "greedy")
    reasons: list[str] = []
    if gain is None:
        reasons.append("no per-prompt results to compare on the held-out prompts")
    else:
        if gain["points"] <= 0 or gain["points"] < cfg.min_gain:
            reasons.append(
                f"gain {gain['points']:+.1f} points over the champion: a challenger must gain more than "
                f"zero and at least promotion.min_gain ({cfg.min_gain:+.1f})"
            )
        if cfg.require_interval_above_zero and gain["low"] <= 0:
            reasons.append(
                f"the {100 * gain['level']:.0f}% interval ({gain['low']:+.1f} to {gain['high']:+.1f}) "
                "does not lie above zero (promotion.require_interval_above_zero)"
            )
    limit = cfg.max_regression if cfg.max_regression is not None else max_regression
    pairs = [
        (f"regression set {name}", result, (champion_sets.get("regression") or {}).get(name))
        for name, result in (challenger_sets.get("regression") or {}).items()
    ]
    pairs.append(("the robustness set", challenger_sets.get("robustness"), champion_sets.get("robustness")))
    regressions = {}
    for label, new, old in pairs:
        if _pass(new) is None or _pass(old) is None:
            continue
        drop = round(_pass(old) - _pass(new), 2)
        regressions[label] = drop
        if drop > limit:
            reasons.append(f"{label}: {drop:.1f} points below the champion (more than {limit:.1f})")
    blocks, noise = _episodes_drop(challenger, champion, limit, regressions)
    reasons += blocks
    promote = not reasons
    if promote:
        reasons.append(
            f"gain {gain['points']:+.1f} points ({gain['low']:+.1f} to {gain['high']:+.1f}) over the "
            f"champion on {gain['prompts']} held-out prompts; no set regressed more than {limit:.1f}"
            + (f" but {noise}" if noise else "")
        )
    return {"promote": promote, "reasons": reasons, "gain": gain, "regressions": regressions}


def _episodes_drop(challenger: dict, champion: dict, limit: float, regressions: dict) -> tuple[list[str], str]:
    """The held-out episodes as a regression check: a drop in success of more than `limit` points whose
    paired interval lies below zero (a few dozen episodes swing by several points on one episode, so
    the point drop alone would block promotions on noise). Records the drop in `regressions`.
    Returns (the reason it blocks, if it does; the text for a drop past `limit` let through as noise)."""
    from rlvrflow.training.report import gain_interval

    new, old = challenger.get("episodes"), champion.get("episodes")
    change = gain_interval(old, new, "greedy") if new and old else None
    if change is None:
        return [], ""
    label = "the held-out episodes"
    regressions[label] = round(-change["points"], 2)
    interval = f"{100 * change['level']:.0f}% interval {change['low']:+.1f} to {change['high']:+.1f}"
    if -change["points"] <= limit:
        return [], ""
    if change["high"] >= 0:
        return [], f"{label}, {-change['points']:.1f} points below the champion, whose {interval} reaches zero"
    return [f"{label}: {-change['points']:.1f} points below the champion (more than {limit:.1f}; {interval})"], ""


def compare(job: Job) -> Result:
    """The champion on tonight's held-out prompts, episodes and sets, tonight's best beside it, and the
    decision (compare.json, with `episode_gain` when the split holds episodes; champion.json,
    champion.samples.jsonl and champion.sets.json as the evaluate stage writes a model's)."""
    import polars as pl

    from rlvrflow.flows.stage_calls import held_out_episodes, measure_model
    from rlvrflow.training.modeling import set_threads
    from rlvrflow.training.report import gain_interval

    spec, out = job.spec, Path(job.out)
    set_threads(spec.training.torch_threads)
    champion_model = str(job.input("champion", "model"))
    champion, champion_sets = measure_model(
        spec,
        "champion",
        champion_model,
        pl.read_parquet(job.input("split", "eval")),
        out / "champion.samples.jsonl",
        episodes=held_out_episodes(job),
    )
    (out / "champion.json").write_text(json.dumps(champion, indent=1, default=str))
    (out / "champion.sets.json").write_text(json.dumps(champion_sets, indent=1, default=str))

    matrix_path = job.input("evaluate", "matrix")
    best = json.loads(matrix_path.read_text())["best"]
    challenger = json.loads((matrix_path.parent / f"{best}.json").read_text())
    gain = gain_interval(champion, challenger, "greedy") or {}
    record: dict[str, Any] = {  # measurements only: the rule is applied when the model is registered
        "champion": {
            "model": champion_model,
            "digest": tree_digest(Path(champion_model)),
            "pass_at_1_greedy": champion.get("pass_at_1_greedy"),
            "result": "champion.json",
            "sets": "champion.sets.json",
        },
        "challenger": {
            "name": best,
            "model": challenger.get("model"),
            "pass_at_1_greedy": challenger.get("pass_at_1_greedy"),
            "result": str(matrix_path.parent / f"{best}.json"),
            "sets": str(matrix_path.parent / f"{best}.sets.json"),
        },
        "gain": gain or None,
        # episodes count apart from the headline gain (training.eval_categories.EPISODES_COUNTED)
        "episode_gain": gain_interval(champion["episodes"], challenger["episodes"], "greedy")
        if champion.get("episodes") and challenger.get("episodes")
        else None,
    }
    (out / "compare.json").write_text(json.dumps(record, indent=1, default=str))
    return Result(
        {"best": best, "gain_points": gain.get("points"), "gain_low": gain.get("low"), "gain_high": gain.get("high")},
        {"compare": "compare.json", "champion": "champion.json", "champion.sets": "champion.sets.json"},
    )


def _measured_decision(compared: Path, cfg: PromotionConfig, max_regression: float) -> dict:
    """The rule applied to the compare stage's measurements (its compare.json)."""
    record = json.loads(compared.read_text())
    here = compared.parent

    def read(path: str) -> dict:
        return json.loads((here / path).read_text())

    champion, champion_sets = read(record["champion"]["result"]), read(record["champion"]["sets"])
    challenger, challenger_sets = read(record["challenger"]["result"]), read(record["challenger"]["sets"])
    return decide(challenger, champion, challenger_sets, champion_sets, cfg, max_regression)


def register_and_promote(
    out: str | Path,
    run_dir: str | Path,
    cfg: PromotionConfig,
    max_regression: float,
    compared: Path | None,
    backend: RegistryConfig | None = None,
) -> dict:
    """Register a finished run's best model, then apply the promotion rule (`cfg`, the `promotion:`
    section): the first model is promoted; a later one when `decide` says so on the compare stage's
    measurements (compared: its compare.json, None when there was no champion) of the model that is
    still the champion, checked by content and again under the registry's lock when promoting.
    backend: the spec's `registry:` section; an MLflow that cannot be reached does not stop the local
    registration and promotion: its errors come back in `mlflow_errors`.
    Returns {model, champion_before, champion, verdict, decision, mlflow_errors}."""
    from rlvrflow.flows.models import ChampionChanged, MirrorError, Registry

    registry = Registry(out, backend)
    mlflow_errors: list[str] = []
    try:
        model = registry.register(run_dir)
    except MirrorError as exc:
        model, mlflow_errors = exc.record, [str(exc)]
    before = registry.champion()
    if before is None:
        decision = {"promote": True, "reasons": ["the first registered model: there is no champion to compare with"]}
    elif compared is None:
        decision = {
            "promote": False,
            "reasons": [
                f"{before['id']} became champion while this run ran, which compared with none; rerun to compare"
            ],
        }
    elif json.loads(Path(compared).read_text())["champion"]["digest"] != tree_digest(Path(before["path"])):
        decision = {
            "promote": False,
            "reasons": [
                f"the champion changed to {before['id']} while this run compared with another; rerun to compare"
            ],
        }
    else:
        decision = _measured_decision(Path(compared), cfg, max_regression)
    if not cfg.auto:
        decision = {
            **decision,
            "promote": False,
            "reasons": [
                *decision["reasons"],
                "promotion.auto is false: promote by hand with `rlvrflow models promote`",
            ],
        }
    if decision["promote"]:
        try:
            registry.promote(
                model["id"], "; ".join(decision["reasons"]), expected_champion=before["id"] if before else None
            )
        except ChampionChanged as exc:
            decision = {**decision, "promote": False, "reasons": [str(exc)]}
        except MirrorError as exc:
            mlflow_errors.append(str(exc))
    now = registry.champion()
    verdict = "promoted" if now is not None and now["id"] == model["id"] else "not promoted"
    return {
        "model": model,
        "champion_before": before,
        "champion": now,
        "verdict": verdict,
        "decision": decision,
        "mlflow_errors": mlflow_errors,
    }


def compare_line(st: dict) -> str:
    if st.get("gain_points") is None:
        return f"tonight's best {st.get('best')} against the champion: no per-prompt results to compare"
    return (
        f"tonight's best {st.get('best')} against the champion: {st['gain_points']:+.1f} points "
        f"({st['gain_low']:+.1f} to {st['gain_high']:+.1f}) on tonight's held-out prompts"
    )
