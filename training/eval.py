"""Held-out evaluation of a checkpoint, independent of training.

For each eval prompt: one greedy completion and `n_samples` sampled ones, judged by the row's
verifier. Metrics: pass@1 greedy, pass@1 sampled (mean c/n), unbiased pass@k, format rate (the
verifier could read an answer: status correct or wrong), completion length mean/p50/p90 in tokens,
per-prompt variance of sampled success, and the same pass rates per category.

    evaluate("runs/x/step_000100", eval_df, EvalConfig(), seed=0)
"""

from __future__ import annotations

import math
from pathlib import Path

from curriculum import pass_at_k

from training.config import EvalConfig
from training.scoring import Task, score_groups, tasks_from_df

PARSED = ("correct", "wrong")


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def select_eval_tasks(eval_df, cfg: EvalConfig) -> list[Task]:
    """Eval tasks in id order; with `cfg.max_prompts`, a subset that keeps the categories' shares.

    Ids often carry their source's prefix, so the first N ids can be one source's categories only;
    instead each category gets its proportional share of max_prompts (largest remainders first, ties
    by category name), filled with its lowest ids. No randomness: the same rows give the same subset.
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
    chosen = {t.id for c, ts in by_cat.items() for t in ts[: take[c]]}
    return [t for t in tasks if t.id in chosen]


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
    }


def evaluate_engine(engine, tasks: list[Task], cfg: EvalConfig, seed: int, workers: int | None = None) -> dict:
    """Evaluate whatever model `engine` (a `curriculum.RolloutEngine`) samples from."""
    from curriculum import SamplingParams

    prompts = [t.prompt for t in tasks]
    greedy = engine.generate(prompts, 1, SamplingParams(temperature=0.0, max_new_tokens=cfg.max_new_tokens), seed)
    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens)
    sampled = engine.generate(prompts, cfg.n_samples, sampling, seed + 1)
    texts = [[greedy[i][0].text] + [c.text for c in sampled[i]] for i in range(len(tasks))]
    verdicts = score_groups(tasks, texts, workers or cfg.workers)
    lengths = [len(c.token_ids) for g in sampled for c in g]
    return summarize(tasks, [v[0] for v in verdicts], [v[1:] for v in verdicts], lengths, cfg.k)


def evaluate_model(model, tokenizer, eval_df, cfg: EvalConfig, seed: int, workers: int | None = None,
                   device: str = "cpu", batch_size: int = 128, prompt_format=None) -> dict:
    """Evaluate a live model object (used by the GRPO loop at each checkpoint), prompting it in
    `prompt_format` (a `curriculum.engines.PromptFormat`; raw when None)."""
    from curriculum import HFEngine

    engine = HFEngine(model, tokenizer, device=device, batch_size=batch_size, prompt_format=prompt_format)
    return evaluate_engine(engine, select_eval_tasks(eval_df, cfg), cfg, seed, workers)


def evaluate(model_path: str | Path, eval_df, eval_cfg: EvalConfig, seed: int, workers: int | None = None,
             device: str = "auto", dtype: str = "auto") -> dict:
    """Evaluate a Hugging Face checkpoint directory (or a LoRA adapter checkpoint) on the held-out rows.

    Prompts go in the format the directory was trained with (its rlvrflow_prompt.json; auto without
    one); `dtype` is a `training.dtype` setting. Returns pass_at_1_greedy, pass_at_1_sampled, pass_at_k
    (with k), format_rate, length_mean/p50/p90, per_prompt_variance, zero_variance_prompts,
    per_category and n_prompts. Deterministic given seed.
    """
    from curriculum.engines import PromptFormat
    from training.modeling import load_model_and_tokenizer, pick_device
    from training.precision import autocast, resolve_dtype

    dev = pick_device(device)
    dt = resolve_dtype(dtype, dev)
    model, tokenizer = load_model_and_tokenizer(model_path, dev, trainable=False, dtype=dt)
    fmt = PromptFormat.for_model_dir(model_path, tokenizer)
    with autocast(dev, dt):
        result = evaluate_model(model, tokenizer, eval_df, eval_cfg, seed, workers, device=str(dev), prompt_format=fmt)
    return {"model": str(model_path), **result}
