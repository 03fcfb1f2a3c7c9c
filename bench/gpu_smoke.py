"""GPU smoke test: GRPO steps at real model size in bf16, full fine-tuning and LoRA, then under ZeRO-2.

What it does, with no downloads: builds a randomly initialized Qwen2.5-0.5B-shaped model from a config
(151,936-token vocabulary, 24 layers, hidden 896, tied embeddings) and the embedded character tokenizer
for the prompts, samples G completions per prompt with HF `generate`, scores them, and runs `--steps`
GRPO updates with `training.grpo_math.grpo_loss`, once per arm (`--arms full,lora`):
  full: float32 master weights, forwards under bf16 autocast (training/precision.py), AdamW on all;
  lora: the base stored in bf16 and frozen, float32 adapters (r=--lora-r on attention and MLP) added by
        `training.lora.add_adapters`, counted by `training.lora.parameter_counts`, as `train_grpo` does.
Then, if `deepspeed` imports, it relaunches itself on every visible GPU with ZeRO-2 and bf16
(`training.distributed`) for each arm, padding the batch to the data-parallel size. It prints, per
phase and arm: rollout tokens/s, update tokens/s, the update's model FLOPs utilization and peak GPU
memory of the rollout and of the update; it exits non-zero on NaN/inf or any error.

MFU of the update = model FLOPs / (update seconds * ranks * peak bf16 dense FLOP/s), with the standard
estimate per trained token (prompt + completion, padding rows excluded), N = the base model's
parameters (the tied embedding counted once, as the LM head's matmul):
  full: 6 * N                 (forward 2N, backward 4N: activation and weight gradients)
  lora: 4 * N + 6 * N_adapter (forward 2N; backward 2N for the activation gradients only, the frozen
                               weights get none; the adapters' own forward + backward 6 N_adapter)
Attention's sequence-length term and the log-softmax over the vocabulary are left out (short
sequences: a few percent). Peak: PEAK_TFLOPS by GPU name, else --peak-tflops.

Run (see bench/gpu_smoke.sh for the wrapper that checks the environment first):
    python bench/gpu_smoke.py                        # CUDA: 0.5B model, then ZeRO-2 on all GPUs
    python bench/gpu_smoke.py --device cpu --tiny    # CPU fallback: a 2-layer model, ZeRO-2 on 2 gloo ranks

The reward is a stand-in (the fraction of even token ids in a completion): a random model never
solves arithmetic, so a verifier would give all-zero groups and a zero loss. The stand-in gives every
group reward variance, which is what exercises the advantage and loss path. With `--model` (a real
model, rewarded by the math verifier) and vLLM installed, the same prompts and groups then go through
the project's vLLM engine (engines/vllm_engine.py) in bf16, and its rollout tokens/s print beside HF
`generate`'s of each arm (`--vllm auto|on|off`). Left out here: the KL term (beta 0). `--loop` then runs the whole `train_grpo` loop with the DeepSpeed
backend on the copy-task toy (`tests/training_scale/ds_loop_worker.py`, as the CPU test does on 2 gloo
ranks) with ZeRO-2 and ZeRO-3 on the GPUs: rank-0 rollouts and eval broadcast, grad_accum 2, per-rank
checkpoints, kill after step 3 and resume; it checks the ranks agree and the resumed run ends at the
uninterrupted run's weights.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QWEN2_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=512,
)
# bf16 dense tensor-core peak (no sparsity), TFLOP/s, matched against torch.cuda.get_device_name().
# H100 is the SXM figure; an H100 PCIe (756) or any other GPU: pass --peak-tflops.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}
ARMS = ("full", "lora")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="a 2-layer model instead of the 0.5B one")
    p.add_argument(
        "--model",
        default=None,
        help="a real pretrained model instead of the random one: a Hugging Face folder, or a .gguf file "
        "imported first with `rlvrflow import-model` (needs the gguf package); its tokenizer and "
        "chat template prompt it, and the math verifier rewards it",
    )
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--group", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default="full,lora", help="comma-separated: full (fine-tuning), lora (peft adapters)")
    p.add_argument("--lora-r", type=int, default=16, help="LoRA rank (alpha = 2r) on attention and MLP")
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=0.0,
        help=f"the device's bf16 dense peak for MFU (default: by GPU name, {PEAK_TFLOPS})",
    )
    p.add_argument(
        "--deepspeed",
        choices=["auto", "on", "off"],
        default="auto",
        help="auto: run the ZeRO-2 phase when deepspeed imports; on: fail if it does not",
    )
    p.add_argument("--nproc", type=int, default=0, help="ZeRO-2 ranks (0: all GPUs; 2 on CPU)")
    p.add_argument(
        "--loop",
        choices=["auto", "on", "off"],
        default="auto",
        help="the train_grpo loop on the DeepSpeed backend (ZeRO-2 and 3, kill + resume); auto: when deepspeed imports",
    )
    p.add_argument(
        "--vllm",
        choices=["auto", "on", "off"],
        default="auto",
        help="with --model: the same prompts and groups through the project's vLLM engine after the arms "
        "(rollout tokens/s beside HF generate's); auto: when vllm imports, on: fail if it does not",
    )
    p.add_argument("--ds-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--arm", choices=ARMS, default="full", help=argparse.SUPPRESS)  # the ZeRO-2 child's arm
    # The deepspeed launcher appends --local_rank=N; the rank is read from the environment instead.
    p.add_argument("--local_rank", "--local-rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not args.arm_list or set(args.arm_list) - set(ARMS):
        p.error(f"--arms {args.arms!r}: pick from {','.join(ARMS)}")
    if args.vllm == "on" and not args.model:
        p.error("--vllm on needs --model: vLLM loads a saved model folder, and the random model is never saved")
    return args


def real_model_dir(args: argparse.Namespace) -> Path | None:
    """--model as a Hugging Face folder: a .gguf file is imported once into bench/out/gpu_smoke/<name>/."""
    if not args.model:
        return None
    path = Path(args.model)
    if path.suffix != ".gguf":
        return path
    out = REPO / "bench" / "out" / "gpu_smoke" / path.stem
    if not (out / "config.json").exists():
        from rlvrflow.training.import_model import import_gguf

        t0 = time.perf_counter()
        import_gguf(path, out, force=True)
        print(f"[gpu_smoke] imported {path.name} -> {out} in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def shop_questions(n: int) -> list[tuple[str, str]]:
    """(question, gold) pairs of the retail sample's kind, short enough for a 135M model to get some right."""
    asks = []
    for i in range(n):
        a, b = 2 + i * 7 % 9, 3 + i * 13 % 40
        asks.append(
            (
                f"A customer buys {a} items at {b} yuan each. How much do they pay in total? "
                "End your reply with 'Answer: <number>'.",
                str(a * b),
            )
        )
    return asks


