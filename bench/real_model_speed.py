"""Real-model speed on CPU: the GRPO step's two halves on SmolLM2-135M-Instruct (30 layers) against transformers.

    python bench/real_model.py setup                       # once: the imported model and the retail rows
    nice python bench/real_model_speed.py [--threads 1] [--profile] [--updates 0]
    python bench/real_model_speed.py --smoke               # a random Qwen2 test model, a few tokens

Defaults: 4 prompts x G=6, 64 new tokens, 2 threads, 2 repeats, 2 updates per arm.

Rollouts: `HFEngine`'s shared-prompt decoder (what GRPO samples with: each prompt prefilled once, its
KV cache repeated for the G samples, ended rows dropped) against transformers `generate` with
`num_return_sequences=G`, the same sampling (temperature 1, top-p 1, no top-k), stop tokens, seed and
`max_new_tokens`. Greedy tokens of the two are checked equal first. Tokens/s counts the completion
tokens each produced (up to and including the end-of-turn token).

Update: the GRPO loss's forward and backward over the same prompt+completion batch (our sampled
completions; every weight trainable) as `update_policy` runs it: `completion_logprobs` with shared prompts (each prompt once,
its cache repeated for its completions) against one padded forward over every prompt+completion pair
(`share_prompts=False`, TRL's per-token log-probs with `logits_to_keep`). Tokens/s: completion tokens
scored per second.

Each comparison runs --repeats times, alternating which side goes first; every repeat's ratio is printed,
by the wall clock and by the process's CPU seconds. On a shared machine the wall clock counts other jobs'
time slices; with two threads the CPU seconds also count one thread spinning while the other waits for a
core, so `--threads 1` (the real-model spec's own `torch_threads`) gives the steadiest ratios.

LoRA (r=16, alpha 32, the attention and MLP projections, as bench/real_model.yaml) against full
fine-tuning: each in its own process, one rollout call and --updates real GRPO updates (`update_policy`
with `TorchBackend`: AdamW, clipping), seconds per update and peak memory as the process's peak RSS
(VmHWM), also less its RSS once the model is loaded.

--profile: torch.profiler's top operators (self CPU time) of one rollout call and one update, then the
fixes they point at timed alone at this run's shapes (`kernel_probe`). `--updates 0` skips the arms.

Prompts: the retail sample's clean English math tickets (bench/real_model.py's setup writes them) in the
spec's layout, rendered through the model's chat template (`PromptFormat("chat")`, as the chain does).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.real_model_answers import RETAIL_LAYOUT, math_tickets  # noqa: E402

DATA = ROOT / "bench/out/real_model"
# the LoRA / full processes: float32 (GRPO's dtype on CPU) and LoRA under `training.dtype: bfloat16`
ARMS = ("lora", "full", "lora-bf16")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", default=str(DATA / "smollm2"), help="a HF causal-LM folder (default: the imported SmolLM2)"
    )
    p.add_argument("--raw", default=str(DATA / "raw_all"), help="the retail sample's raw logs (setup writes them)")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=6, help="samples per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--updates", type=int, default=2, help="GRPO updates per LoRA / full arm (0: no arms)")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true", help="torch.profiler's top operators for a rollout and an update")
    p.add_argument(
        "--smoke", action="store_true", help="a random Qwen2 test model and a few tokens: checks the bench runs"
    )
    p.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one LoRA / full process
    p.add_argument("--batch", help=argparse.SUPPRESS)  # that process's prompts and completions (JSON)
    return p.parse_args(argv)


def retail_prompts(raw: Path, n: int, seed: int) -> list[str]:
    if not (raw / "manifest.json").is_file():
        raise SystemExit(f"{raw} has no retail sample; run `python bench/real_model.py setup` first")
    english = [t for t in math_tickets(raw) if t["lang"] == "en"]
    return [RETAIL_LAYOUT.format(question=t["question"]) for t in random.Random(seed).sample(english, n)]


def smoke_model(out: Path, prompts: list[str]) -> Path:
    from rlvrflow.training.qwen_model import build_qwen2_model

    return build_qwen2_model(prompts * 20, out, seed=0)


def load(model_dir: Path, lora_r: int = 0, dtype=None):
    """Model, tokenizer and chat format as GRPO loads its policy: `training.dtype` float32 (CPU's auto)
    unless `dtype`; LoRA adapters when lora_r (the base then stored in `dtype`)."""
    import torch

    from rlvrflow.engines import PromptFormat
    from rlvrflow.training.config import LoRAConfig
    from rlvrflow.training.modeling import load_policy

    lora = LoRAConfig(r=lora_r, alpha=2.0 * lora_r) if lora_r else None
    model, tok = load_policy(model_dir, torch.device("cpu"), dtype or torch.float32, lora)
    return model, tok, PromptFormat("chat")


def transformers_generate(model, tok, engine, prompts: list[str], n: int, sampling, seed: int) -> list[list[int]]:
    """`model.generate(num_return_sequences=n)` on the left-padded prompts, sampling as the engine does;
    the completion tokens of each row, up to and including its first stop token."""
    import torch
    from transformers import GenerationConfig

    from rlvrflow.engines.hf_engine import _only_engine_settings

    ids, attn = engine._encode(prompts)
    greedy = sampling.temperature == 0
    config = GenerationConfig(
        do_sample=not greedy,
        temperature=None if greedy else sampling.temperature,
        top_p=None if greedy else sampling.top_p,
        top_k=None if greedy else 0,
        max_new_tokens=sampling.max_new_tokens,
        num_return_sequences=n,
        eos_token_id=list(engine.eos_token_ids),
        pad_token_id=engine.pad_token_id,
    )
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), _only_engine_settings(model):
            torch.manual_seed(seed)
            out = model.generate(input_ids=ids, attention_mask=attn, generation_config=config)
    finally:
        model.train(was_training)
    rows = []
    for row in out[:, ids.shape[1] :].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in engine.eos_token_ids), len(row))
        rows.append(row[:end])
    return rows


def grpo_loss_backward(model, p_ids, c_ids, pad_id: int, share: bool) -> None:
    """The GRPO loss's forward and backward as `update_policy` runs it (token-mean, entropy as a value)."""
    import torch

    from rlvrflow.training.grpo_math import grpo_loss
    from rlvrflow.training.modeling import completion_logprobs

    model.zero_grad(set_to_none=True)
    cpu = torch.device("cpu")
    logp, mask, ent = completion_logprobs(model, p_ids, c_ids, pad_id, cpu, share, entropy="value")
    adv = torch.tensor([(-1.0) ** i for i in range(len(c_ids))])
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, mask, 0.2, 0.28, 0.0, "token", entropy=ent)
    loss.backward()


