"""Held-out evaluation of a checkpoint, independent of training.

For each eval prompt: one greedy completion and `n_samples` sampled ones, judged by the row's
verifier. Metrics: pass@1 greedy, pass@1 sampled (mean c/n), unbiased pass@k, format rate (the
verifier could read an answer: status correct or wrong), completion length mean/p50/p90 in tokens,
per-prompt variance of sampled success, and the same pass rates per category.

    evaluate("runs/x/step_000100", eval_df, EvalConfig(), seed=0, samples_path="runs/x/eval/step_000100.samples.jsonl")
    md = samples_markdown(read_samples(sft_samples), read_samples(ckpt_samples), "sft", "step_000100")

Generations to read: with `samples_path`, an eval also writes SAMPLE_FIELDS records for
`cfg.samples_per_category` prompts of each category, the greedy completion and the first sampled
one of each, with verdict status, verifier score and the shaped reward (`verifiers.reward` under
`reward_cfg`, the default RewardConfig when None). The prompts are picked by a hash of (seed, id),
so every checkpoint evaluated with the same rows and seed writes the same prompts, and
`samples_markdown` can put two evals side by side.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

from rlvrflow.curriculum import pass_at_k
from rlvrflow.io import read_jsonl, write_text

from rlvrflow.training.config import EvalConfig
from rlvrflow.training.scoring import Task, score_groups, tasks_from_df

log = logging.getLogger("rlvrflow.training")

PARSED = ("correct", "wrong")
SAMPLE_FIELDS = ("id", "category", "prompt", "mode", "response", "status", "score", "reward", "n_tokens")


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def select_eval_tasks(eval_df, cfg: EvalConfig) -> list[Task]:
    """Eval tasks in id order; with `cfg.max_prompts`, a subset that keeps the categories' shares.

    Each category gets its proportional share of max_prompts (largest remainders first, ties by
    category name), filled in the order of a hash of the id, so the subset is a uniform sample of
    each category. Ids carry their source's prefix (`ERP...`, `T2601-...`), and a category's lowest
    ids would all come from one source: on the retail sample the 200 lowest took every discount from
    the Chinese ERP export and every arithmetic row from January's tickets, and a model's gain on that
    subset differed from its gain on the whole held-out split by 7 points. No randomness: the same
    rows give the same subset, and within a category adding rows never swaps out a chosen row for one
    ranked below it.
    """
    tasks = sorted(tasks_from_df(eval_df), key=lambda t: t.id)
    if not cfg.max_prompts or cfg.max_prompts >= len(tasks):
        return tasks
    by_cat: dict[str, list[Task]] = {}
    for t in tasks:
        by_cat.setdefault(t.category, []).append(t)
    exact = {c: cfg.max_prompts * len(ts) / len(tasks) for c, ts in by_cat.items()}
    take = {c: int(x) for c, x in exact.items()}
    for c in sorted(exact, key=lambda c: (-(exact[c] - take[c]), c))[: cfg.max_prompts - sum(take.values())]:
        take[c] += 1
    chosen = {t.id for c, ts in by_cat.items() for t in sorted(ts, key=_id_rank)[: take[c]]}
    return [t for t in tasks if t.id in chosen]


def _id_rank(task: Task) -> tuple[bytes, str]:
    """A task's place in the eval's sampling order: a hash of its id (then the id, for equal hashes)."""
    return hashlib.sha256(task.id.encode("utf-8")).digest(), task.id


def summarize(tasks: list[Task], greedy: list, sampled: list[list], lengths: list[int], k: int) -> dict:
    """Metrics from verdicts: greedy[i] (one Verdict), sampled[i] (n Verdicts), lengths of sampled."""
    n_prompts = len(tasks)
    if n_prompts == 0:
        raise ValueError("evaluate: no eval prompts; check that the split produced rows with split == 'eval'")
    g_ok = [v.status == "correct" for v in greedy]
    rates, pak, var = [], [], []
    for vs in sampled:
        c, n = sum(v.status == "correct" for v in vs), len(vs)
        rates.append(c / n)
        pak.append(pass_at_k(n, c, min(k, n)))
        var.append((c / n) * (1 - c / n))
    all_verdicts = list(greedy) + [v for vs in sampled for v in vs]
    per_cat: dict[str, dict] = {}
    for t, ok, rate in zip(tasks, g_ok, rates):
        d = per_cat.setdefault(t.category, {"n": 0, "greedy": 0.0, "sampled": 0.0})
        d["n"] += 1
        d["greedy"] += ok
        d["sampled"] += rate
    return {
        "n_prompts": n_prompts,
        "pass_at_1_greedy": sum(g_ok) / n_prompts,
        "pass_at_1_sampled": sum(rates) / n_prompts,
        "pass_at_k": sum(pak) / n_prompts,
        "k": k,
        "format_rate": sum(v.status in PARSED for v in all_verdicts) / len(all_verdicts),
        "format_rate_greedy": sum(v.status in PARSED for v in greedy) / n_prompts,
        "length_mean": sum(lengths) / len(lengths) if lengths else 0.0,
        "length_p50": _percentile(lengths, 0.5),
        "length_p90": _percentile(lengths, 0.9),
        "per_prompt_variance": sum(var) / n_prompts,
        "zero_variance_prompts": sum(v == 0 for v in var) / n_prompts,
        "per_category": {
            c: {"n": d["n"], "pass_at_1_greedy": d["greedy"] / d["n"], "pass_at_1_sampled": d["sampled"] / d["n"]}
            for c, d in sorted(per_cat.items())
        },
        # each prompt's scores, for paired comparisons between models (training.report.gain_interval)
        # ... and each greedy answer as the verifier read it, with its category (the doctor's answer_collapse)
        "by_prompt": {
            "ids": [t.id for t in tasks],
            "greedy": [int(ok) for ok in g_ok],
            "sampled": [round(r, 4) for r in rates],
            "answers": [v.extracted for v in greedy],
            "categories": [t.category for t in tasks],
        },
    }


def evaluate_engine(
    engine,
    tasks: list[Task],
    cfg: EvalConfig,
    seed: int,
    workers: int | None = None,
    samples_path: str | Path | None = None,
    reward_cfg=None,
    timeout_s: float = 30.0,
) -> dict:
    """Evaluate whatever model `engine` (a `curriculum.RolloutEngine`) samples from; with `samples_path`,
    also write the samples file there (see the module docstring).

    The verifier pool scores with `workers` processes (None: one per CPU core; 0: in this process) and a
    `timeout_s` deadline per completion (the spec's verifiers.timeout_s)."""
    from rlvrflow.engines import SamplingParams
    from rlvrflow.training.progress import progress_bar

    prompts = [t.prompt for t in tasks]
    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens)
    # One bar over the three phases (each is one batched call); silent off a terminal.
    with progress_bar(3, f"eval {len(tasks)} prompts", unit="phase") as bar:
        bar.set_postfix_str("greedy")
        greedy = engine.generate(prompts, 1, SamplingParams(temperature=0.0, max_new_tokens=cfg.max_new_tokens), seed)
        bar.update()
        bar.set_postfix_str(f"{cfg.n_samples} samples")
        sampled = engine.generate(prompts, cfg.n_samples, sampling, seed + 1)
        bar.update()
        bar.set_postfix_str("scoring")
        texts = [[greedy[i][0].text] + [c.text for c in sampled[i]] for i in range(len(tasks))]
        verdicts = score_groups(tasks, texts, workers, timeout_s)
        bar.update()
    lengths = [len(c.token_ids) for g in sampled for c in g]
    result = summarize(tasks, [v[0] for v in verdicts], [v[1:] for v in verdicts], lengths, cfg.k)
    if samples_path is not None:
        chosen = sample_task_indices(tasks, cfg.samples_per_category, seed)
        completions = [[greedy[i][0], sampled[i][0]] for i in range(len(tasks))]
        write_samples(samples_path, sample_records(tasks, chosen, completions, verdicts, reward_cfg))
    return result


