"""Rollout and policy-forward benchmark: rlvrflow's shared-prompt paths against transformers' own.

A GRPO step samples G completions of each prompt and then scores them with the prompt in front. The
peer paths are what TRL's GRPOTrainer runs on CPU: `model.generate` over the prompt repeated G times
(our `HFEngine(decode="hf")`), then one padded forward over every prompt+completion pair
(`completion_logprobs(share_prompts=False)`). Ours: `HFEngine`'s default decoder (each prompt
prefilled once, its KV cache repeated for the G samples, ended rows dropped from the batch) and the
shared-prompt forward (each prompt once, gradients through the shared pass). Same model, prompts,
seed and sampling; the greedy tokens of both decoders are checked equal and the log-probs close.

    .venv/bin/python bench/rollout_engine.py                      # embedded model after a short SFT
    .venv/bin/python bench/rollout_engine.py --model runs/demo/sft --prompts 16 --group 8

Prompts come from the sample domain's arithmetic generators (as in bench/trl_grpo.py). Prints seconds
per call (best of --repeats) for each path and the ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a HF causal-LM directory (default: embedded model + short SFT)")
    p.add_argument("--sft-steps", type=int, default=200, help="SFT steps for the default model")
    p.add_argument("--prompts", type=int, default=8, help="prompts per call (a GRPO step's prompts_per_step)")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "rollout_engine"))
    return p.parse_args(argv)


def default_model(rows, args, out: Path) -> Path:
    from rlvrflow.training.config import SFTConfig, TrainingConfig
    from rlvrflow.training.sft import run_sft
    from rlvrflow.training.tiny_model import resolve_base_model

    cfg = TrainingConfig(
        sft=SFTConfig(max_steps=args.sft_steps), seed=args.seed, device="cpu", torch_threads=args.threads
    )
    base = resolve_base_model(cfg, rows["prompt"].to_list() + rows["solution"].to_list(), out / "base", args.seed)
    return Path(run_sft(base, rows, cfg, out / "sft", args.seed))


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv: list[str] | None = None) -> int:
    import torch

    from rlvrflow.engines import HFEngine, SamplingParams
    from trl_grpo import arithmetic_rows
    from rlvrflow.training.modeling import completion_logprobs, encode_prompt, load_model_and_tokenizer

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    rows, _ = arithmetic_rows(max(200, args.prompts), args.seed)
    model_dir = Path(args.model) if args.model else default_model(rows, args, out)
    model, tok = load_model_and_tokenizer(model_dir, torch.device("cpu"))
    prompts = rows["prompt"].to_list()[: args.prompts]
    sampled = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)
    width = args.prompts * args.group
    ours = HFEngine(model, tok, batch_size=width)
    peer = HFEngine(model, tok, batch_size=width, decode="hf")

    results = {}
    for name, sp, n in (("sample P x G", sampled, args.group), ("greedy P x 1", greedy, 1)):
        t_peer, g_peer = best_of(lambda: peer.generate(prompts, n, sp, args.seed), args.repeats)
        t_ours, g_ours = best_of(lambda: ours.generate(prompts, n, sp, args.seed), args.repeats)
        results[name] = (t_peer, t_ours)
        if sp.temperature == 0:
            same = all(a.token_ids == b.token_ids for ga, gb in zip(g_ours, g_peer) for a, b in zip(ga, gb))
            gap = max(
                abs(x - y)
                for ga, gb in zip(g_ours, g_peer)
                for a, b in zip(ga, gb)
                for x, y in zip(a.logprobs, b.logprobs)
            )
            print(f"[check] greedy tokens identical: {same}; largest log-prob gap {gap:.2e}")
            if not same:
                raise SystemExit("the two decoders disagree on greedy tokens: the comparison is void")
    groups = ours.generate(prompts, args.group, sampled, args.seed)
    p_ids = [encode_prompt(tok, p) for p in prompts for _ in range(args.group)]
    c_ids = [list(c.token_ids) for g in groups for c in g]

    def fwd_bwd(share: bool):
        def run():
            model.zero_grad(set_to_none=True)
            logp, mask = completion_logprobs(model, p_ids, c_ids, tok.pad_token_id, torch.device("cpu"), share)
            ((logp * mask).sum() / mask.sum()).backward()

        return run

    results["policy fwd+bwd"] = (best_of(fwd_bwd(False), args.repeats)[0], best_of(fwd_bwd(True), args.repeats)[0])
    mean_len = sum(len(c) for c in c_ids) / len(c_ids)
    mean_prompt = sum(len(p) for p in p_ids) / len(p_ids)
    print(
        f"\nmodel {model_dir}; {args.prompts} prompts x G={args.group}; prompt {mean_prompt:.0f} tokens, "
        f"completion {mean_len:.1f} tokens (cap {args.max_new_tokens}); {args.threads} threads; best of {args.repeats}"
    )
    print(f"{'path':<16}{'transformers (s)':>18}{'rlvrflow (s)':>14}{'ratio':>8}")
    for name, (t_peer, t_ours) in results.items():
        print(f"{name:<16}{t_peer:>18.3f}{t_ours:>14.3f}{t_peer / t_ours:>7.2f}x")
    step_peer = results["sample P x G"][0] + results["policy fwd+bwd"][0]
    step_ours = results["sample P x G"][1] + results["policy fwd+bwd"][1]
    print(f"{'GRPO step core':<16}{step_peer:>18.3f}{step_ours:>14.3f}{step_peer / step_ours:>7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