def cpu_timed(fn) -> tuple[tuple[float, float], object]:
    """(wall seconds, this process's CPU seconds) and fn's result: on a shared machine the wall clock
    counts other jobs' time slices, the CPU seconds do not (both threads' are summed)."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return (time.perf_counter() - t0, time.process_time() - c0), result


def status_mb(field: str) -> float:
    """/proc/self/status's VmRSS (resident now) or VmHWM (its peak) in MB. Not `ru_maxrss`: Linux carries
    that over from the parent through fork and exec, so a child started by a large process reports its parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"/proc/self/status has no {field}: the peak-memory figures need Linux")


def run_arm(args) -> dict:
    """One process: LoRA or full fine-tuning, one rollout call and `--updates` GRPO updates."""
    import torch

    from rlvrflow.engines import HFEngine, SamplingParams
    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.config import GRPOConfig
    from rlvrflow.training.grpo import update_policy
    from rlvrflow.training.grpo_groups import Group

    torch.set_num_threads(args.threads)
    batch = json.loads(Path(args.batch).read_text())
    dtype = torch.bfloat16 if args.arm.endswith("bf16") else torch.float32
    model, tok, fmt = load(Path(args.model), 0 if args.arm == "full" else args.lora_r, dtype)
    loaded = status_mb("VmRSS")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    g = GRPOConfig(
        prompts_per_step=len(batch["prompts"]),
        num_generations=args.group,
        max_new_tokens=args.max_new_tokens,
        learning_rate=1e-4,
        beta=0.0,
        scale_rewards="none",
    )
    backend = make_backend(model, g, dtype, lora=args.arm != "full")
    engine = HFEngine(model, tok, batch_size=len(batch["prompts"]) * args.group, prompt_format=fmt)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    with backend.autocast():  # as GRPO's rollouts run
        t_roll, groups = cpu_timed(lambda: engine.generate(batch["prompts"], args.group, sampling, args.seed))
    rolled = sum(len(c.token_ids) for grp in groups for c in grp)
    # the update trains on the main process's completions, so both arms see the same batch
    grps = [
        Group(f"p{i}", p, cs, [float(j % 2) for j in range(len(cs))], [bool(j % 2) for j in range(len(cs))])
        for i, (p, cs) in enumerate(zip(batch["prompt_ids"], batch["completions"]))
    ]
    cpu = torch.device("cpu")
    seconds = [
        cpu_timed(lambda: update_policy(backend, None, grps, g, tok.pad_token_id, cpu))[0] for _ in range(args.updates)
    ]
    peak = status_mb("VmHWM")
    return {
        "arm": args.arm,
        "trainable": trainable,
        "rollout_s": t_roll,
        "rollout_tokens": rolled,
        "update_s": seconds,
        "rss_loaded_mb": loaded,
        "peak_rss_mb": peak,
    }