EVAL_BATCH = 128  # rows per generate call of every held-out eval: the loops' and the evaluate stage's alike
LOOP_EVALS_DIR = "evals"  # in a GRPO or DPO run folder: step_NNNNNN.json, each in-loop eval whole


@dataclass(frozen=True)
class LoopEval:
    """An eval a training loop ran on its live policy (`evaluate_live`), kept until the weights it
    evaluated are on disk (`write_loop_eval`): the result and the samples file's text; with held-out
    episodes, their result (training.eval_episodes.evaluate_episode_rows) and sample records too."""

    result: dict
    samples: str
    episodes: dict | None = None
    episode_samples: tuple[dict, ...] = ()


def write_loop_eval(run_dir: str | Path, name: str, kept: LoopEval) -> Path | None:
    """Write `kept` as LOOP_EVALS_DIR/<name>.json in `run_dir` (name: step_NNNNNN; step_000000 for the
    model the loop started from). Call it once the weights `kept` evaluated are on disk there (a
    checkpoint: after its commit). A record that cannot be written is a warning: the evaluate stage
    then evaluates that model itself."""

    path = Path(run_dir) / LOOP_EVALS_DIR / f"{name}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_text(
            path,
            json.dumps(
                {
                    "name": name,
                    "samples": kept.samples,
                    "result": kept.result,
                    "episodes": kept.episodes,
                    "episode_samples": list(kept.episode_samples),
                },
                ensure_ascii=False,
                default=str,
            ),
        )
    except (OSError, ValueError) as exc:  # the record only saves the evaluate stage time: never end a run over it
        log.warning("could not keep the eval of %s in %s (%s); the evaluate stage will evaluate it", name, path, exc)
        return None


