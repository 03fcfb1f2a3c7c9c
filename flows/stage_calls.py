"""The library calls of the stage table: each takes a `Job` and returns a `Result` (flows/runner.py).

Each is a thin adapter around one library function (cleaning.prepare, verifiers.attach,
curriculum.assign_split, training.run_sft, curriculum.tier_rows, training.train_grpo or
training.train_dpo, training.evaluate): it reads the job's input files and the spec sections its table row declares,
calls the library, and returns rows or the files it wrote. No Prefect, no cache logic here.
Every verifier call takes its pool settings from the one `verifiers:` section (`workers`, `timeout_s`).
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

from rlvrflow.flows.errors import DataError
from rlvrflow.flows.runner import Job, Result
from rlvrflow.flows.spec import DomainSpec

# ----- prepare ----------------------------------------------------------------------------------


def source_files(spec: DomainSpec) -> list[Path]:
    """Every file the spec's sources match; a source that matches nothing is a data error."""
    files: list[Path] = []
    for i, src in enumerate(spec.sources):
        patterns = src.path if isinstance(src.path, (list, tuple)) else [src.path]
        matched = [
            Path(p) for pattern in patterns for p in sorted(glob.glob(str(spec.resolve(pattern)), recursive=True))
        ]
        if not matched:
            raise DataError(
                f"prepare: sources[{i}] ({src.name}): {patterns} matches no file under {spec.base_dir}; "
                "fix `path` in the spec or generate the raw logs first "
                "(e.g. python examples/retail/generate.py --out examples/retail/raw --seed 0)"
            )
        files += matched
    return files


def prepare(job: Job) -> Result:
    """cleaning.prepare (ingest, clean, dedup, validate) writing its files into the stage folder; with
    `orchestration.runner: dask` its per-file, per-shard and per-chunk tasks fan out over the cluster."""
    from rlvrflow import cleaning

    spec = job.spec
    args = (spec.sources, spec.cleaning, spec.validation, spec.domain, spec.base_dir, Path(job.out))
    if spec.orchestration.runner == "dask":
        result = _prepare_on_dask(spec, args)
    else:
        result = cleaning.prepare(*args, True)  # progress bars only on a terminal
    files = {
        "rows": "clean.parquet",
        "rejects": "rejects.parquet",
        "stats": "stats.json",
        "validation": "validation.json",
    }
    return Result(dict(result.stats), {k: v for k, v in files.items() if (Path(job.out) / v).exists()})


def _prepare_on_dask(spec: DomainSpec, args: tuple):
    """Inside a Dask task (Prefect's Dask task runner) fan out from this worker on its own cluster;
    elsewhere (the CLI) on `orchestration.address`, or on a local cluster of `orchestration.task_workers`."""
    from distributed import get_worker, worker_client

    from rlvrflow.cleaning.dask_run import local_cluster, prepare_on_dask

    try:
        get_worker()
    except ValueError:  # not in a Dask worker
        if spec.orchestration.address:
            return prepare_on_dask(spec.orchestration.address, *args)
        with local_cluster(spec.orchestration.task_workers) as client:
            return prepare_on_dask(client, *args)
    with worker_client() as client:  # secedes from the worker's pool while its tasks run
        return prepare_on_dask(client, *args)


# ----- attach (fanned out over row ranges) -----------------------------------------------------


def attach_plan(job: Job) -> list[dict[str, Any]]:
    import polars as pl

    n = pl.scan_parquet(job.input("prepare", "rows")).select(pl.len()).collect().item()
    size = job.spec.orchestration.chunk_rows
    return [{"offset": off, "rows": min(size, n - off)} for off in range(0, n, size)] or [{"offset": 0, "rows": 0}]


def attach(job: Job) -> Result:
    """verifiers.attach on one row range of the clean rows."""
    import polars as pl

    from rlvrflow.verifiers.attaching import attach as attach_rows

    spec = job.spec
    df = pl.read_parquet(job.input("prepare", "rows")).slice(job.item["offset"], job.item["rows"])
    kept, rejects, stats = attach_rows(df, spec.verifiers, spec.base_dir, workers=spec.verifiers.workers)
    return Result(dict(stats), kept=kept, rejects=rejects)


