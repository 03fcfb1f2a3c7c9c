"""The pipeline as a table: one row per stage, run by the one runner (flows/runner.py).

    stage     inputs (other stages' outputs)       spec sections read (besides extra key parts)   fan-out
    prepare   - (source files: extra key)          domain sources cleaning validation             -
    attach    prepare.rows (+ files in params)     verifiers.{rules,self_check,timeout_s,canaries} row ranges
    split     attach.rows                          curriculum.eval_fraction training.seed
                                                   orchestration.max_rows                         -
    sft       attach.rows split.{train,episodes}   training.{tiny,sft,seed,device,episodes}
              (+ model)                            + MODEL_SETTINGS                               -
    tier      split.{train,episodes} sft.model     TIERING_SETTINGS training.{seed,device,episodes}
                                                   verifiers.timeout_s (+ algorithm: episodes
                                                   tiered for grpo only)          whole engine calls
    grpo      sft.model tier.rows split.{eval,     training.{grpo,checkpoint,seed,device,episodes}
              episodes}                            curriculum
                                                   verifiers.{reward,timeout_s} eval + MODEL_SETTINGS -
    dpo       sft.model tier.rows tier.rollouts    training.{dpo,checkpoint,seed,device}
              split.eval                           verifiers.{reward,timeout_s} eval + MODEL_SETTINGS -
    evaluate  split.eval split.train           eval training.{seed,dtype}
              split.episodes sft.model             verifiers.{reward,timeout_s} (+ checkpoints, eval
              policy.summary                       set files, files the rules name: a database)   one per model
    drift     prepare.stats attach.{rows,stats}    drift (+ source files)                          -
              champion_data.profile (the registry's)
    compare   split.eval split.episodes           eval training.{seed,dtype}                          -
              evaluate.matrix champion.model       verifiers.{reward,timeout_s} (+ eval set files)
              (the registry's)

`rlvrflow run` trains with grpo or dpo (training.algorithm); evaluate reads that stage as `policy`:
`run("evaluate", ...)` takes the upstream manifest of the stage named by training.algorithm (passed
as "policy", or under any key, e.g. the evaluate flow's "grpo") and evaluates the SFT model and its
checkpoints, with the regression and robustness sets of the eval section (flows/eval_sets.py).

The verifier pool's size (verifiers.workers) and the task runner change where work runs, never what
it gives, so they are not in any key. The CLI (`rlvrflow clean`, `tier`) and the Prefect flows
(flows/prepare.py ... flows/evaluate.py) all call `run(name, spec, root, upstream, steps)`, so every
entry point builds the same folders.

Adding a stage is one row plus a library call, as the dpo stage was: `stage_calls.dpo` (a `Job -> Result`
around training.train_dpo on build_pairs of tier.rows and tier.rollouts), its row below, then
`run("dpo", spec, root, {"sft": ..., "tier": ..., "split": ...})` from a flow file (flows/dpo.py:
`run_in_flow("dpo", ...)`) and a line in retrain.py. A stage that fans out adds `plan=`
(Job -> items, each with `rows`); a row stage sets `rows=True` and returns kept and rejects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvrflow.flows import drift, promotion, stage_calls
from rlvrflow.flows.cache import Manifest, file_digest, output_digest, tree_digest
from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.flows.runner import Stage, row_counts, run_stage
from rlvrflow.flows.spec import DomainSpec

MODEL_SETTINGS = ("training.prompt_format", "training.system_prompt", "training.dtype", "training.lora")
# The curriculum fields that only decide how GRPO draws from the tiers (or the split's share): tiering reads
# every other one, so a field added to CurriculumConfig enters the tier stage's key unless it is named here.
SAMPLER_ONLY = (
    "weights",
    "category_weights",
    "dedup_window",
    "fallback",
    "when_exhausted",
    "sampler",
    "adaptive",
    "retier_window",
    "eval_fraction",
)
TIERING_SETTINGS = tuple(f"curriculum.{f}" for f in CurriculumConfig.model_fields if f not in SAMPLER_ONLY)


def _digest(p: Path) -> str:
    return tree_digest(p) if p.is_dir() else file_digest(p)


def _source_files(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    return {"files": {str(p): _digest(p) for p in stage_calls.source_files(spec)}}


def referenced_files(spec: DomainSpec) -> list[Path]:
    """Files named by verifier params (e.g. the SQL database): their content is part of the key."""
    found: list[Path] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value and len(value) < 512 and "\n" not in value:
            p = spec.resolve(value)
            if p.exists() and p != spec.base_dir:
                found.append(p)

    walk([rule.model_dump(mode="json") for rule in spec.verifiers.rules])
    return sorted(set(found))


def _verifier_files(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    """The content of files the verifiers read (a SQL database): every stage that scores declares it,
    since the rows carry only the path and the same rows can pass attach against a changed file."""
    return {"files": {str(p): _digest(p) for p in referenced_files(spec)}}


def _tier_inputs(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    """The files the verifiers read, and whether the episode rows are tiered (GRPO's, not DPO's)."""
    return {**_verifier_files(spec, upstream), "episodes_tiered": stage_calls.episodes_tiered(spec)}


def _base_model(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    return {"model": stage_calls.model_identity(spec)}


def _sft_inputs(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    """The base model and the files the verifiers read: SFT replays worked transcripts on an environment's
    database and trains on the tool results it returns."""
    return {**_base_model(spec, upstream), **_verifier_files(spec, upstream)}


def _eval_inputs(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    """The models evaluate reads (SFT and the policy's checkpoints on disk) and the eval set files."""
    from rlvrflow.flows.eval_sets import set_digests

    models = stage_calls.models_to_evaluate(upstream["sft"].path("model"), upstream["policy"].dir)
    return {
        "models": {name: output_digest(Path(path)) for name, path in models.items()},
        "eval_sets": set_digests(spec),
        **_verifier_files(spec, upstream),
    }


def _compare_inputs(spec: DomainSpec, upstream: dict) -> dict[str, Any]:
    from rlvrflow.flows.eval_sets import set_digests

    return {"eval_sets": set_digests(spec), **_verifier_files(spec, upstream)}


def _split_line(st: dict) -> str:
    episodes = f", {st['rows_episodes']} episode rows in episodes.parquet" if st.get("rows_episodes") else ""
    return (
        f"{st.get('rows_train')} train, {st.get('rows_eval')} eval (of {st.get('rows_in')}; "
        f"{st.get('rows_rejected', 0)} over max_rows{episodes})"
    )


def _dpo_line(st: dict) -> str:
    pairs = st.get("pairs") or {}
    return (
        f"{pairs.get('pairs')} pairs from {pairs.get('rows_kept')} of {pairs.get('rows_in')} prompts, "
        f"{st.get('steps')} steps, final checkpoint {Path(str(st.get('final_checkpoint'))).name}"
    )


def _attach_line(st: dict) -> str:
    built = st.get("answer_only_targets") or 0
    return (
        f"{row_counts(st)}; {st.get('outcome_only_rows', 0)} outcome-only rows (no worked solution: RL's, not SFT's)"
        + (f", {built} answer-only SFT targets built (verifiers.answer_only_targets)" if built else "")
    )


def _evaluate_line(st: dict) -> str:
    flagged = "".join(f"; {name} regressed on {', '.join(sets)}" for name, sets in (st.get("regressed") or {}).items())
    reused = f" ({st['reused']} read from the training loop's own evals)" if st.get("reused") else ""
    episodes = f" and {st['episode_prompts']} held-out episodes" if st.get("episode_prompts") else ""
    return f"{st.get('models')} models on the held-out split{episodes}{reused}, best {st.get('best')}{flagged}"


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage(
            "prepare",
            inputs=(),
            sections=("domain", "sources", "cleaning", "validation"),
            code=("cleaning",),
            call=stage_calls.prepare,
            extra_key=_source_files,
            rows=True,
        ),
        Stage(
            "attach",
            inputs=("prepare.rows",),
            sections=(
                "verifiers.rules",
                "verifiers.self_check",
                "verifiers.answer_only_targets",
                "verifiers.timeout_s",
                "verifiers.canaries",
            ),
            code=("verifiers",),
            call=stage_calls.attach,
            plan=stage_calls.attach_plan,
            finish=stage_calls.attach_canaries,
            extra_key=_verifier_files,
            rows=True,
            summary=_attach_line,
        ),
        Stage(
            "split",
            inputs=("attach.rows",),
            sections=("curriculum.eval_fraction", "training.seed", "orchestration.max_rows"),
            code=("curriculum", "verifiers"),  # verifiers: which rows are episodes
            call=stage_calls.split,
            rows=True,
            summary=_split_line,
        ),
        Stage(
            "sft",
            inputs=("attach.rows", "split.train", "split.episodes"),
            sections=(
                "training.tiny",
                "training.sft",
                "training.seed",
                "training.device",
                "training.episodes",
                *MODEL_SETTINGS,
            ),
            code=("training", "engines", "verifiers"),  # verifiers: the worked transcripts' replay
            call=stage_calls.sft,
            extra_key=_sft_inputs,
            summary=lambda st: (
                f"{st.get('rows_used')} rows with a solution ({st.get('skipped_empty_solution')} "
                f"outcome-only rows left to RL)"
                + (f", {st['transcripts_used']} worked transcripts" if st.get("transcripts_used") else "")
                + f", {st.get('steps')} steps, final loss {st.get('final_loss')}"
            ),
        ),
        Stage(
            "tier",
            inputs=("split.train", "split.episodes", "sft.model"),
            # what tiering reads of the curriculum: not the sampler's settings, so a run that changes only
            # how GRPO draws (sampler, weights, dedup_window, ...) reuses the tiers
            sections=(
                *TIERING_SETTINGS,
                "training.seed",
                "training.device",
                "training.episodes",
                "verifiers.timeout_s",
            ),
            code=("curriculum", "engines", "verifiers", "training"),  # training: episodes are played there
            call=stage_calls.tier,
            plan=stage_calls.tier_plan,
            finish=stage_calls.tier_finish,
            extra_key=_tier_inputs,
            rows=True,
            file="tiers",
            sort_by="id",
            summary=lambda st: (
                f"{st.get('rows_in')} prompts: "
                + ", ".join(f"{t} {n}" for t, n in sorted(st.get("tiers", {}).items()))
                + (
                    f"; {st['rl_pool']['sft_rows_in_pool']} of them SFT trained on"
                    if st.get("rl_pool", {}).get("sft_rows_in_pool")
                    else "; none SFT trained on"
                    if st.get("rl_pool")
                    else ""
                )
                + (
                    f"; {st['rl_pool']['episode_rows_left_out']} episode rows not played (dpo)"
                    if st.get("rl_pool", {}).get("episode_rows_left_out")
                    else ""
                )
            ),
        ),
        Stage(
            "grpo",
            inputs=("sft.model", "tier.rows", "split.eval", "split.episodes"),
            sections=(
                "training.grpo",
                "training.checkpoint",
                "training.seed",
                "training.device",
                "training.episodes",
                "curriculum",
                "verifiers.reward",
                "verifiers.timeout_s",
                "eval",
                *MODEL_SETTINGS,
            ),
            code=("training", "curriculum", "engines", "verifiers"),
            call=stage_calls.grpo,
            resumable=True,
            all_ranks=True,
            extra_key=_verifier_files,
            summary=lambda st: (
                f"{st.get('steps')} steps, final checkpoint {Path(str(st.get('final_checkpoint'))).name}"
            ),
        ),
        Stage(
            "dpo",
            inputs=("sft.model", "tier.rows", "tier.rollouts", "split.eval"),
            sections=(
                "training.dpo",
                "training.checkpoint",
                "training.seed",
                "training.device",
                "eval",
                "verifiers.reward",
                "verifiers.timeout_s",
                *MODEL_SETTINGS,
            ),
            code=("training", "curriculum", "engines", "verifiers"),
            call=stage_calls.dpo,
            resumable=True,
            summary=_dpo_line,
            extra_key=_verifier_files,
        ),
        Stage(
            "evaluate",
            inputs=("split.eval", "split.train", "split.episodes", "sft.model", "policy.summary"),
            sections=("eval", "training.seed", "training.dtype", "verifiers.reward", "verifiers.timeout_s"),
            code=("training", "verifiers", "curriculum", "engines"),
            call=stage_calls.evaluate,
            plan=stage_calls.evaluate_plan,
            finish=stage_calls.evaluate_finish,
            extra_key=_eval_inputs,
            summary=_evaluate_line,
        ),
        Stage(
            "drift",
            inputs=("prepare.stats", "attach.rows", "attach.stats", "champion_data.profile"),
            sections=("drift",),
            code=("cleaning", "flows"),
            call=drift.drift,
            extra_key=_source_files,
            summary=drift.drift_line,
        ),
        Stage(
            "compare",
            inputs=("split.eval", "split.episodes", "evaluate.matrix", "champion.model"),
            sections=("eval", "training.seed", "training.dtype", "verifiers.reward", "verifiers.timeout_s"),
            code=("training", "verifiers", "curriculum", "engines", "flows"),
            call=promotion.compare,
            extra_key=_compare_inputs,
            summary=promotion.compare_line,
        ),
    )
}