def write_checkpoint_eval(run_dir: str | Path, step: int, kept: LoopEval | None) -> Path | None:
    """`write_loop_eval` for the checkpoint of `step` just saved in `run_dir`, when there is an eval to
    keep and retention left the checkpoint on disk."""
    saved = Path(run_dir) / f"step_{step:06d}"
    return write_loop_eval(run_dir, saved.name, kept) if kept is not None and saved.is_dir() else None


def drop_loop_evals(run_dir: str | Path, checkpoints) -> None:
    """Remove the kept evals of the checkpoints retention deleted (`checkpoint.apply_retention`'s paths)."""
    for gone in checkpoints:
        (Path(run_dir) / LOOP_EVALS_DIR / f"{Path(gone).name}.json").unlink(missing_ok=True)


def read_loop_eval(run_dir: str | Path, name: str) -> dict | None:
    """The training loop's own held-out eval of the model the evaluate stage calls `name` (sft: the
    model the loop started from, or a checkpoint's step_NNNNNN) in the run folder `run_dir`:
    {result: the `evaluate_engine` result, samples: the samples file's text, path: the record,
    episodes: the held-out episodes' result or None, episode_samples: their sample records}, or None
    when the loop kept none (several ranks or DeepSpeed, or a record it could not write)."""
    path = Path(run_dir) / LOOP_EVALS_DIR / f"{'step_000000' if name == 'sft' else name}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {
        "result": record["result"],
        "samples": record["samples"],
        "path": path,
        "episodes": record.get("episodes"),
        "episode_samples": record.get("episode_samples") or [],
    }


def sample_task_indices(tasks: list[Task], per_category: int, seed: int) -> list[int]:
    """Indices of `per_category` tasks of each category, the lowest hashes of (seed, id): the same
    prompts whatever the checkpoint, row order or other categories. Sorted by (category, id)."""

    def key(i: int) -> bytes:
        return hashlib.blake2b(f"{seed}\x00samples\x00{tasks[i].id}".encode(), digest_size=8).digest()

    by_cat: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        by_cat.setdefault(t.category, []).append(i)
    picked = [i for idx in by_cat.values() for i in sorted(idx, key=key)[:per_category]]
    return sorted(picked, key=lambda i: (tasks[i].category, tasks[i].id))


