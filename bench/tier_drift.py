"""Benchmark: how fast the offline tiers go stale once GRPO starts, and what re-weighting buys back.

The curriculum draws GRPO prompts by the SFT model's tiering counts (k correct of n samples). This
bench samples the same pool again, n completions per prompt, from later models (GRPO checkpoints,
and the SFT model itself first: a second pass of an unchanged model is the sampling-noise floor) and
prints, per offline k, the share of prompts whose new group is mixed, all right or all wrong.

Then it compares two ways of picking prompts likely to come back mixed under a checkpoint:
  - baseline: the offline learnable prompts (1..n-1 of n correct);
  - reweighted: those whose success rate, re-estimated under the checkpoint from the stored tiering
    samples by self-normalized importance weights (w_i = pi_ckpt(y_i) / pi_sft(y_i), sequence
    log-probs, no generation), lies in [--low, --high];
and prints each pick's zero-variance share under the checkpoint and their ratio.

    .venv/bin/python bench/tier_drift.py --tiers runs/demo/.../tier/<key> --sft runs/demo/.../sft \
        --checkpoint runs/short/.../step_000015 --checkpoint runs/short/.../step_000030

--tiers is a tier stage's folder (tiers.parquet and tier_rollouts.parquet, as `rlvrflow run` writes
them); --sft the model that tiered it. Re-tiering uses the tier stage's curriculum settings from the
spec (temperature, n_samples, max_new_tokens) with seed --seed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", default="examples/retail/spec.yaml", help="the domain spec the pool was tiered with")
    p.add_argument("--tiers", required=True, help="a tier stage folder: tiers.parquet + tier_rollouts.parquet")
    p.add_argument("--sft", required=True, help="the model that tiered it")
    p.add_argument("--checkpoint", action="append", default=[], help="a later model (repeatable)")
    p.add_argument("--seed", type=int, default=11, help="sampling seed of the new passes (not the tiering's)")
    p.add_argument("--low", type=float, default=0.2)
    p.add_argument("--high", type=float, default=0.8)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    return p.parse_args()


def sequence_logprobs(model_dir, tiers, rollouts, batch_prompts: int = 16) -> dict[tuple[str, int], float]:
    """Each stored tiering sample's summed log-prob under the model at `model_dir`, keyed (id, sample).

    The samples are stored as text; one whose text does not encode back to as many tokens as were
    sampled (`n_tokens`, the end token included when it stopped) is left out: its log-prob would be
    that of other tokens."""
    import polars as pl
    import torch

    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.modeling import (
        completion_logprobs,
        encode_completion,
        encode_prompt,
        load_model_and_tokenizer,
    )

    device = torch.device("cpu")
    model, tok = load_model_and_tokenizer(model_dir, device, trainable=False)
    fmt = PromptFormat.for_model_dir(model_dir, tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    end = fmt.end_token_id(tok)
    prompt_of = dict(zip(tiers["id"].to_list(), tiers["prompt"].to_list()))
    ids = tiers["id"].to_list()
    out: dict[tuple[str, int], float] = {}
    with torch.no_grad():
        for start in range(0, len(ids), batch_prompts):
            sub = rollouts.filter(pl.col("id").is_in(ids[start : start + batch_prompts])).sort("id", "sample")
            prompts = [encode_prompt(tok, prompt_of[i], fmt) for i in sub["id"]]
            # a sample that stopped ended on the end token, which the model chose too; a cut one did not
            completions = [
                encode_completion(tok, text, why == "stop", end)
                for text, why in zip(sub["response"], sub["finish_reason"])
            ]
            logps, mask = completion_logprobs(model, prompts, completions, pad, device)
            for key, value, tokens, n in zip(
                zip(sub["id"], sub["sample"]), (logps * mask).sum(1).tolist(), completions, sub["n_tokens"]
            ):
                if len(tokens) == n:
                    out[key] = value
    return out


def reweighted_rates(rollouts, logp_new, logp_old) -> dict[str, float]:
    """Self-normalized importance estimate of each prompt's success rate under the new model, from the
    samples scored under both (a prompt with none has no estimate)."""
    import numpy as np

    rates = {}
    for (pid,), group in rollouts.group_by(["id"]):
        scored = [
            (k, c)
            for k, c in zip(zip(group["id"], group["sample"]), group["correct"])
            if k in logp_new and k in logp_old
        ]
        if not scored:
            continue
        logw = np.array([logp_new[k] - logp_old[k] for k, _ in scored])
        w = np.exp(logw - logw.max())
        rates[pid] = float((w * np.array([c for _, c in scored], float)).sum() / w.sum())
    return rates


def main() -> int:
    args = parse_args()
    import polars as pl

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from rlvrflow.curriculum import tier_to_dir
    from rlvrflow.flows.spec import load_spec

    spec = load_spec(args.spec)
    cur = spec.curriculum
    if cur.temperature != 1.0 or cur.top_p != 1.0:
        raise SystemExit(
            f"the tiering samples were drawn at temperature {cur.temperature}, top_p {cur.top_p}; the "
            "importance weights here are the models' plain log-probs, which hold for temperature 1 "
            "and top_p 1 only"
        )
    tiers = pl.read_parquet(Path(args.tiers) / "tiers.parquet")
    rollouts = pl.read_parquet(Path(args.tiers) / "tier_rollouts.parquet")
    n = int(tiers["n_samples"][0])
    print(
        f"pool: {tiers.height} prompts tiered {n} samples each; offline counts "
        + ", ".join(f"{k}/{n}: {c}" for k, c in sorted(tiers["n_correct"].value_counts().iter_rows()))
    )
    logp_sft = sequence_logprobs(args.sft, tiers, rollouts)
    print(
        f"{rollouts.height - len(logp_sft)} of {rollouts.height} samples left out of the weights: their text "
        "does not encode back to the tokens sampled"
    )
    learnable = (pl.col("k0") > 0) & (pl.col("k0") < n)
    flat = ((pl.col("k1") == 0) | (pl.col("k1") == n)).mean()
    for model_dir in [args.sft, *args.checkpoint]:
        started = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            again = tier_to_dir(
                tiers.drop("n_samples", "n_correct", "pass_at_1", "pass_at_k", "tier"),
                model_dir,
                spec.curriculum,
                tmp,
                args.seed,
                device="cpu",
            )
        now = dict(zip(again["id"].to_list(), again["n_correct"].to_list()))
        rates = (
            reweighted_rates(rollouts, sequence_logprobs(model_dir, tiers, rollouts), logp_sft)
            if model_dir != args.sft
            else {}
        )
        df = pl.DataFrame(
            {
                "k0": tiers["n_correct"].to_list(),
                "k1": [now[i] for i in tiers["id"].to_list()],
                "p_hat": [rates.get(i) for i in tiers["id"].to_list()],
            },
            schema_overrides={"p_hat": pl.Float64},
        )
        label = "the SFT model again (sampling noise)" if model_dir == args.sft else model_dir
        print(f"\n{label}  ({time.time() - started:.0f} s)")
        print(f"{'offline k':>9}  {'prompts':>7}  {'mixed now':>9}  {'all right':>9}  {'all wrong':>9}")
        per_k = (
            df.group_by("k0")
            .agg(
                pl.len().alias("m"),
                (1 - flat).alias("mixed"),
                (pl.col("k1") == n).mean().alias("right"),
                (pl.col("k1") == 0).mean().alias("wrong"),
            )
            .sort("k0")
        )
        for k0, m, mixed, right, wrong in per_k.iter_rows():
            print(f"{k0:>7}/{n}  {m:>7}  {mixed:>9.3f}  {right:>9.3f}  {wrong:>9.3f}")
        if model_dir == args.sft:
            continue
        base = df.filter(learnable)
        pick = df.filter(learnable & pl.col("p_hat").is_between(args.low, args.high))
        if not base.height or not pick.height:
            print(
                f"zero-variance under it: not compared ({base.height} offline learnable prompts, {pick.height} "
                f"reweighted into [{args.low}, {args.high}])"
            )
            continue
        zb, zp = base.select(flat).item(), pick.select(flat).item()
        ratio = f"{zp / zb:.2f}" if zb else "n/a (the learnable tier has no flat prompt)"
        print(
            f"zero-variance under it: offline learnable ({base.height} prompts) {zb:.3f}; reweighted into "
            f"[{args.low}, {args.high}] ({pick.height} prompts) {zp:.3f}; ratio {ratio}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
