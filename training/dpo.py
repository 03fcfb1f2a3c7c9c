"""DPO from the SFT model on pairs from tiering's samples: the cheap fallback when GRPO compute is short.

    pairs = read_pairs("runs/x/dpo")                 # training/dpo_data.py: export_dpo writes them
    result = train_dpo(sft_dir, pairs, TrainingConfig(algorithm="dpo"), eval_df, EvalConfig(),
                       out_dir="runs/x/dpo_run", seed=0)

The loss is the sigmoid DPO loss of Rafailov et al. on token-summed log-probs,

    -log sigmoid(beta * ((log pi(y+) - log ref(y+)) - (log pi(y-) - log ref(y-))))

(`dpo_loss`, a pure tensor function). The reference is the SFT model; its log-probs of every pair
are computed once before the first step and kept in `reference_logps.pt` (a resumed run reads them
back; the cache is keyed on the pairs and on the SFT folder's weight and config files by name, size
and mtime, so SFT retrained into the same folder is recomputed, and so is a copy that lost its file
times). With `training.lora` the reference is the policy with its adapter switched off, as in GRPO; in
full fine-tuning it is the policy itself before any update (a run resumed without the cache loads
the SFT weights once to recompute it). Prompts are rendered in the run's prompt format and responses
end with the format's end token when the sampled response ended there (`*_finish == "stop"`),
exactly as SFT, tiering and GRPO encode them.

Batches: step s takes pairs s*B .. (s+1)*B - 1 of a stream of seeded permutations (one per epoch),
so a resumed run draws the same pairs without saving sampler state. Every `checkpoint.every` steps
(and at the end) the policy is evaluated on the held-out rows (step 0 = the SFT baseline, with its
samples under samples/) and saved in GRPO's layout: step_NNNNNN/ (HF weights or the unmerged
adapter, state.pt, meta.json with the eval), metrics.jsonl, evals.jsonl, evals/ (each eval whole, for
the evaluate stage to read back: `training.eval.write_loop_eval`), curves.png, summary.json.

Left out: other DPO losses (IPO, hinge, robust), SFT loss mixing, several processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from rlvrflow.training import checkpoint as ckpt
from rlvrflow.training.config import EvalConfig, TrainingConfig
from rlvrflow.training.eval import LOOP_EVALS_DIR, LoopEval, drop_loop_evals, write_checkpoint_eval, write_loop_eval
from rlvrflow.training.report import append_jsonl, read_jsonl

log = logging.getLogger("rlvrflow.training")

REFERENCE_FILE = "reference_logps.pt"


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean sigmoid DPO loss over (B,) sequence log-probs, and the implicit rewards' diagnostics.

    reward_chosen = beta * (policy_chosen - ref_chosen), likewise rejected; margin = their difference;
    accuracy = share of pairs whose margin is > 0.
    """
    r_c = beta * (policy_chosen - ref_chosen)  # (B,)
    r_r = beta * (policy_rejected - ref_rejected)  # (B,)
    margin = r_c - r_r
    loss = -F.logsigmoid(margin).mean()
    d = margin.detach()
    return loss, {"reward_chosen": float(r_c.detach().mean()), "reward_rejected": float(r_r.detach().mean()),
                  "margin": float(d.mean()), "accuracy": float((d > 0).float().mean())}


def encode_pairs(tokenizer, pairs: list[dict], fmt, max_length: int) -> tuple[list[tuple], dict]:
    """(prompt ids, chosen ids, rejected ids) per pair, cut to max_length, and how many were cut."""
    from rlvrflow.training.modeling import encode_completion, encode_prompt

    end_id = fmt.end_token_id(tokenizer)
    cut = {"responses_truncated": 0, "prompts_truncated": 0}
    out = []
    for p in pairs:
        sides = []
        for side in ("chosen", "rejected"):
            full = encode_completion(tokenizer, p[side], add_eos=p.get(f"{side}_finish", "stop") == "stop",
                                     end_id=end_id)
            sides.append(full[: max_length - 1])
            cut["responses_truncated"] += len(sides[-1]) < len(full)
        prompt = encode_prompt(tokenizer, p["prompt"], fmt)
        keep = max_length - max(len(s) for s in sides)
        cut["prompts_truncated"] += len(prompt) > keep
        out.append((prompt[-keep:] if len(prompt) > keep else prompt, sides[0], sides[1]))
    return out, cut