def sample_records(
    tasks: list[Task], chosen: list[int], completions: list[list], verdicts: list[list], reward_cfg=None
) -> list[dict]:
    """SAMPLE_FIELDS records: per chosen task its greedy (completions[i][0], verdicts[i][0]) and first
    sampled (completions[i][1], verdicts[i][1]) completion."""
    from rlvrflow.verifiers import RewardConfig
    from rlvrflow.verifiers.shaping import reward

    rcfg = reward_cfg or RewardConfig()
    out = []
    for i in chosen:
        t = tasks[i]
        for mode, c, v in zip(("greedy", "sampled"), completions[i][:2], verdicts[i][:2]):
            out.append(
                {
                    "id": t.id,
                    "category": t.category,
                    "prompt": t.prompt,
                    "mode": mode,
                    "response": c.text,
                    "status": v.status,
                    "score": float(v.score),
                    "reward": float(reward(v, c.text, len(c.token_ids), rcfg).total),
                    "n_tokens": len(c.token_ids),
                }
            )
    return out


def write_samples(path: str | Path, records: list[dict]) -> Path:

    return write_text(path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records))


def read_samples(path: str | Path) -> list[dict]:
    return read_jsonl(path)


def _cell(text: str, limit: int = 300) -> str:
    """Text for a markdown table cell: one line, pipes escaped, long text clipped in the middle."""
    text = str(text)
    if len(text) > limit:
        text = f"{text[: limit // 2]} … {text[-limit // 2 :]}"
    text = html.escape(text, quote=False)  # a response's <tags> show as text, not as HTML
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>") or "∅"


def samples_markdown(
    before: list[dict], after: list[dict], before_name: str = "sft", after_name: str = "checkpoint"
) -> str:
    """Two evals' samples side by side as markdown: one table per category, a row per (prompt, mode),
    each side's response with its verdict status and reward; then the episodes (mode `episode`), each
    prompt's two transcripts one after the other (training.eval_episodes.episodes_markdown). Prompts
    only one side has are listed too."""
    from rlvrflow.training.eval_episodes import EPISODE_MODE, episodes_markdown

    left = {(r["id"], r["mode"]): r for r in before if r["mode"] != EPISODE_MODE}
    right = {(r["id"], r["mode"]): r for r in after if r["mode"] != EPISODE_MODE}
    keys = sorted(set(left) | set(right), key=lambda k: ((left.get(k) or right[k])["category"], k[0], k[1] != "greedy"))
    lines = [f"# Samples: {before_name} vs {after_name}", ""]
    category = None
    for k in keys:
        row = left.get(k) or right[k]
        if row["category"] != category:
            category = row["category"]
            lines += [
                "",
                f"## {category or '(no category)'}",
                "",
                f"| prompt | mode | {before_name} | {after_name} |",
                "|---|---|---|---|",
            ]
        sides = [
            f"{_cell(r['response'])}<br>*{r['status']}, reward {r['reward']:.2f}*" if r else "(not evaluated)"
            for r in (left.get(k), right.get(k))
        ]
        lines.append(f"| {_cell(row['prompt'])} | {k[1]} | {sides[0]} | {sides[1]} |")
    lines += episodes_markdown(before, after, before_name, after_name)
    return "\n".join(lines) + "\n"


def evaluate_model(
    model,
    tokenizer,
    eval_df,
    cfg: EvalConfig,
    seed: int,
    workers: int | None = None,
    device: str = "cpu",
    batch_size: int = EVAL_BATCH,
    prompt_format=None,
    samples_path: str | Path | None = None,
    reward_cfg=None,
    timeout_s: float = 30.0,
) -> dict:
    """Evaluate a live model object, prompting it in `prompt_format` (a `engines.hf_engine.PromptFormat`;
    raw when None); samples, `workers` and `timeout_s` as `evaluate_engine`."""
    from rlvrflow.engines import HFEngine

    engine = HFEngine(model, tokenizer, device=device, batch_size=batch_size, prompt_format=prompt_format)
    return evaluate_engine(
        engine, select_eval_tasks(eval_df, cfg), cfg, seed, workers, samples_path, reward_cfg, timeout_s=timeout_s
    )