def profile_top(fn, rows: int = 12) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def kernel_probe(config, width: int, tokens: int, kv_len: int, repeats: int = 5) -> list[str]:
    """The fixes the profile points at, timed alone at this run's shapes (CPU ms per call, best of
    `repeats`): matmuls in bfloat16 instead of float32 (an MLP projection and the LM head, at the
    decode's `width` rows and the update's `tokens`), and decode attention over a grouped-query cache
    with `enable_gqa` instead of transformers' repeat_kv copy (its sdpa path with a padding mask), and
    the next token drawn by inverse CDF instead of `torch.multinomial`.
    One thread: CPU seconds of two threads also count one spinning while the other waits for a core."""
    import torch
    import torch.nn.functional as F

    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            c0 = time.process_time()
            fn()
            times.append(time.process_time() - c0)
        return 1000 * min(times)

    lines = []
    hidden, inter, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    for rows in (width, tokens):
        for name, n_out in (("MLP up", inter), ("LM head", vocab)):
            x, w = torch.randn(rows, hidden), torch.randn(n_out, hidden) / hidden**0.5
            xb, wb = x.bfloat16(), w.bfloat16()  # a bfloat16 LoRA base is stored so: no cast per call
            f32, bf16 = best(lambda: F.linear(x, w)), best(lambda: F.linear(xb, wb))
            lines.append(
                f"{name} {rows} x {hidden} x {n_out}: float32 {f32:.1f} ms, bfloat16 {bf16:.1f} ms, {f32 / bf16:.2f}x"
            )
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    dim = hidden // heads
    q = torch.randn(width, heads, 1, dim)
    k, v = torch.randn(width, kv_heads, kv_len, dim), torch.randn(width, kv_heads, kv_len, dim)
    mask = torch.ones(width, 1, 1, kv_len, dtype=torch.bool)
    rep = heads // kv_heads

    def copied():
        kk = k[:, :, None].expand(-1, -1, rep, -1, -1).reshape(width, heads, kv_len, dim)
        vv = v[:, :, None].expand(-1, -1, rep, -1, -1).reshape(width, heads, kv_len, dim)
        return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)

    def grouped():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    gap = float((copied() - grouped()).abs().max())
    t_copy, t_gqa = best(copied), best(grouped)
    lines.append(
        f"decode attention, {width} rows, {heads} heads over {kv_heads} KV heads, {kv_len} positions: repeat_kv "
        f"{t_copy:.2f} ms, enable_gqa {t_gqa:.2f} ms, {t_copy / t_gqa:.2f}x (largest difference {gap:.1e}), per layer"
    )
    probs = torch.softmax(torch.randn(width, vocab), dim=-1)

    def inverse_cdf():  # the same distribution from one uniform per row
        cdf = probs.double().cumsum(-1)
        return torch.searchsorted(cdf, torch.rand(width, 1, dtype=cdf.dtype) * cdf[:, -1:], right=True)

    t_multi, t_cdf = best(lambda: torch.multinomial(probs, 1)), best(inverse_cdf)
    lines.append(
        f"drawing a token, {width} rows x {vocab}: torch.multinomial {t_multi:.2f} ms (an exponential draw per "
        f"vocabulary entry), inverse CDF {t_cdf:.2f} ms, {t_multi / t_cdf:.2f}x, per decode step"
    )
    torch.set_num_threads(threads)
    return lines