def sequence_logps(model, batch: list[tuple], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed log-probs of the chosen and of the rejected responses of `batch`, each (B,).

    Both sides go through one forward; the shared prompt runs once (`completion_logprobs`)."""
    from rlvrflow.training.modeling import completion_logprobs

    prompts = [p for p, _, _ in batch] * 2
    comps = [c for _, c, _ in batch] + [r for _, _, r in batch]
    logp, mask = completion_logprobs(model, prompts, comps, pad_id, device)  # (2B, T)
    sums = (logp * mask.to(logp.dtype)).sum(dim=1)  # (2B,)
    return sums[: len(batch)], sums[len(batch):]


def reference_logps(model, data: list[tuple], pad_id: int, device, batch_size: int, autocast) -> torch.Tensor:
    """(N, 2) summed log-probs of each pair's chosen and rejected response under `model`, no gradients."""
    rows = []
    with torch.no_grad(), autocast():
        for start in range(0, len(data), batch_size):
            c, r = sequence_logps(model, data[start : start + batch_size], pad_id, device)
            rows.append(torch.stack([c, r], dim=1).float().cpu())
    return torch.cat(rows) if rows else torch.zeros((0, 2))


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Pairs of step `step`: a slice of the stream of per-epoch permutations seeded by (seed, epoch)."""
    perms: dict[int, list[int]] = {}
    out = []
    for pos in range(step * batch_size, (step + 1) * batch_size):
        epoch, at = divmod(pos, n)
        if epoch not in perms:
            perms[epoch] = list(range(n))
            random.Random(f"{seed}:dpo-epoch:{epoch}").shuffle(perms[epoch])
        out.append(perms[epoch][at])
    return out


def _weights_identity(sft_model) -> list:
    """The SFT checkpoint's weight files as (name, size, mtime_ns): a model retrained into the same folder
    changes them, so the cached reference log-probs of the old weights are not reused. Stat, not a hash:
    hashing a 15 GB checkpoint on every start would cost more than the cache saves."""
    root = Path(sft_model)
    if not root.is_dir():
        return []
    files = sorted(f for f in root.iterdir() if f.suffix in {".safetensors", ".bin", ".pt", ".json"})
    return [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files if f.is_file()]


def _data_key(sft_model, data: list[tuple], cfg: TrainingConfig) -> str:
    h = hashlib.sha256(json.dumps([str(Path(sft_model).resolve()), _weights_identity(sft_model), cfg.dtype,
                                   cfg.lora is not None]).encode())
    for p, c, r in data:
        h.update(json.dumps([p, c, r]).encode())
    return h.hexdigest()[:16]


def _load_reference(out: Path, key: str, policy, sft_model, resumed: bool, data, pad_id, device, dtype, cfg):
    """The pairs' reference log-probs: read back from out/reference_logps.pt, else computed and saved."""
    from rlvrflow.training import lora
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.precision import autocast

    path = out / REFERENCE_FILE
    if path.is_file():
        saved = torch.load(path, weights_only=True)
        if saved.get("key") == key:
            return saved["logps"]
    if cfg.lora is not None:
        ref = lora.AdapterDisabled(policy)
    elif resumed:  # the policy has moved: the reference is the SFT weights
        ref = load_model_and_tokenizer(sft_model, device, trainable=False, dtype=dtype)[0]
    else:
        ref = policy
    was_training = policy.training
    policy.eval()
    logps = reference_logps(ref, data, pad_id, device, cfg.dpo.batch_size, lambda: autocast(device, dtype))
    policy.train(was_training)
    tmp = path.with_name(f".tmp-{path.name}")
    torch.save({"key": key, "logps": logps}, tmp)
    tmp.replace(path)
    return logps


def train_dpo(sft_model, pairs: list[dict], cfg: TrainingConfig, eval_df, eval_cfg: EvalConfig, out_dir,
              seed: int, on_progress=None, reward_cfg=None, workers: int | None = None,
              timeout_s: float = 30.0) -> dict:
    """Run DPO (`cfg.dpo`) from `sft_model` on `pairs` (dicts with prompt, chosen, rejected; optional
    chosen_finish / rejected_finish); resume from out_dir's newest checkpoint when there is one.

    eval_df: held-out rows for `training.eval`; reward_cfg: the `verifiers.RewardConfig` of the samples'
    reward column. workers, timeout_s: the verifier pool's processes (None: eval.workers) and per-item
    deadline in the evals. on_progress(step, total, metrics) is called after each step. Returns GRPO's summary
    keys (final_checkpoint, best_checkpoint, baseline, final, evals, steps, seconds, steps_per_second,
    warnings) plus pairs, prompt_format, dtype and parameter counts.
    """
    from rlvrflow.curriculum.engines import PromptFormat
    from rlvrflow.training import lora
    from rlvrflow.training.grpo_math import warmup_cosine
    from rlvrflow.training.modeling import load_policy, pick_device, set_threads
    from rlvrflow.training.precision import LossScaler, autocast, dtype_name, resolve_dtype

    d, out = cfg.dpo, Path(out_dir)
    if not pairs:
        raise ValueError("train_dpo: no pairs; the tiering samples gave none (see dpo_stats.json's rejected_by_reason: "
                         "too few learnable prompts? raise curriculum.n_samples or widen training.dpo.tiers)")
    out.mkdir(parents=True, exist_ok=True)
    set_threads(cfg.torch_threads)
    device = pick_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    torch.manual_seed(seed)
    resume = ckpt.latest_checkpoint(out)
    policy, tokenizer = load_policy(resume or sft_model, device, dtype, cfg.lora, base=sft_model)
    fmt = PromptFormat.for_tokenizer(tokenizer, cfg.prompt_format, cfg.system_prompt)
    counts = lora.parameter_counts(policy)
    data, cut = encode_pairs(tokenizer, pairs, fmt, d.max_length)
    if cut["responses_truncated"] or cut["prompts_truncated"]:
        log.warning("dpo: training.dpo.max_length=%d cut %d responses and %d prompts; raise it if those pairs matter",
                    d.max_length, cut["responses_truncated"], cut["prompts_truncated"])
    ref = _load_reference(out, _data_key(sft_model, data, cfg), policy, sft_model, resume is not None, data,
                          tokenizer.pad_token_id, device, dtype, cfg)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=d.lr, weight_decay=d.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, d.warmup_steps, d.steps, d.min_lr_ratio))
    scaler = LossScaler(device, dtype)
    log.info("dpo: %d pairs, %s prompts, %s, %d of %d parameters trainable", len(data), fmt.kind, dtype_name(dtype),
             counts["trainable_params"], counts["total_params"])

    evaluate_now = partial(_evaluate, policy=policy, tokenizer=tokenizer, eval_df=eval_df, eval_cfg=eval_cfg,
                           seed=seed, device=device, dtype=dtype, fmt=fmt, out=out, reward_cfg=reward_cfg,
                           workers=workers, timeout_s=timeout_s)
    if resume is not None:
        run = _restore(resume, out, opt, sched, scaler)
    else:
        for stale in ("metrics.jsonl", "evals.jsonl"):
            (out / stale).unlink(missing_ok=True)
        shutil.rmtree(out / LOOP_EVALS_DIR, ignore_errors=True)
        record, kept = evaluate_now(0)  # the SFT baseline, in the same table as every checkpoint
        write_loop_eval(out, "step_000000", sft_model, kept)
        run = {"step": 0, "evals": [record]}

    t0, start_step = time.perf_counter(), run["step"]
    for step in range(run["step"], d.steps):
        idx = batch_indices(len(data), d.batch_size, step, seed)
        with autocast(device, dtype):
            pc, pr = sequence_logps(policy, [data[i] for i in idx], tokenizer.pad_token_id, device)  # (B,) each
        r = ref[idx].to(device)  # (B, 2)
        loss, stats = dpo_loss(pc.float(), pr.float(), r[:, 0], r[:, 1], d.beta)
        opt.zero_grad(set_to_none=True)
        scaler.backward(loss)
        stats["grad_norm"] = scaler.step(opt, params, d.max_grad_norm)
        sched.step()
        run["step"] = step + 1
        metrics = {"step": run["step"], "loss": float(loss.detach()), **stats, "lr": sched.get_last_lr()[0]}
        if run["step"] % d.log_every == 0 or run["step"] == d.steps:
            append_jsonl(out / "metrics.jsonl", metrics)
        if run["step"] % cfg.checkpoint.every == 0 or run["step"] == d.steps:
            record, kept = evaluate_now(run["step"])
            run["evals"].append(record)
            _save(out, run, policy, tokenizer, opt, sched, scaler, record, cfg, fmt)
            write_checkpoint_eval(out, run["step"], kept)  # tied to the committed files
        if on_progress is not None:
            on_progress(run["step"], d.steps, metrics)
    return _finish(out, run, cfg, time.perf_counter() - t0, run["step"] - start_step, Path(sft_model),
                   {"pairs": len(data), "prompt_format": fmt.kind, "dtype": dtype_name(dtype), **cut, **counts})