def attach_canaries(job: Job, stats: dict) -> Result:
    """Probe every rule with the reward canaries (verifiers/canary.py) and every environment with the
    scripted policies of verifiers/episode_canary.py; the report goes to ROOT/canary_report.json; a
    rule that scores a canary, or an environment that pays one, is a data error naming the rule."""
    import logging

    import polars as pl

    from rlvrflow.verifiers import canary
    from rlvrflow.verifiers.episode_canary import environment_summary, probe_environments

    cfg = job.spec.verifiers
    if not cfg.canaries.enabled:
        return Result({})
    rows = pl.read_parquet(
        Path(job.out) / "attach.parquet",
        columns=["id", "category", "prompt", "reference", "verifier", "verifier_params"],
    ).to_dicts()
    report = canary.probe(rows, cfg.rules, cfg.canaries, workers=cfg.workers, timeout_s=cfg.timeout_s)
    report["priors"] = canary.prior_probe(rows, cfg.rules, cfg.canaries, workers=cfg.workers, timeout_s=cfg.timeout_s)
    report["environments"] = probe_environments(rows, cfg.rules, cfg.canaries, job.spec.base_dir)
    report_path = Path(job.root) / "canary_report.json"
    report_path.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    log = logging.getLogger("rlvrflow.attach")
    log.info(canary.summary(report))
    if not report["ok"]:
        raise DataError(f"attach: {canary.summary(report)}\n  full report: {report_path}")
    if report["environments"]["rules"]:
        log.info(environment_summary(report["environments"]))
    if not report["environments"]["ok"]:
        raise DataError(f"attach: {environment_summary(report['environments'])}\n  full report: {report_path}")
    priors = canary.prior_summary(report["priors"], cfg.canaries.max_prior_share)
    if any(p["stop"] for p in report["priors"]):
        raise DataError(f"attach: {priors}\n  full report: {report_path}")
    (log.warning if report["priors"] else log.info)(priors)
    environments = report["environments"]["rules"]
    return Result(
        {
            "canaries": {
                "ok": True,
                "rules": len(report["rules"]),
                "verdicts": sum(r["verdicts"] for r in report["rules"]),
                "scored": {r["category"]: r["scored"] for r in report["rules"] if r["scored"]},
                "priors": report["priors"],
                "environments": {e["category"]: e["passed"] for e in environments},
            },
            "warnings": [*stats.get("warnings", []), *(priors.splitlines() if report["priors"] else [])],
        }
    )


# ----- split ------------------------------------------------------------------------------------


def split(job: Job) -> Result:
    """curriculum.assign_split, then train.parquet / eval.parquet, each the first
    orchestration.max_rows rows by id when set (the rest are rejected as over_max_rows).
    Rows of an environment's category (verifier `episode`) go to episodes.parquet with their split
    (also the first max_rows of each), never to train.parquet or eval.parquet, which hold single
    replies: the stages that work on episodes (SFT's transcripts, tiering, GRPO, evaluate and compare)
    read them there."""
    import polars as pl

    from rlvrflow import curriculum
    from rlvrflow.cleaning.stage import make_stats, reject_frame
    from rlvrflow.verifiers.config import EPISODE

    spec = job.spec
    df = curriculum.assign_split(
        pl.read_parquet(job.input("attach", "rows")), spec.curriculum.eval_fraction, spec.training.seed
    )
    rows_in, episodes = df.height, df.filter(pl.col("verifier") == EPISODE).sort("id")
    df = df.filter(pl.col("verifier") != EPISODE)
    cap = spec.orchestration.max_rows
    if cap:  # the first max_rows episode rows of each split, as for the other rows
        parts = [episodes.filter(pl.col("split") == part) for part in ("train", "eval")]
        dropped = [p.slice(cap) for p in parts]
        episodes = pl.concat([p.head(cap) for p in parts]).sort("id")
    else:
        dropped = []
    episodes.write_parquet(Path(job.out) / "episodes.parquet")
    kept, counts = [episodes], {"rows_episodes": episodes.height}
    for part in ("train", "eval"):
        rows = df.filter(pl.col("split") == part).sort("id")
        kept.append(rows.head(cap) if cap else rows)
        dropped.append(rows.slice(cap) if cap else rows.head(0))
        kept[-1].write_parquet(Path(job.out) / f"{part}.parquet")
        counts[f"rows_{part}"] = kept[-1].height
    if counts["rows_train"] == 0 or counts["rows_eval"] == 0:
        raise DataError(
            f"split: {counts['rows_train']} train and {counts['rows_eval']} eval rows from "
            f"{df.height} verified rows; both must be non-empty: add rows or change "
            "curriculum.eval_fraction"
        )
    rejects = reject_frame(
        pl.concat(dropped), "split", "over_max_rows", f"beyond orchestration.max_rows={cap} rows of its split"
    )
    kept_all = pl.concat(kept)
    stats = make_stats(rows_in, kept_all, rejects, 0.0, counts)
    return Result(
        stats, {"train": "train.parquet", "eval": "eval.parquet", "episodes": "episodes.parquet"}, kept_all, rejects
    )