def evaluate_live(
    model,
    tokenizer,
    eval_df,
    cfg: EvalConfig,
    seed: int,
    samples_path: str | Path,
    workers: int | None = None,
    device: str = "cpu",
    batch_size: int = EVAL_BATCH,
    prompt_format=None,
    reward_cfg=None,
    timeout_s: float = 30.0,
) -> LoopEval:
    """`evaluate_model` for the GRPO and DPO loops: the result and the samples file's text, for
    `write_loop_eval` once the weights are saved; the evaluate stage reads that record as the held-out
    eval of those weights."""
    result = evaluate_model(
        model,
        tokenizer,
        eval_df,
        cfg,
        seed,
        workers,
        device,
        batch_size,
        prompt_format,
        samples_path,
        reward_cfg,
        timeout_s,
    )
    return LoopEval(result, Path(samples_path).read_text(encoding="utf-8"))


def eval_engine(model_path: str | Path, eval_cfg: EvalConfig, device: str = "auto", dtype: str = "auto", seed: int = 0):
    """The engine `eval_cfg.engine` names for a checkpoint directory (`engines.factory.make_engine`;
    hf loads through `load_model_and_tokenizer`, so LoRA adapter checkpoints work there). `evaluate`
    builds one per call; a caller evaluating one model on several row sets builds it once, passes it to
    each `evaluate(..., engine=)` (a vLLM engine takes a while to start and holds its GPU memory) and
    then hands it to `engines.factory.release`."""
    from rlvrflow.engines.factory import make_engine
    from rlvrflow.training.modeling import load_model_and_tokenizer, pick_device
    from rlvrflow.training.precision import dtype_name, resolve_dtype

    dev = pick_device(device)
    dt = resolve_dtype(dtype, dev)
    return make_engine(
        eval_cfg.engine,
        model_path,
        device=str(dev),
        dtype=dtype_name(dt),
        batch_size=EVAL_BATCH,
        seed=seed,
        load=lambda path: load_model_and_tokenizer(path, dev, trainable=False, dtype=dt),
        field="eval.engine",
    )


def evaluate(
    model_path: str | Path,
    eval_df,
    eval_cfg: EvalConfig,
    seed: int,
    workers: int | None = None,
    device: str = "auto",
    dtype: str = "auto",
    samples_path: str | Path | None = None,
    reward_cfg=None,
    timeout_s: float = 30.0,
    engine=None,
) -> dict:
    """Evaluate a Hugging Face checkpoint directory (or a LoRA adapter checkpoint) on the held-out rows.

    Generates with the engine `eval_cfg.engine` names (`eval_engine`), or with `engine` when given (one
    `eval_engine` of this model reused across calls). Prompts go in the format the directory was
    trained with (its rlvrflow_prompt.json; auto without one); `dtype` is a `training.dtype` setting.
    Returns pass_at_1_greedy, pass_at_1_sampled, pass_at_k (with k), format_rate, length_mean/p50/p90,
    per_prompt_variance, zero_variance_prompts, per_category and n_prompts. Deterministic given seed.
    With `samples_path`, writes the samples file there (the module docstring says what it holds).
    `workers` and `timeout_s` reach the verifier pool as in `evaluate_engine`.
    """
    import contextlib

    from rlvrflow.engines import HFEngine
    from rlvrflow.engines.factory import release
    from rlvrflow.training.modeling import pick_device
    from rlvrflow.training.precision import autocast, resolve_dtype

    dev = pick_device(device)
    dt = resolve_dtype(dtype, dev)
    own = engine is None
    engine = engine or eval_engine(model_path, eval_cfg, device, dtype, seed)
    try:
        with autocast(dev, dt) if isinstance(engine, HFEngine) else contextlib.nullcontext():
            result = evaluate_engine(
                engine,
                select_eval_tasks(eval_df, eval_cfg),
                eval_cfg,
                seed,
                workers,
                samples_path,
                reward_cfg,
                timeout_s=timeout_s,
            )
    finally:
        if own:  # a vLLM engine gives its memory back now, and the next may start in this process
            release(engine)
    return {"model": str(model_path), **result}