def _evaluate(step: int, policy, tokenizer, eval_df, eval_cfg, seed, device, dtype, fmt, out: Path, reward_cfg,
              workers: int | None = None, timeout_s: float = 30.0) -> tuple[dict, LoopEval]:
    """Evaluate the live policy (step 0: the SFT baseline); record it in evals.jsonl and its samples
    in samples/step_NNNNNN.jsonl; returns the record without per_category, and the eval whole
    (`training.eval.LoopEval`) for `write_loop_eval` once the weights are on disk."""
    from rlvrflow.training.eval import evaluate_live
    from rlvrflow.training.precision import autocast, dtype_name

    with autocast(device, dtype):
        kept = evaluate_live(policy, tokenizer, eval_df, eval_cfg, seed, dtype_name(dtype),
                             out / "samples" / f"step_{step:06d}.jsonl", workers, str(device), prompt_format=fmt,
                             reward_cfg=reward_cfg, timeout_s=timeout_s)
    result = kept.result
    record = {"step": step, **{k: v for k, v in result.items() if k not in ("per_category", "by_prompt")}}
    append_jsonl(out / "evals.jsonl", {**record, "per_category": result["per_category"]})
    return record, kept


def _restore(resume: Path, out: Path, opt, sched, scaler) -> dict:
    """Optimizer, schedule, loss scaler and RNG from a checkpoint (the policy was loaded from it); the
    run's metrics and evals lines after its step are dropped (they are redone)."""
    state = ckpt.load_state(resume)
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state.get("scaler", {}))
    ckpt.restore_rng(state["rng"])
    run = state["run"]
    for name in ("metrics.jsonl", "evals.jsonl"):
        rows = [r for r in read_jsonl(out / name) if r["step"] <= run["step"]]
        ckpt.atomic_write_text(out / name, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    log.info("dpo: resumed from %s at step %d", resume, run["step"])
    return run


def _save(out: Path, run: dict, policy, tokenizer, opt, sched, scaler, record: dict, cfg: TrainingConfig, fmt) -> None:
    from rlvrflow.curriculum.engines import PROMPT_FORMAT_FILE

    state = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
             "rng": ckpt.capture_rng(), "run": run}
    samples = out / "samples" / f"step_{run['step']:06d}.jsonl"
    extra = {PROMPT_FORMAT_FILE: fmt.to_json() + "\n"}
    if samples.is_file():  # next to the checkpoint's metrics (meta.json) too
        extra["samples.jsonl"] = samples.read_text(encoding="utf-8")
    ckpt.save_checkpoint(out, run["step"], policy, tokenizer, state, {"eval": record}, extra=extra)
    c = cfg.checkpoint
    drop_loop_evals(out, ckpt.apply_retention(out, c.keep_last, c.keep_best, c.metric))