# ----- SFT --------------------------------------------------------------------------------------


def training_config(spec: DomainSpec):
    """The training section with a local model path made absolute against the spec's folder."""
    cfg = spec.training
    return cfg if cfg.is_embedded else cfg.model_copy(update={"model": str(spec.resolve(cfg.model))})


def model_identity(spec: DomainSpec) -> Any:
    """What identifies the base model cheaply: 'embedded'; for 'embedded-base' the digest of the shipped
    base's weights and tokenizer (a rebuilt base is another model); else each file's name, size and mtime."""
    cfg = training_config(spec)
    if cfg.model == "embedded-base":
        from rlvrflow.training.tiny_base import BASE_DIR, base_digest

        return ["embedded-base", base_digest(BASE_DIR)]
    if cfg.is_embedded:
        return "embedded"
    root = Path(cfg.model)
    if not root.is_dir():
        return str(root)
    return sorted(
        (p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()
    )


def corpus_texts(df, episodes: bool = True) -> list[str]:
    """Texts the embedded tokenizer is built from: every prompt, solution and reference, and each
    environment's instructions; without `episodes` (training.episodes: false) none of an environment's
    rows, which no stage then trains on."""
    from rlvrflow.verifiers.config import EPISODE

    texts = []
    if "verifier" in df.columns:
        is_episode = df["verifier"] == EPISODE
        if episodes:
            params = set(df.filter(is_episode)["verifier_params"].to_list())
            texts = [json.loads(p).get("instructions") or "" for p in sorted(params)]
        else:
            df = df.filter(~is_episode)
    return [t for col in ("prompt", "solution", "reference") if col in df.columns for t in df[col].to_list() if t] + [
        t for t in texts if t
    ]


def episode_rows(job: Job, part: str = "train"):
    """The rows of environment categories in the split `part` (split.episodes), none with
    training.episodes: false."""
    import polars as pl

    rows = pl.read_parquet(job.input("split", "episodes"))
    return rows.filter(pl.col("split") == part) if job.spec.training.episodes else rows.head(0)


def sft(job: Job) -> Result:
    """training.resolve_base_model + training.run_sft into base/ and sft/, on the train rows' solutions
    and the worked transcripts of the train split's episode rows (training.episodes)."""
    import polars as pl

    from rlvrflow.training.sft import run_sft
    from rlvrflow.training.tiny_model import resolve_base_model

    cfg = training_config(job.spec)
    out = Path(job.out)
    episodes = episode_rows(job)
    if episodes.height and cfg.algorithm == "grpo":  # what GRPO cannot play episodes with, before SFT trains
        from rlvrflow.training.distributed import dist_env
        from rlvrflow.training.grpo_episodes import check_supported

        check_supported(cfg.grpo, dist_env().is_distributed)
    texts = corpus_texts(pl.read_parquet(job.input("attach", "rows")), cfg.episodes)
    base = resolve_base_model(cfg, texts, out / "base", cfg.seed)
    train = pl.read_parquet(job.input("split", "train"))
    model = run_sft(base, train, cfg, out / "sft", cfg.seed, episode_rows=episodes)
    stats = json.loads((Path(model) / "sft_stats.json").read_text())
    return Result({**stats, "base_model": str(base)}, {"model": "sft"})


# ----- tier (fanned out in chunks of whole engine calls) -------------------------------------


def tier_plan(job: Job) -> list[dict[str, Any]]:
    """Chunks of whole engine calls in tiering's own (seed, id) order, all tiered with the run's seed:
    the tiers are the same for any chunk_rows, any runner and `rlvrflow tier` (curriculum/tiering.py)."""
    from rlvrflow.curriculum.tiering import call_chunks

    from rlvrflow.verifiers.config import EPISODE

    pool = tier_pool(job)[0]
    ids = pool["id"].to_list()
    if None in ids or len(set(ids)) != len(ids):  # chunks select rows by id
        raise DataError(
            f"tier: the train split's ids must be unique and non-empty ({len(ids)} rows, "
            f"{len(set(ids) - {None})} distinct ids)"
        )
    spec = job.spec
    # episode rows (an environment's category) are tiered in chunks of their own: whole play calls
    kinds = [
        pool.filter(pool["verifier"] != EPISODE)["id"].to_list(),
        pool.filter(pool["verifier"] == EPISODE)["id"].to_list(),
    ]
    if spec.curriculum.engine == "vllm":  # one engine start per kind (vLLM batches them itself)
        chunks = [[i for chunk in call_chunks(k, spec.training.seed, len(k)) for i in chunk] for k in kinds if k]
    else:
        chunks = [c for k in kinds if k for c in call_chunks(k, spec.training.seed, spec.orchestration.chunk_rows)]
    return [{"ids": chunk, "rows": len(chunk)} for chunk in chunks] or [{"ids": [], "rows": 0}]


def train_rows(job: Job):
    """The train split's rows and, with training.episodes, its episode rows (split.episodes)."""
    import polars as pl

    return pl.concat([pl.read_parquet(job.input("split", "train")), episode_rows(job)], how="diagonal_relaxed")


def episodes_tiered(spec) -> bool:
    """Whether tiering plays the episode rows: only for GRPO, which trains on them (DPO pairs single replies)."""
    return spec.training.episodes and spec.training.algorithm == "grpo"


def tier_pool(job: Job):
    """(rows, info): the train rows tiering and GRPO draw from (curriculum.rl_rows.rl_pool), episode
    rows among them (outcome-only episode rows under rl_rows unseen, as for single replies). Under
    training.algorithm dpo the episode rows are left out before the pool is drawn, counted in
    info["episode_rows_left_out"]: no DPO pair is made of them, so playing them would only cost time."""
    import polars as pl

    from rlvrflow.curriculum.rl_rows import rl_pool
    from rlvrflow.verifiers.config import EPISODE

    cur = job.spec.curriculum
    train = train_rows(job)
    left_out = 0
    if not episodes_tiered(job.spec):
        singles = train.filter(pl.col("verifier") != EPISODE)
        train, left_out = singles, train.height - singles.height
    try:
        pool, info = rl_pool(train, cur.rl_rows, cur.max_rows, job.spec.training.seed)
    except ValueError as e:
        raise DataError(f"tier: {e}") from None
    return pool, {**info, "episode_rows_left_out": left_out}


def tier(job: Job) -> Result:
    """curriculum.tier_rows on the train rows of this chunk, with its own engine; a chunk of episode
    rows is tiered by curriculum.episode_tiers (episodes played in the run's episode format)."""
    import polars as pl

    from rlvrflow.curriculum.episode_tiers import tier_episodes
    from rlvrflow.curriculum.tiering import ROLLOUTS_FILE, default_score_fn, tier_with_rollouts
    from rlvrflow.engines.factory import make_engine, release
    from rlvrflow.training.eval_episodes import episode_view
    from rlvrflow.training.modeling import pick_device, set_threads
    from rlvrflow.verifiers.config import EPISODE

    spec = job.spec
    set_threads(spec.training.torch_threads)  # the engine's sampling obeys training.torch_threads too
    df = train_rows(job).filter(pl.col("id").is_in(job.item["ids"]))
    episodes = df.height > 0 and (df["verifier"] == EPISODE).all()
    model = job.input("sft", "model")
    engine = make_engine(
        spec.curriculum.engine,
        model,
        device=str(pick_device(spec.training.device)),
        batch_size=spec.curriculum.engine_batch_size,
        seed=spec.training.seed,
        field="curriculum.engine",
    )
    score = default_score_fn(spec.verifiers.workers, spec.verifiers.timeout_s)
    try:
        if episodes:  # seen as evaluate and GRPO see it: the episode format's rendering, its token ids as they are
            view, fmt = episode_view(engine)
            tiered, rollouts = tier_episodes(df, view, spec.curriculum, spec.training.seed, fmt)
        else:
            tiered, rollouts = tier_with_rollouts(df, engine, spec.curriculum, spec.training.seed, score_fn=score)
    finally:
        release(engine)
    rejects = df.head(0).with_columns(pl.lit(None, pl.String).alias(c) for c in ("stage", "reason", "detail"))
    stats = {"rows_in": df.height, "rows_kept": tiered.height, "rows_rejected": 0, "rejected_by_reason": {}}
    return Result(stats, kept=tiered, rejects=rejects, tables={"rollouts": (ROLLOUTS_FILE, rollouts)})


def tier_finish(job: Job, stats: dict) -> Result:
    """The tier report (curriculum.tier_report: table, markdown, histogram), the counts per tier and
    where the rows came from (curriculum.rl_rows.describe, also logged)."""
    import logging

    import polars as pl

    from rlvrflow.curriculum.rl_rows import describe
    from rlvrflow.curriculum.report import tier_report

    tiered = pl.read_parquet(Path(job.out) / "tiers.parquet")
    written = tier_report(tiered, job.out, k=job.spec.curriculum.k)
    info = tier_pool(job)[1]
    logging.getLogger("rlvrflow.tier").info(describe(info))
    counts = {t: int(n) for t, n in tiered["tier"].value_counts().iter_rows()} if tiered.height else {}
    names = {"table": "tier_table.csv", "markdown": "tier_report.md", "histogram": "tier_histogram.png"}
    files = {k: v for k, v in names.items() if (Path(job.out) / v).exists()}
    assert set(files) >= {"table", "markdown"}, written
    return Result({"tiers": counts, "rl_pool": info}, files)


# ----- GRPO -------------------------------------------------------------------------------------


def grpo(job: Job) -> Result:
    """training.train_grpo from the SFT model on the tiered rows; resumes from the folder's checkpoints.
    Its held-out evals also play the held-out episodes (held_out_episodes: none with training.episodes
    false), reported under each eval record's `episodes`."""
    import polars as pl

    from rlvrflow.training.grpo import train_grpo

    spec = job.spec

    def progress(step: int, steps: int, metrics: dict) -> None:
        if job.progress is not None:
            job.progress(step / max(1, steps or spec.training.grpo.max_steps))

    summary = train_grpo(
        str(job.input("sft", "model")),
        pl.read_parquet(job.input("tier", "rows")),
        training_config(spec),
        spec.curriculum,
        spec.verifiers.reward,
        pl.read_parquet(job.input("split", "eval")),
        spec.eval,
        job.out,
        spec.training.seed,
        on_progress=progress,
        workers=spec.verifiers.workers,
        timeout_s=spec.verifiers.timeout_s,
        eval_episodes=held_out_episodes(job),
    )
    stats = {
        k: summary.get(k)
        for k in (
            "steps",
            "seconds",
            "steps_per_second",
            "zero_variance_fraction",
            "groups_seen",
            "groups_zero_variance",
            "steps_without_update",
            "final_checkpoint",
            "best_checkpoint",
            "warnings",
            "notes",
        )
    }
    files = {"summary": "summary.json", "metrics": "metrics.jsonl"}
    if (Path(job.out) / "curves.png").exists():
        files["curves"] = "curves.png"
    return Result(stats, files)


# ----- DPO: from the SFT model on pairs of tiering's own samples ---------------------------


def dpo(job: Job) -> Result:
    """training.dpo_data.build_pairs from the tier stage's rows and rollouts, then training.train_dpo;
    the pairs go to dpo_pairs.jsonl (what export-dpo writes) and resume from the folder's checkpoints.
    Episode rows are left out (`episode_row` in the pair stats): a pair is two single replies."""
    import logging

    import polars as pl

    from rlvrflow.io import write_text
    from rlvrflow.training.dpo import train_dpo
    from rlvrflow.training.dpo_data import PAIRS_FILE, build_pairs

    spec = job.spec
    pairs, pair_stats = build_pairs(
        pl.read_parquet(job.input("tier", "rows")),
        pl.read_parquet(job.input("tier", "rollouts")),
        spec.training.dpo,
        spec.training.seed,
    )
    if not pairs:
        raise DataError(
            f"dpo: no prompt of tiers {list(spec.training.dpo.tiers)} has both a correct and an incorrect "
            f"sample (of {pair_stats['rows_in']} tiered prompts, dropped: "
            f"{pair_stats['rejected_by_reason']}); widen training.dpo.tiers, raise curriculum.n_samples, "
            "or use training.algorithm: grpo"
        )
    if pair_stats["rejected_by_reason"].get("episode_row"):
        logging.getLogger("rlvrflow.dpo").info(
            "dpo: %d episode rows left out (a conversation, not one reply; GRPO trains on them)",
            pair_stats["rejected_by_reason"]["episode_row"],
        )
    write_text(Path(job.out) / PAIRS_FILE, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))

    def progress(step: int, steps: int, metrics: dict) -> None:
        if job.progress is not None:
            job.progress(step / max(1, steps or spec.training.dpo.max_steps))

    summary = train_dpo(
        str(job.input("sft", "model")),
        pairs,
        training_config(spec),
        pl.read_parquet(job.input("split", "eval")),
        spec.eval,
        job.out,
        spec.training.seed,
        on_progress=progress,
        reward_cfg=spec.verifiers.reward,
        workers=spec.verifiers.workers,
        timeout_s=spec.verifiers.timeout_s,
    )
    stats = {
        "pairs": pair_stats,
        **{
            k: summary.get(k)
            for k in ("steps", "seconds", "steps_per_second", "final_checkpoint", "best_checkpoint", "warnings")
        },
    }
    files = {"summary": "summary.json", "metrics": "metrics.jsonl", "pairs": PAIRS_FILE}
    if (Path(job.out) / "curves.png").exists():
        files["curves"] = "curves.png"
    return Result(stats, files)