def lora_vs_full(args, out: Path, prompts: list[str], p_ids: list[list[int]], completions: list[list[int]]) -> list:
    """The LoRA / full processes (`ARMS`) on this batch; prints their table and returns their figures."""
    batch_file = out / "batch.json"
    payload = {"prompts": prompts, "prompt_ids": p_ids}
    payload["completions"] = [completions[i * args.group : (i + 1) * args.group] for i in range(args.prompts)]
    batch_file.write_text(json.dumps(payload))
    arms = []
    for arm in ARMS:
        cmd = [sys.executable, __file__, "--arm", arm, "--batch", str(batch_file), "--model", args.model]
        for flag in ("group", "max_new_tokens", "threads", "updates", "lora_r", "seed"):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the {arm} arm failed ({' '.join(cmd)}):\n{done.stderr[-3000:]}")
        arms.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"\nLoRA r={args.lora_r} against full fine-tuning, float32, and LoRA under training.dtype bfloat16; one "
        f"process each: a rollout call, then {args.updates} GRPO updates (update_policy, AdamW) on the batch above"
    )
    print(
        f"{'arm':<10}{'trainable':>12}{'rollout tok/s (CPU)':>21}{'s / update (CPU)':>26}{'peak RSS MB':>13}{'over loaded':>13}"
    )
    for a in arms:
        wall, cpu = a["rollout_s"]
        per = ", ".join(f"{w:.1f} ({c:.1f})" for w, c in a["update_s"])
        print(
            f"{a['arm']:<10}{a['trainable']:>12,}{a['rollout_tokens'] / wall:>11.1f} ({a['rollout_tokens'] / cpu:.1f})"
            f"{per:>26}{a['peak_rss_mb']:>13.0f}{a['peak_rss_mb'] - a['rss_loaded_mb']:>13.0f}"
        )
    lora, full, bf16 = arms
    cpu_of = lambda a: min(c for _, c in a["update_s"])  # noqa: E731
    print(
        f"full / LoRA: update CPU seconds {cpu_of(full) / cpu_of(lora):.2f}x (best of each), "
        f"peak RSS {full['peak_rss_mb'] / lora['peak_rss_mb']:.2f}x"
    )
    print(
        f"LoRA float32 / bfloat16: rollout CPU seconds {lora['rollout_s'][1] / bf16['rollout_s'][1]:.2f}x, "
        f"update {cpu_of(lora) / cpu_of(bf16):.2f}x"
    )
    return arms


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.arm:
        print(json.dumps(run_arm(args)))
        return 0
    import torch

    from rlvrflow.engines import HFEngine, SamplingParams

    torch.set_num_threads(args.threads)
    out = ROOT / ("bench/out/real_model_speed" + ("_smoke" if args.smoke else ""))
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        prompts = [f"A customer bought {i + 2} mugs at {3 * i + 5} yuan each. What is the total?" for i in range(8)]
        args.model = str(smoke_model(out / "smoke_model", prompts))
        prompts = [RETAIL_LAYOUT.format(question=q) for q in prompts[: args.prompts]]
    else:
        prompts = retail_prompts(Path(args.raw), args.prompts, args.seed)
    model, tok, fmt = load(Path(args.model))
    n_layers = model.config.num_hidden_layers
    width = args.prompts * args.group
    engine = HFEngine(model, tok, batch_size=width, prompt_format=fmt)
    sampled = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=min(16, args.max_new_tokens))

    ours_greedy = [list(grp[0].token_ids) for grp in engine.generate(prompts, 1, greedy, args.seed)]
    peer_greedy = transformers_generate(model, tok, engine, prompts, 1, greedy, args.seed)
    same = ours_greedy == peer_greedy
    print(f"[check] greedy tokens identical to transformers generate ({greedy.max_new_tokens} tokens): {same}")
    if not same:
        raise SystemExit("the shared-prompt decoder and generate disagree on greedy tokens: the comparison is void")

    p_ids = [fmt.encode(tok, p) for p in prompts]
    rows = []

    def pair(r: int, peer, ours) -> tuple:
        """Both sides timed, the one that goes first alternating between repeats."""
        if r % 2:
            t_ours, b = cpu_timed(ours)
            t_peer, a = cpu_timed(peer)
        else:
            t_peer, a = cpu_timed(peer)
            t_ours, b = cpu_timed(ours)
        return t_peer, a, t_ours, b

    completions = None
    for r in range(args.repeats):
        t_peer, peer, t_ours, groups = pair(
            r,
            lambda: transformers_generate(model, tok, engine, prompts, args.group, sampled, args.seed),
            lambda: engine.generate(prompts, args.group, sampled, args.seed),
        )
        comps = [list(c.token_ids) for grp in groups for c in grp]
        completions = completions or comps
        rows.append(("rollout P x G", r, sum(map(len, peer)), sum(map(len, comps)), t_peer, t_ours))
    flat_p = [p for p in p_ids for _ in range(args.group)]
    scored = sum(map(len, completions))
    for r in range(args.repeats):
        t_plain, _, t_ours, _ = pair(
            r,
            lambda: grpo_loss_backward(model, flat_p, completions, tok.pad_token_id, False),
            lambda: grpo_loss_backward(model, flat_p, completions, tok.pad_token_id, True),
        )
        rows.append(("update fwd+bwd", r, scored, scored, t_plain, t_ours))
    if model.config._attn_implementation == "sdpa_gqa":  # engines/attention.py switched it at load
        # the same decoder and update under transformers' sdpa (which copies the grouped KV heads) as the peer
        def under_sdpa(fn):
            model.set_attn_implementation("sdpa")
            try:
                return fn()
            finally:
                model.set_attn_implementation("sdpa_gqa")

        rollout = lambda: engine.generate(prompts, args.group, sampled, args.seed)  # noqa: E731
        update = lambda: grpo_loss_backward(model, flat_p, completions, tok.pad_token_id, True)  # noqa: E731
        same = [c.token_ids for g in under_sdpa(rollout) for c in g] == [c.token_ids for g in rollout() for c in g]
        print(f"[check] sampled tokens identical under sdpa and sdpa_gqa: {same}")
        if not same:
            raise SystemExit("sdpa and sdpa_gqa sample different tokens: the attention switch is not exact")
        for r in range(args.repeats):
            t_sdpa, a, t_gqa, b = pair(r, lambda: under_sdpa(rollout), rollout)
            n = sum(len(c.token_ids) for g in b for c in g)
            rows.append(("rollout gqa", r, n, n, t_sdpa, t_gqa))
        for r in range(args.repeats):
            t_sdpa, _, t_gqa, _ = pair(r, lambda: under_sdpa(update), update)
            rows.append(("update gqa", r, scored, scored, t_sdpa, t_gqa))

    print(
        f"\nmodel {args.model} ({n_layers} layers); {args.prompts} prompts x G={args.group}; prompt "
        f"{sum(map(len, p_ids)) / len(p_ids):.0f} tokens, completion {scored / len(completions):.1f} tokens "
        f"(cap {args.max_new_tokens}); {args.threads} threads"
    )
    print(
        "tokens/s by the wall clock and by this process's CPU seconds (ratio: rlvrflow's over transformers'; "
        "the `gqa` rows: the same rlvrflow path under sdpa_gqa over transformers' sdpa)"
    )
    print(
        f"{'path':<16}{'rep':>4}{'transformers':>14}{'rlvrflow':>10}{'ratio':>8}{'CPU: tf':>11}{'rlvrflow':>10}{'ratio':>8}"
    )
    for name, r, n_peer, n_ours, (wp, cp), (wo, co) in rows:
        print(
            f"{name:<16}{r:>4}{n_peer / wp:>14.1f}{n_ours / wo:>10.1f}{n_ours / wo / (n_peer / wp):>7.2f}x"
            f"{n_peer / cp:>11.1f}{n_ours / co:>10.1f}{n_ours / co / (n_peer / cp):>7.2f}x"
        )

    arms = lora_vs_full(args, out, prompts, p_ids, completions) if args.updates else []

    if args.profile:
        print("\n[profile] one rollout call (shared-prompt decoder), top operators by self CPU time:")
        print(profile_top(lambda: engine.generate(prompts, args.group, sampled, args.seed)))
        print("[profile] one update forward+backward (shared prompts), top operators by self CPU time:")
        print(profile_top(lambda: grpo_loss_backward(model, flat_p, completions, tok.pad_token_id, True)))
        kv_len = max(map(len, p_ids)) + args.max_new_tokens
        print("[profile] the candidate fixes alone, at this run's shapes (CPU ms per call, one thread, best of 5):")
        for line in kernel_probe(model.config, width, scored, kv_len):
            print("  " + line)
    (out / "result.json").write_text(json.dumps({"args": vars(args), "rows": rows, "arms": arms}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