def _finish(out: Path, run: dict, cfg: TrainingConfig, seconds: float, steps_done: int, sft_model: Path,
            extra: dict) -> dict:
    final = ckpt.latest_checkpoint(out) or sft_model  # dpo.steps == 0: the SFT model is the result
    best = ckpt.best_checkpoint(out, cfg.checkpoint.metric) or final
    summary = {
        "algorithm": "dpo", "final_checkpoint": str(final), "best_checkpoint": str(best),
        "baseline": run["evals"][0], "final": run["evals"][-1], "evals": run["evals"], "steps": run["step"],
        "seconds": round(seconds, 2), "steps_per_second": steps_done / seconds if seconds > 0 else None,
        "warnings": [], **extra,
    }
    plot_dpo_curves(read_jsonl(out / "metrics.jsonl"), run["evals"], out / "curves.png")
    ckpt.atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, default=str))
    return summary


def plot_dpo_curves(metrics: list[dict], evals: list[dict], out_png: Path) -> Path | None:
    """Loss, margin and pair accuracy per step beside held-out pass@1 per eval; None without data."""
    from rlvrflow.training.report import plot_curves

    return plot_curves(metrics, evals, out_png, series=(("loss", "loss"), ("margin", "margin"),
                                                        ("accuracy", "accuracy")),
                       trainer="DPO", left_title="training pairs")