# ----- evaluate: the SFT baseline and every checkpoint of the trained policy, one call each ----


def models_to_evaluate(sft_model: str | Path, policy_dir: str | Path) -> dict[str, str]:
    """The SFT model and the checkpoints (GRPO's or DPO's) still on disk, by name (oldest first)."""
    from rlvrflow.training.checkpoint import list_checkpoints

    return {"sft": str(sft_model), **{Path(p).name: str(p) for _, p in list_checkpoints(policy_dir)}}


def evaluate_plan(job: Job) -> list[dict[str, Any]]:
    models = models_to_evaluate(job.input("sft", "model"), job.input("policy", "dir"))
    return [{"name": name, "model": path} for name, path in models.items()]


def measure_model(
    spec, name: str, model: str, rows, samples: Path, reuse=None, episodes: list[dict] | None = None
) -> tuple[dict, dict]:
    """One model's measurement, as the evaluate stage takes it: the held-out `rows` (its samples into
    `samples`), the held-out `episodes` (rows of an environment's category: one greedy episode each,
    training.eval_episodes; the result's `episodes`, their transcripts appended to `samples`), then
    each regression set and the robustness set, one engine (one model load) for all.
    `reuse(engine)` may give the training loop's own record of the held-out eval ({result, samples,
    path, episodes, episode_samples}); the result then names it in `reused_from`, and the episodes'
    result holds it too when the loop played these same episodes. Returns (result, {regression,
    robustness})."""
    from rlvrflow.engines.factory import release
    from rlvrflow.flows.eval_sets import load_sets
    from rlvrflow.training.eval import eval_engine
    from rlvrflow.training.eval import evaluate as run_eval

    sets = load_sets(spec)  # before the main eval: a bad set file fails in seconds, not after it
    engine = eval_engine(model, spec.eval, spec.training.device, spec.training.dtype, spec.training.seed)

    def evaluate_on(part, samples_path: Path | None = None) -> dict:
        return run_eval(
            model,
            part,
            spec.eval,
            spec.training.seed,
            workers=spec.verifiers.workers,
            device=spec.training.device,
            dtype=spec.training.dtype,
            samples_path=samples_path,
            reward_cfg=spec.verifiers.reward,
            timeout_s=spec.verifiers.timeout_s,
            engine=engine,
        )

    try:
        loop = reuse(engine) if reuse is not None else None
        if loop is None:
            result = {"name": name, **evaluate_on(rows, samples)}
        else:
            samples.write_text(loop["samples"], encoding="utf-8")
            result = {"name": name, "model": str(model), **loop["result"], "reused_from": str(loop["path"])}
        if episodes:
            result["episodes"] = loop_episodes(loop, episodes, samples) or measure_episodes(
                spec, engine, episodes, samples
            )
        extra = {
            "regression": {set_name: evaluate_on(part) for set_name, part in sets.regression.items()},
            "robustness": None if sets.robustness is None else evaluate_on(sets.robustness),
        }
    finally:
        release(engine)
    return result, extra