def build_real(args: argparse.Namespace, device, arm: str):
    """(model, tokenizer, prompt ids, golds, stop ids) of --model, loaded as `train_grpo` loads a policy:
    full in float32, lora a frozen bf16 base + float32 adapters; prompts through its chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.engines.hf_engine import PromptFormat, stop_token_ids
    from rlvrflow.training import lora
    from rlvrflow.training.config import LoRAConfig
    from rlvrflow.training.precision import resolve_dtype

    folder = real_model_dir(args)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.float32 if arm == "full" else resolve_dtype("auto", device)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device)
    if arm == "lora":
        model = lora.add_adapters(model, LoRAConfig(r=args.lora_r, alpha=2.0 * args.lora_r)).to(device)
    model.train(True)
    fmt = PromptFormat.for_tokenizer(tokenizer, "auto")
    asks = shop_questions(args.prompts)
    return (
        model,
        tokenizer,
        [fmt.encode(tokenizer, q) for q, _ in asks],
        [g for _, g in asks],
        stop_token_ids(model, tokenizer, fmt),
    )


def build(args: argparse.Namespace, device, arm: str):
    """(model, tokenizer, prompt token lists) with nothing downloaded; `arm` as `train_grpo` loads it
    (training.modeling.load_policy): full in float32, lora a frozen base in bf16 (fp32 on CPU) + adapters."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from rlvrflow.training import lora
    from rlvrflow.training.config import LoRAConfig
    from rlvrflow.training.precision import resolve_dtype
    from rlvrflow.training.tiny_model import build_tokenizer

    prompts = [f"What is {a} + {b}? Answer: " for a, b in ((i * 7 % 50, i * 13 % 50) for i in range(args.prompts))]
    tokenizer = build_tokenizer(prompts + ["0123456789"])
    dims = TINY if args.tiny else QWEN2_05B
    cfg = Qwen2Config(
        **dims,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(args.seed)
    dtype = torch.float32 if arm == "full" else resolve_dtype("auto", device)
    with torch.device(device):  # initialize straight on the GPU: 0.5B params on CPU take ~10 s
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    if arm == "lora":
        model = lora.add_adapters(model, LoRAConfig(r=args.lora_r, alpha=2.0 * args.lora_r)).to(device)
        model.train(True)
    return model, tokenizer, [tokenizer(p).input_ids for p in prompts]


def rollout(model, prompt_ids: list[list[int]], args, pad_id: int, eos_ids: tuple[int, ...], device):
    """G sampled completions per prompt (HF generate, left-padded, ended by any of `eos_ids`). Returns
    (prompts, completions) per row."""
    import torch

    rows = [p for p in prompt_ids for _ in range(args.group)]
    width = max(len(p) for p in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(rows):
        ids[i, width - len(p) :] = torch.tensor(p)
        attn[i, width - len(p) :] = 1
    model.eval()
    with torch.no_grad(), _autocast(device):
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=attn.to(device),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=args.max_new_tokens,
            min_new_tokens=1,
            pad_token_id=pad_id,
            eos_token_id=list(eos_ids),
        )
    model.train()
    completions = []
    for seq in out[:, width:].tolist():
        cut = next((i + 1 for i, tok in enumerate(seq) if tok in eos_ids), len(seq))  # keep EOS, drop the rest
        completions.append(seq[:cut])
    return rows, completions


def stand_in_rewards(completions: list[list[int]], group: int):
    """(P, G) rewards: fraction of even token ids (see the module docstring for why not a verifier)."""
    import torch

    r = torch.tensor([sum(t % 2 == 0 for t in c) / max(1, len(c)) for c in completions])
    return r.view(-1, group)


def verifier_rewards(tokenizer, completions: list[list[int]], golds: list[str], group: int):
    """(P, G) rewards of a real model's completions: the math verifier's score against each prompt's gold."""
    import torch

    from rlvrflow.verifiers import verify

    texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
    return torch.tensor([verify("math", text, golds[i // group]).score for i, text in enumerate(texts)]).view(-1, group)


def _autocast(device):
    """bf16 autocast on a GPU (training.dtype auto), none on CPU: the project's own precision rule."""
    from rlvrflow.training.precision import autocast, resolve_dtype

    return autocast(device, resolve_dtype("auto", device))


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def grpo_step(model, rows, completions, advantages, weight, pad_id, device, denom):
    """One on-policy GRPO loss (old_logp = logp.detach(), as with one update per batch)."""
    from rlvrflow.training.grpo_math import grpo_loss
    from rlvrflow.training.modeling import completion_logprobs

    with _autocast(device):
        logp, mask = completion_logprobs(model, rows, completions, pad_id, device)  # (B, Tc) each
    mask = mask.float() * weight.to(device)[:, None]  # padding rows (weight 0) add nothing
    loss, stats = grpo_loss(
        logp,
        logp.detach(),
        None,
        advantages.to(device),
        mask,
        0.2,
        0.28,
        0.0,
        "token",
        total_tokens=denom(mask.sum().item()),
    )
    return loss, stats, int(mask.sum().item())


def update_flops_per_token(counts: dict, arm: str) -> float:
    """Model FLOPs per trained token (see the module docstring): 6N full, 4N + 6 N_adapter LoRA."""
    if arm == "full":
        return 6.0 * counts["total_params"]
    adapter = counts["trainable_params"]
    return 4.0 * (counts["total_params"] - adapter) + 6.0 * adapter


def peak_tflops(args: argparse.Namespace, device) -> tuple[float, str]:
    """(peak bf16 dense TFLOP/s, where it came from); 0 when unknown (MFU then prints n/a)."""
    import torch

    if args.peak_tflops > 0:
        return args.peak_tflops, "--peak-tflops"
    if device.type != "cuda":
        return 0.0, "cpu: pass --peak-tflops for an MFU"
    name = torch.cuda.get_device_name(device)
    hit = next((k for k in PEAK_TFLOPS if k in name.replace(" ", "")), None)
    return (PEAK_TFLOPS[hit], f"{name} = {hit}") if hit else (0.0, f"{name} is not in PEAK_TFLOPS: pass --peak-tflops")


def _peak_gib(device) -> float:
    """Peak allocated GPU memory since the last reset, GiB (NaN on CPU), and reset it for the next phase."""
    import torch

    if device.type != "cuda":
        return float("nan")
    _sync(device)
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def _sum_over_ranks(x: float) -> float:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return x
    t = torch.tensor([x], dtype=torch.float64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t)
    return float(t.item())


def run(args: argparse.Namespace, arm: str) -> dict:
    """One arm of the single-process phase (or one rank of the ZeRO-2 phase when args.ds_child)."""
    import torch

    from rlvrflow.training import lora
    from rlvrflow.training.distributed import dist_env, dp_loss_denominator, pad_for_data_parallel, shard_rows
    from rlvrflow.training.grpo_math import group_advantages

    env = dist_env()
    if args.device == "cuda":
        torch.cuda.set_device(env.local_rank)
        device = torch.device("cuda", env.local_rank)
    else:
        device = torch.device("cpu")
    if args.model:
        model, tok, prompt_ids, golds, eos_ids = build_real(args, device, arm)
    else:
        (model, tok, prompt_ids), golds, eos_ids = build(args, device, arm), None, None
        eos_ids = (tok.eos_token_id,)
    counts = lora.parameter_counts(model)
    if args.ds_child:
        from rlvrflow.training.distributed import deepspeed_config, init_deepspeed

        cfg = deepspeed_config(
            stage=2, micro_batch=1, grad_accum=1, lr=args.lr, world_size=env.world_size, bf16=device.type == "cuda"
        )
        model, optimizer = init_deepspeed(model, cfg)
        module = model.module
    else:
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=args.lr, fused=device.type == "cuda")
        module = model
    flops_tok = update_flops_per_token(counts, arm)
    peak, peak_src = peak_tflops(args, device)
    torch.manual_seed(args.seed + 1000 * env.rank)
    log = {
        "phase": "zero2" if args.ds_child else "single",
        "arm": arm,
        "ranks": env.world_size,
        "model": Path(args.model).name if args.model else None,
        **counts,
        "flops_per_token": flops_tok,
        "peak_tflops": peak,
        "peak_source": peak_src,
        "steps": [],
    }
    _peak_gib(device)  # from here on: the weights (and optimizer state, once allocated) count in each phase
    for step in range(args.steps):
        _sync(device)
        t0 = time.perf_counter()
        rows, comps = rollout(module, prompt_ids, args, tok.pad_token_id, eos_ids, device)
        _sync(device)
        t1 = time.perf_counter()
        rollout_gib = _peak_gib(device)
        rewards = verifier_rewards(tok, comps, golds, args.group) if args.model else stand_in_rewards(comps, args.group)
        adv = group_advantages(rewards, std_normalize=True).flatten()  # (B,)
        # Drop one row, as a filtered group would, so the padding path runs whenever world_size > 1.
        batch = (
            {"rows": rows[:-1], "comps": comps[:-1], "adv": adv[:-1]}
            if env.world_size > 1
            else {"rows": rows, "comps": comps, "adv": adv}
        )
        padded = pad_for_data_parallel(batch, env.world_size)
        mine = shard_rows({**padded.batch, "w": padded.row_weight}, env.rank, env.world_size)
        loss, stats, n_tok = grpo_step(
            model,
            mine["rows"],
            mine["comps"],
            mine["adv"],
            mine["w"],
            tok.pad_token_id,
            device,
            lambda n: dp_loss_denominator(n, env.world_size),
        )
        if args.ds_child:
            model.backward(loss)
            model.step()
            grad_norm = model.get_global_grad_norm()
        else:
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0).item()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        _sync(device)
        t2 = time.perf_counter()
        update_gib = _peak_gib(device)
        gen_tokens = sum(len(c) for c in comps)
        real = zip(mine["rows"], mine["comps"], mine["w"])
        train_tokens = _sum_over_ranks(
            float(sum(len(r) + len(c) for r, c, w in real if float(w) > 0))
        )  # no padding rows
        mfu = flops_tok * train_tokens / ((t2 - t1) * env.world_size * peak * 1e12) if peak else float("nan")
        entry = {
            "step": step,
            "loss": loss.item(),
            "grad_norm": float(grad_norm if grad_norm is not None else float("nan")),
            "rollout_tok_s": gen_tokens / (t1 - t0),
            "update_tok_s": train_tokens / (t2 - t1),
            "mfu": mfu,
            "rollout_peak_gib": rollout_gib,
            "update_peak_gib": update_gib,
            "completion_tokens_in_loss": n_tok,
            "pad_rows": padded.n_pad,
            "reward_mean": rewards.mean().item(),
            "ended": sum(bool(c) and c[-1] in eos_ids for c in comps) / len(comps),
            **stats,
        }
        log["steps"].append(entry)
        if env.is_main:
            print(json.dumps(entry), flush=True)
        if not (math.isfinite(entry["loss"]) and math.isfinite(entry["grad_norm"])):
            raise FloatingPointError(f"non-finite loss/grad at step {step}: {entry}")
    return log


def vllm_rollouts(args: argparse.Namespace, device) -> dict:
    """--model's rollouts through the project's vLLM engine (engines/vllm_engine.py, in this process):
    the same chat prompts, group size, temperature 1.0 and token cap as the arms' HF `generate`, bf16 on
    a GPU (float32 on CPU), --steps calls each with its own seed; tokens/s per call and the verifier's
    reward, so the first GPU run measures what the rollout engine buys on a real model."""
    from transformers import AutoTokenizer

    from rlvrflow.engines.factory import vllm_prompting
    from rlvrflow.engines.hf_engine import PromptFormat, SamplingParams
    from rlvrflow.engines.vllm_engine import VLLMEngine

    folder = real_model_dir(args)
    fmt = PromptFormat.for_tokenizer(AutoTokenizer.from_pretrained(folder), "auto")  # as build_real prompts
    tokenizer, fmt, stops = vllm_prompting(folder, fmt)  # the stop ids the project's vLLM engines get
    asks = shop_questions(args.prompts)
    prompt_ids = [fmt.encode(tokenizer, q) for q, _ in asks]
    cuda = device.type == "cuda"
    t0 = time.perf_counter()
    engine = VLLMEngine(
        str(folder),
        dtype="bfloat16" if cuda else "float32",
        max_model_len=max(len(p) for p in prompt_ids) + args.max_new_tokens + 16,
        gpu_memory_utilization=0.3 if cuda else 0.1,
        enforce_eager=not cuda,
        seed=args.seed,
        stop_token_ids=stops,
    )
    log = {"phase": "vllm", "model": Path(args.model).name, "load_s": time.perf_counter() - t0, "steps": []}
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens)
    try:
        for step in range(args.steps):
            t0 = time.perf_counter()
            groups = engine.generate(prompt_ids, n=args.group, sampling=sampling, seed=args.seed + step)
            seconds = time.perf_counter() - t0
            comps = [list(c.token_ids) for g in groups for c in g]
            rewards = verifier_rewards(tokenizer, comps, [g for _, g in asks], args.group)
            entry = {
                "step": step,
                "rollout_tok_s": sum(len(c) for c in comps) / seconds,
                "completions": len(comps),
                "reward_mean": rewards.mean().item(),
                "ended": sum(bool(c) and c[-1] in stops for c in comps) / len(comps),
            }
            log["steps"].append(entry)
            print(json.dumps(entry), flush=True)
    finally:
        engine.close()
    return log


def warm_mean(log: dict, key: str) -> float:
    """The mean of `key` over a phase's steps after the first, which includes warm-up (kernels, graphs,
    allocator); over the one step when there is only one."""
    steps = log["steps"][1:] or log["steps"]
    return sum(s[key] for s in steps) / len(steps)


def summarize_vllm(log: dict, hf_tok_s: dict[str, float]) -> str:
    mean = lambda key: warm_mean(log, key)  # noqa: E731
    beside = ", ".join(
        f"{arm} {tok_s:.0f} tok/s ({mean('rollout_tok_s') / tok_s:.2f}x)" for arm, tok_s in hf_tok_s.items()
    )
    return (
        f"[vllm] {log['model']}: loaded in {log['load_s']:.0f} s; rollout {mean('rollout_tok_s'):.0f} tok/s, "
        f"reward {mean('reward_mean'):.3f}, ended {100 * mean('ended'):.0f}%"
        + (f"; HF generate in the arms above: {beside}" if beside else "")
    )


def summarize(log: dict) -> str:
    mean = lambda key: warm_mean(log, key)  # noqa: E731
    top = lambda key: max(s[key] for s in log["steps"])  # noqa: E731
    mem = (
        f"peak mem rollout {top('rollout_peak_gib'):.2f} GiB, update {top('update_peak_gib'):.2f} GiB"
        if math.isfinite(top("update_peak_gib"))
        else "peak mem n/a (cpu)"
    )
    mfu = f"{100 * mean('mfu'):.1f}%" if math.isfinite(mean("mfu")) else "n/a"
    formula = "6N" if log["arm"] == "full" else "4N + 6N_adapter"
    reward = f"reward {mean('reward_mean'):.3f}, ended {100 * mean('ended'):.0f}%, " if log.get("model") else ""
    return (
        f"[{log['phase']}/{log['arm']}] {log.get('model') or 'random'} ranks={log['ranks']} params={log['total_params'] / 1e6:.2f}M "
        f"trainable={log['trainable_params'] / 1e6:.2f}M; rollout {mean('rollout_tok_s'):.0f} tok/s (rank 0), "
        f"update {mean('update_tok_s'):.0f} tok/s (all ranks), MFU {mfu} "
        f"[{formula} = {log['flops_per_token'] / 1e9:.3g} GFLOP/token; peak {log['peak_tflops']:.4g} TFLOP/s "
        f"per rank, {log['peak_source']}], {mem}, {reward}losses {[round(s['loss'], 5) for s in log['steps']]}"
    )


def launch_zero2(args: argparse.Namespace, argv: list[str], arm: str) -> int:
    """Relaunch this script on every rank with --ds-child for `arm`; returns the launcher's exit code."""
    import torch

    n = args.nproc or (torch.cuda.device_count() if args.device == "cuda" else 2)
    script = str(Path(__file__).resolve())
    launcher = shutil.which("deepspeed") if args.device == "cuda" else None
    if launcher:
        cmd = [launcher, "--num_gpus", str(n), script, *argv, "--ds-child", "--arm", arm]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(n),
            script,
            *argv,
            "--ds-child",
            "--arm",
            arm,
        ]
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if args.device == "cpu":
        env.update(DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    print(f"[zero2] launching: {' '.join(cmd)}", flush=True)
    return subprocess.run(cmd, env=env, timeout=900).returncode


def loop_missing() -> list[str]:
    """What `check_loop` (the toy rows, train_grpo, the math verifier) cannot import here."""
    import importlib

    missing = []
    for name in ("polars", "pytest", "rlvrflow.curriculum", "rlvrflow.training.grpo", "rlvrflow.verifiers.math"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    return missing


def check_loop(args: argparse.Namespace) -> int:
    """train_grpo with backend deepspeed on the copy-task toy, ZeRO-2 then ZeRO-3; 0 when all checks pass."""
    import importlib.util
    import tempfile

    import torch

    spec = importlib.util.spec_from_file_location("toy_conftest", REPO / "tests" / "training" / "conftest.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    from safetensors.torch import load_file

    from rlvrflow.training.sft import run_sft
    from rlvrflow.training.tiny_model import build_tiny_model

    n = args.nproc or (torch.cuda.device_count() if args.device == "cuda" else 2)
    worker = REPO / "tests" / "training_scale" / "ds_loop_worker.py"
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "DS_LOOP_DEVICE": args.device,
        "OMP_NUM_THREADS": "1",
    }
    if args.device == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
    with tempfile.TemporaryDirectory(prefix="gpu_smoke_loop_") as tmp:
        root = Path(tmp)
        base = build_tiny_model(toy.corpus(), root / "base", seed=0, dims=toy.TINY)
        sft = run_sft(base, toy.copy_rows(200, 1), toy.training_cfg(), root / "sft", seed=0)
        for stage in (2, 3):

            def launch(out: str, kill_after: int) -> int:
                cmd = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nproc_per_node",
                    str(n),
                    str(worker),
                    str(sft),
                    str(root / f"z{stage}_{out}"),
                    str(kill_after),
                    str(stage),
                    str(root / f"z{stage}_{out}.json"),
                ]
                t0 = time.perf_counter()
                rc = subprocess.run(cmd, env=env, timeout=900).returncode
                print(
                    f"[loop] ZeRO-{stage} {out} (kill after {kill_after}): rc {rc}, {time.perf_counter() - t0:.0f} s",
                    flush=True,
                )
                return rc

            if launch("straight", 0) != 0 or launch("killed", 3) == 0 or launch("killed", 0) != 0:
                print(f"[loop] ZeRO-{stage}: a launch failed (see above)", file=sys.stderr)
                return 5
            recs = [json.loads(Path(f"{root / f'z{stage}_straight.json'}.rank{r}").read_text()) for r in range(n)]
            a = load_file(root / f"z{stage}_straight" / "step_000005" / "model.safetensors")
            b = load_file(root / f"z{stage}_killed" / "step_000005" / "model.safetensors")
            diff = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
            agree = all(
                r["metrics"] == recs[0]["metrics"]
                and r["reports"] == recs[0]["reports"]
                and r["evals"] == recs[0]["evals"]
                for r in recs
            )
            only_main = recs[0]["generate_calls"] > 0 and all(r["generate_calls"] == 0 for r in recs[1:])
            print(
                f"[loop] ZeRO-{stage}: ranks agree {agree}, rank 0 alone generates {only_main}, "
                f"resumed vs straight max weight diff {diff:.2e}",
                flush=True,
            )
            if not (agree and only_main and diff < 1e-2):  # bf16 on GPU; fp32 CPU runs match exactly
                return 5
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible; run with --device cpu --tiny for the CPU fallback", file=sys.stderr)
        return 2
    if args.ds_child:
        from rlvrflow.training.distributed import barrier, leave_process_group

        log = run(args, args.arm)
        if int(os.environ.get("RANK", "0")) == 0:
            print(summarize(log), flush=True)
        barrier()
        leave_process_group()  # an exit with the group up can abort a rank after its work (SIGABRT)
        return 0
    summaries, hf_tok_s = [], {}
    for arm in args.arm_list:
        log = run(args, arm)
        hf_tok_s[arm] = warm_mean(log, "rollout_tok_s")
        summaries.append(summarize(log))
        print(summaries[-1], flush=True)
        del log
        if args.device == "cuda":
            torch.cuda.empty_cache()  # the next arm's peaks start from an empty allocator
    if args.vllm != "off":
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            if args.vllm == "on":
                print(f"--vllm on but vllm does not import ({exc}); pip install 'rlvrflow[gpu]'", file=sys.stderr)
                return 4
            print(f"[vllm] skipped: vllm does not import ({exc})", flush=True)
        else:
            if not args.model:
                print("[vllm] skipped: vLLM loads a saved model; give --model (a real one)", flush=True)
            else:
                device = torch.device("cuda" if args.device == "cuda" else "cpu")
                summaries.append(summarize_vllm(vllm_rollouts(args, device), hf_tok_s))
                print(summaries[-1], flush=True)
    try:
        import deepspeed  # noqa: F401
    except ImportError as exc:
        if args.deepspeed == "on" or args.loop == "on":
            print(f"--deepspeed on but deepspeed does not import ({exc}); pip install 'rlvrflow[gpu]'", file=sys.stderr)
            return 3
        print(f"[zero2] skipped: deepspeed does not import ({exc})", flush=True)
        return 0
    if args.deepspeed == "off":
        return 0
    for arm in args.arm_list:
        rc = launch_zero2(args, argv, arm)
        if rc != 0:
            return rc
    print("[summary] single process:\n  " + "\n  ".join(summaries), flush=True)
    if args.loop == "off":
        return 0
    missing = loop_missing()
    if missing:  # the loop needs the project's own dependencies, not only the smoke's
        print(
            f"[loop] {'cannot run' if args.loop == 'on' else 'skipped'}: {missing}; install the project's "
            "dependencies (`pip install -e .`, or from a wheelhouse of them) or pass --loop off",
            flush=True,
        )
        return 3 if args.loop == "on" else 0
    return check_loop(args)


if __name__ == "__main__":
    sys.exit(main())
