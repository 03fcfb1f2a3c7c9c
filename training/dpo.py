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
samples under samples/) and saved in GRPO's layout by the same skeleton (training/trainer.py):
step_NNNNNN/ (HF weights or the unmerged adapter, state.pt, meta.json with the eval), metrics.jsonl,
evals.jsonl, evals/ (each eval whole, for the evaluate stage to read back:
`training.eval.write_loop_eval`), tb/, curves.png, summary.json.

Left out: other DPO losses (IPO, hinge, robust), SFT loss mixing, several processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from rlvrflow.io import atomic_write
from rlvrflow.training import checkpoint as ckpt
from rlvrflow.training.config import EvalConfig, TrainingConfig

log = logging.getLogger("rlvrflow.training")

REFERENCE_FILE = "reference_logps.pt"


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean sigmoid DPO loss over (B,) sequence log-probs, and the implicit rewards' diagnostics.

    reward_chosen = beta * (policy_chosen - ref_chosen), likewise rejected; margin = their difference;
    accuracy = share of pairs whose margin is > 0.
    """
    r_c = beta * (policy_chosen - ref_chosen)  # (B,)
    r_r = beta * (policy_rejected - ref_rejected)  # (B,)
    margin = r_c - r_r
    loss = -F.logsigmoid(margin).mean()
    d = margin.detach()
    return loss, {
        "reward_chosen": float(r_c.detach().mean()),
        "reward_rejected": float(r_r.detach().mean()),
        "margin": float(d.mean()),
        "accuracy": float((d > 0).float().mean()),
    }


def encode_pairs(tokenizer, pairs: list[dict], fmt, max_length: int) -> tuple[list[tuple], dict]:
    """(prompt ids, chosen ids, rejected ids) per pair, cut to max_length, and how many were cut."""
    from rlvrflow.training.modeling import encode_completion, encode_prompt

    end_id = fmt.end_token_id(tokenizer)
    cut = {"responses_truncated": 0, "prompts_truncated": 0}
    out = []
    for p in pairs:
        sides = []
        for side in ("chosen", "rejected"):
            full = encode_completion(
                tokenizer, p[side], add_eos=p.get(f"{side}_finish", "stop") == "stop", end_id=end_id
            )
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
    return sums[: len(batch)], sums[len(batch) :]


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
    h = hashlib.sha256(
        json.dumps(
            [str(Path(sft_model).resolve()), _weights_identity(sft_model), cfg.dtype, cfg.lora is not None]
        ).encode()
    )
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
    atomic_write(path, lambda tmp: torch.save({"key": key, "logps": logps}, tmp))
    return logps


def train_dpo(
    sft_model,
    pairs: list[dict],
    cfg: TrainingConfig,
    eval_df,
    eval_cfg: EvalConfig,
    out_dir,
    seed: int,
    on_progress=None,
    reward_cfg=None,
    workers: int | None = None,
    timeout_s: float = 30.0,
) -> dict:
    """Run DPO (`cfg.dpo`) from `sft_model` on `pairs` (dicts with prompt, chosen, rejected; optional
    chosen_finish / rejected_finish); resume from out_dir's newest checkpoint when there is one.

    eval_df: held-out rows for `training.eval`; reward_cfg: the `verifiers.RewardConfig` of the samples'
    reward column. workers, timeout_s: the verifier pool's processes (None: one per CPU core) and per-item
    deadline in the evals. on_progress(step, total, metrics) is called after each step. Returns GRPO's summary
    keys (final_checkpoint, best_checkpoint, baseline, final, evals, steps, seconds, steps_per_second,
    warnings) plus pairs, prompt_format, dtype and parameter counts.
    """
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training import lora
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.modeling import load_policy, pick_device, set_threads
    from rlvrflow.training.precision import dtype_name, resolve_dtype
    from rlvrflow.training.trainer import HeldOut, Optim, Trainer

    d, out = cfg.dpo, Path(out_dir)
    if not pairs:
        raise ValueError(
            "train_dpo: no pairs; the tiering samples gave none (see dpo_stats.json's rejected_by_reason: "
            "too few learnable prompts? raise curriculum.n_samples or widen training.dpo.tiers)"
        )
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
        log.warning(
            "dpo: training.dpo.max_length=%d cut %d responses and %d prompts; raise it if those pairs matter",
            d.max_length,
            cut["responses_truncated"],
            cut["prompts_truncated"],
        )
    ref = _load_reference(
        out,
        _data_key(sft_model, data, cfg),
        policy,
        sft_model,
        resume is not None,
        data,
        tokenizer.pad_token_id,
        device,
        dtype,
        cfg,
    )
    backend = TorchBackend(policy, Optim.of(d), dtype)
    log.info(
        "dpo: %d pairs, %s prompts, %s, %d of %d parameters trainable",
        len(data),
        fmt.kind,
        dtype_name(dtype),
        counts["trainable_params"],
        counts["total_params"],
    )
    trainer = Trainer(
        "dpo",
        out,
        cfg,
        backend,
        tokenizer,
        fmt,
        HeldOut(eval_df, eval_cfg, seed, reward_cfg, workers, timeout_s),
        d.max_steps,
        d.logging_steps,
        _step_line,
        device,
    )
    with trainer:
        run = trainer.start(resume)
        for step in range(run.step, d.max_steps):
            t_step = time.perf_counter()
            idx = batch_indices(len(data), d.batch_size, step, seed)
            with backend.autocast():
                pc, pr = sequence_logps(policy, [data[i] for i in idx], tokenizer.pad_token_id, device)  # (B,) each
            r = ref[idx].to(device)  # (B, 2)
            loss, stats = dpo_loss(pc.float(), pr.float(), r[:, 0], r[:, 1], d.beta)
            backend.zero_grad()
            backend.backward(loss)
            stats["grad_norm"] = backend.step()
            run.step = step + 1
            metrics = {"step": run.step, "loss": float(loss.detach()), **stats, "lr": backend.lr()}
            trainer.log_step(metrics, time.perf_counter() - t_step, loss=f"{metrics['loss']:.4f}")
            if trainer.checkpoint_due(run.step):
                trainer.save(trainer.evaluate(run.step))
            if on_progress is not None:
                on_progress(run.step, d.max_steps, metrics)
    return trainer.finish(
        sft_model,
        {
            "algorithm": "dpo",
            "pairs": len(data),
            "prompt_format": fmt.kind,
            "dtype": dtype_name(dtype),
            **cut,
            **counts,
        },
        plot=plot_dpo_curves,
    )


def _step_line(m: dict) -> str:
    return (
        f"dpo step {m['step']} loss {m['loss']:.4f} margin {m['margin']:+.3f} accuracy {m['accuracy']:.0%} "
        f"lr {m['lr']:.2e} {m['step_seconds']:.2f}s"
    )


def plot_dpo_curves(metrics: list[dict], evals: list[dict], out_png: Path) -> Path | None:
    """Loss, margin and pair accuracy per step beside held-out pass@1 per eval; None without data."""
    from rlvrflow.training.report import plot_curves

    return plot_curves(
        metrics,
        evals,
        out_png,
        series=(("loss", "loss"), ("margin", "margin"), ("accuracy", "accuracy")),
        trainer="DPO",
        left_title="training pairs",
    )