def loop_episodes(loop: dict | None, rows: list[dict], samples: Path) -> dict | None:
    """The training loop's result for the held-out episode `rows` when it played exactly these rows (by
    id) on the weights its record belongs to; their sample records appended to `samples`. None: play them."""
    from rlvrflow.io import append_jsonl

    found = (loop or {}).get("episodes")
    if not found or sorted(found.get("by_prompt", {}).get("ids", [])) != sorted(str(r["id"]) for r in rows):
        return None
    for record in loop["episode_samples"]:
        append_jsonl(samples, record)
    return {**found, "reused_from": str(loop["path"])}


def measure_episodes(spec, engine, rows: list[dict], samples: Path) -> dict:
    """training.eval_episodes on `engine` (under the eval's precision, as training.eval.evaluate runs
    its engine), the transcripts appended to the samples file."""
    import contextlib

    from rlvrflow.engines import HFEngine
    from rlvrflow.io import append_jsonl
    from rlvrflow.training.eval_episodes import evaluate_episode_rows
    from rlvrflow.training.modeling import pick_device
    from rlvrflow.training.precision import autocast, resolve_dtype

    dev = pick_device(spec.training.device)
    hf = isinstance(engine, HFEngine)
    with autocast(dev, resolve_dtype(spec.training.dtype, dev)) if hf else contextlib.nullcontext():
        result, records = evaluate_episode_rows(
            engine,
            rows,
            spec.eval.episode_max_new_tokens,
            spec.training.seed,
            spec.eval.samples_per_category,
            spec.verifiers.reward,
        )
    for record in records:
        append_jsonl(samples, record)
    return result