def run(
    name: str,
    spec: DomainSpec,
    root: str | Path,
    upstream: dict[str, Manifest],
    steps: Any = None,
    force: bool = False,
    **kwargs: Any,
) -> Manifest:
    """Run (or reuse) one stage of the table; `upstream` holds the manifests of the stages it reads
    (evaluate's `policy`: the trained stage's manifest, found by training.algorithm when not given)."""
    if "policy" in STAGES[name].upstream and "policy" not in upstream:
        upstream = {**upstream, **{"policy": m for m in upstream.values() if m.stage == spec.training.algorithm}}
    needed = {k: upstream[k] for k in STAGES[name].upstream if k in upstream}
    return run_stage(STAGES[name], spec, root, needed, steps, force, **kwargs)


def champion_model(path: str | Path) -> Manifest:
    """The registry's champion (an exported model folder) as the `champion` input of compare."""
    path = Path(path).resolve()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"the champion's model folder {path} is gone or incomplete; make another "
            "model current (`rlvrflow models --out OUT rollback` or `promote ID`)"
        )
    return Manifest("champion", "registry", path, {"model": "."}, {"model": tree_digest(path)}, cached=True)


def champion_data(model_dir: str | Path) -> Manifest:
    """The champion's data profile (written when it was registered) as the `champion_data` input of drift."""
    path = Path(model_dir).resolve()
    profile = path / drift.PROFILE_FILE
    if not profile.is_file():
        raise FileNotFoundError(
            f"{profile} is missing: the champion was registered without its data profile; "
            "promote a model registered by this version, or set drift.enabled: false"
        )
    return Manifest(
        "champion_data",
        "registry",
        path,
        {"profile": drift.PROFILE_FILE},
        {"profile": file_digest(profile)},
        cached=True,
    )


def given_model(path: str | Path) -> Manifest:
    """A model folder from outside the pipeline (`rlvrflow tier --model DIR`) as an 'sft' manifest."""
    path = Path(path).resolve()
    return Manifest("sft", "given", path, {"model": "."}, {"model": output_digest(path)}, cached=True)