def held_out_episodes(job: Job) -> list[dict]:
    """The eval split's rows of the environment categories (split's episodes.parquet); with
    eval.max_prompts, at most that many, chosen as the single-reply prompts are (select_eval_tasks:
    each category's share, by a hash of the id)."""
    import polars as pl

    from rlvrflow.training.eval_episodes import held_out_episode_rows

    if not job.spec.training.episodes:
        return []  # the run does not train on them (episodes_skipped says so in the matrix and report)
    return held_out_episode_rows(pl.read_parquet(job.input("split", "episodes")), job.spec.eval)


def episodes_skipped(job: Job) -> str | None:
    """Why the held-out episodes were not played, when the split has some and training.episodes is false."""
    import polars as pl

    if job.spec.training.episodes:
        return None
    held = pl.read_parquet(job.input("split", "episodes")).filter(pl.col("split") == "eval").height
    if not held:
        return None
    return (
        f"{held} held-out episode rows not played: training.episodes is false, so the run neither trains nor "
        "evaluates on them (set it true, with a model whose positions hold an episode)"
    )


def evaluate(job: Job) -> Result:
    """measure_model of one model on the held-out split (<name>.json, its samples in
    <name>.samples.jsonl), the held-out episodes (<name>.json's `episodes`, their transcripts in the
    samples file), each regression set and the robustness set (<name>.sets.json).

    The held-out eval is the training loop's own record of these weights when it kept one (`loop_eval`);
    <name>.json then names the record in `reused_from`."""
    import polars as pl

    from rlvrflow.training.modeling import set_threads

    spec, name, out = job.spec, job.item["name"], Path(job.out)
    set_threads(spec.training.torch_threads)
    result, extra = measure_model(
        spec,
        name,
        job.item["model"],
        pl.read_parquet(job.input("split", "eval")),
        out / f"{name}.samples.jsonl",
        reuse=lambda engine: loop_eval(job, engine),
        episodes=held_out_episodes(job),
    )
    (out / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    (out / f"{name}.sets.json").write_text(json.dumps(extra, indent=1, default=str))
    return Result(
        {}, {name: f"{name}.json", f"{name}.samples": f"{name}.samples.jsonl", f"{name}.sets": f"{name}.sets.json"}
    )


def loop_eval(job: Job, engine) -> dict | None:
    """The trained stage's own held-out eval of this job's model ({result, samples, path, episodes,
    episode_samples}: training.eval.read_loop_eval), or None.

    GRPO and DPO evaluate the model they start from and each checkpoint on these rows, with the eval,
    reward, seed and precision settings this stage reads (all in their own stage key), and keep each
    eval once its weights are on disk (training/README.md says why the loops own this eval). They
    generate with HF, so a vLLM eval engine (`eval.engine: vllm`) evaluates anew."""
    from rlvrflow.engines import HFEngine
    from rlvrflow.training.eval import read_loop_eval

    if not isinstance(engine, HFEngine):
        return None
    return read_loop_eval(job.input("policy", "dir"), job.item["name"])


def evaluate_finish(job: Job, stats: dict) -> Result:
    """eval_table.json (each model's headline metrics, the SFT baseline first, and its episode success)
    and eval_matrix.json (training.eval_matrix: every dimension per model, the constant baseline's row,
    the best model by decide_best; `categories`: training.eval_categories, every category with each
    model's pass@1 and gain over SFT, episode categories included; `headline_scope`: how episodes
    count), and constant.json (training.baseline: the constants and their held-out scores)."""
    import logging

    import polars as pl

    from rlvrflow.training.baseline import constant_baseline
    from rlvrflow.training.eval import select_eval_tasks
    from rlvrflow.training.eval_categories import EPISODES_COUNTED, category_rows
    from rlvrflow.training.eval_matrix import build_matrix, decide_best

    cfg, out, spec = job.spec.eval, Path(job.out), job.spec
    table, results, sets = [], {}, {}
    for item in evaluate_plan(job):
        name = item["name"]
        results[name] = json.loads((out / f"{name}.json").read_text())
        sets[name] = json.loads((out / f"{name}.sets.json").read_text())
        table.append(
            {
                k: results[name].get(k)
                for k in (
                    "name",
                    "model",
                    "pass_at_1_greedy",
                    "pass_at_1_sampled",
                    "pass_at_k",
                    "format_rate",
                    "length_mean",
                    "n_prompts",
                )
            }
            | {"episode_success": (results[name].get("episodes") or {}).get("pass_at_1_greedy")}
        )
    regression = {s.name: {n: sets[n]["regression"][s.name] for n in results} for s in cfg.regression_sets}
    robustness = {n: sets[n]["robustness"] for n in results if sets[n]["robustness"] is not None}
    constant = constant_baseline(
        pl.read_parquet(job.input("split", "train")).to_dicts(),
        select_eval_tasks(pl.read_parquet(job.input("split", "eval")), cfg),
        seed=spec.training.seed,
        workers=spec.verifiers.workers,
        timeout_s=spec.verifiers.timeout_s,
    )
    (out / "constant.json").write_text(json.dumps(constant, indent=1, ensure_ascii=False))
    rows = build_matrix(results, robustness or None, regression, cfg.max_regression, constant=constant)
    decision = decide_best(rows, cfg.max_regression)
    best = decision.best
    matrix = {
        "rows": rows,
        "max_regression": cfg.max_regression,
        "best": best,
        "decision": decision.to_dict(),
        "best_model": results[best]["model"],
        "regression_sets": [s.name for s in cfg.regression_sets],
        "robustness_set": cfg.robustness_set,
        "categories": category_rows(results),
        "headline_scope": EPISODES_COUNTED,
        "episodes_skipped": episodes_skipped(job),
    }
    (out / "eval_table.json").write_text(json.dumps(table, indent=1, default=str))
    (out / "eval_matrix.json").write_text(json.dumps(matrix, indent=1, default=str, ensure_ascii=False))
    flagged = {r["name"]: r["regressed"] for r in rows if r["regressed"]}
    reused = sum("reused_from" in r for r in results.values())
    if decision.warning:
        logging.getLogger("rlvrflow.evaluate").warning(decision.warning)
    return Result(
        {
            "models": len(table),
            "reused": reused,
            "best": best,
            "regressed": flagged,
            "constant_pass_at_1_greedy": constant["pass_at_1_greedy"],
            "episode_prompts": (results["sft"].get("episodes") or {}).get("n_prompts", 0),
            "no_gain": decision.no_gain,
            "warnings": [decision.warning] if decision.warning else [],
        },
        {"table": "eval_table.json", "matrix": "eval_matrix.json", "constant": "constant.json"},
    )
