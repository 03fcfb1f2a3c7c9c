"""Does vLLM's prefix caching pay off when episodes are played? The same episodes with it off and on.

    .venv-vllm/bin/python bench/episode_prefix_cache.py [--model DIR] [--rows 12] [--group 8] [--repeats 3]
    .venv-vllm/bin/python bench/episode_prefix_cache.py --smoke

An episode turn hands the engine the whole conversation so far: the system message with the tools'
schemas, the ticket, and every earlier message and tool result. A GRPO group plays G episodes of one
ticket, so its G conversations open with the same tokens, and each later turn repeats the turn before
it. With prefix caching, vLLM keeps the KV blocks of those shared prefixes and prefills only what is
new; without it, every turn prefills the whole conversation again.

The environment is the retail sample's `multi_step` one (examples/retail/spec.yaml, its shop.db: four
tools), the tickets the sample logs' English multi-step cases (examples/retail/raw/agent_console.jsonl).
Each ticket is played G times, sampled at temperature 1 as GRPO samples (`training.episodes.play_episodes`
through the token ids GRPO feeds its vLLM engine: `FormattedEngine` with a raw `PromptFormat`), with the
chat template's episode format. The model: `--model DIR`, an HF folder with a chat template (e.g. the
real-model bench's SmolLM2-135M-Instruct import, bench/out/real_model/smollm2); by default the
in-project Qwen2 test model, trained for `--sft-steps` on the sample's worked transcripts so that its
episodes call the tools and run to several turns.

Each repeat builds one engine per setting, off and on in turn (the order flipped every repeat; loading
the engine takes seconds), plays once to warm it up, resets the prefix cache (only sharing inside one
play counts), and times one play: wall seconds and this process's CPU seconds (vLLM runs in-process;
on a shared machine the CPU seconds are the steadier figure). Printed per repeat: both timings and
their ratios off/on, prompt tokens handed to the engine, tokens generated, turns, and whether both
settings played the same episodes (seeded sampling: prefix caching must not change what is drawn);
then the median ratios. Writes OUT/episode_prefix_cache.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def retail_environment():
    """The retail sample's multi_step environment, read from its spec file (no flow imports needed)."""
    import yaml

    from rlvrflow.verifiers.environment import Environment

    spec = yaml.safe_load((ROOT / "examples/retail/spec.yaml").read_text(encoding="utf-8"))
    rule = next(r for r in spec["verifiers"]["rules"] if r.get("environment"))
    return Environment.load(rule["environment"], ROOT / "examples/retail")


def retail_rows(env, limit: int) -> tuple[list[dict], list[dict]]:
    """(tickets to play, rows with a worked transcript): English multi-step cases of the sample logs."""
    rows = []
    path = ROOT / "examples/retail/raw/agent_console.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case.get("lang") != "en" or not case.get("outcome"):
            continue
        rows.append(
            {
                "id": case["case_id"],
                "prompt": case["message"],
                "reference": case["outcome"],
                "solution": case.get("transcript") or "",
                "verifier_params": env.model_dump_json(),
            }
        )
    return rows[:limit], [r for r in rows if r["solution"]]


def test_model(env, worked: list[dict], out: Path, sft_steps: int) -> Path:
    """The in-project Qwen2 test model, trained on the worked transcripts so that it calls tools."""
    from rlvrflow.training.config import SFTConfig
    from rlvrflow.training.episode_format import chat_format
    from rlvrflow.training.episode_sft import sft_on_transcripts, worked_transcripts
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.qwen_model import Qwen2Dims, build_qwen2_model

    transcripts, dropped = worked_transcripts(worked)
    if not transcripts:
        raise SystemExit(f"no worked transcript replays on the environment ({dropped}); regenerate the sample")
    corpus = [json.dumps(e.messages, ensure_ascii=False) for e, _ in transcripts]
    start = build_qwen2_model(corpus * 4, out / "start", seed=0, dims=Qwen2Dims(max_positions=2048))
    model, tok = load_model_and_tokenizer(start, "cpu", trainable=True)
    sc = SFTConfig(max_steps=sft_steps, learning_rate=3e-3, batch_size=4, max_length=2048, warmup_steps=5)
    sft_on_transcripts(model, tok, [e for e, _ in transcripts], env.schemas(), sc, seed=0, fmt=chat_format(tok))
    model.save_pretrained(out / "sft")
    tok.save_pretrained(out / "sft")
    return out / "sft"


def play_once(model: Path, env, rows: list[dict], group: int, new_tokens: int, caching: bool) -> dict:
    """One engine with prefix caching `caching`: a warm-up play, then one timed play (wall and this
    process's CPU seconds: vLLM runs in-process here), its tokens, turns and transcripts."""
    from transformers import AutoTokenizer

    from rlvrflow.engines.factory import default_max_model_len, release, vllm_prompting
    from rlvrflow.engines.hf_engine import FormattedEngine, PromptFormat, SamplingParams
    from rlvrflow.engines.vllm_engine import VLLMEngine
    from rlvrflow.training.episode_format import chat_format
    from rlvrflow.training.episodes import play_episodes

    tok = AutoTokenizer.from_pretrained(model)
    fmt = chat_format(tok)
    vllm = VLLMEngine(
        str(model),
        dtype="float32",
        max_model_len=default_max_model_len(model),
        enforce_eager=True,
        stop_token_ids=vllm_prompting(model)[2],
        enable_prefix_caching=caching,
        gpu_memory_utilization=0.1,
    )
    fed = {"prompt_tokens": 0, "calls": 0}
    engine = FormattedEngine(vllm, tok, PromptFormat())
    generate = engine.generate

    def counting(prompts, n, sampling, seed):
        fed["prompt_tokens"] += sum(len(tok(p, add_special_tokens=False).input_ids) for p in prompts)
        fed["calls"] += 1
        return generate(prompts, n, sampling, seed)

    engine.generate = counting
    sampling = SamplingParams(temperature=1.0, max_new_tokens=new_tokens)
    batch = [r for r in rows for _ in range(group)]
    try:
        play_episodes(engine, env, batch, fmt, sampling, seed=1)  # warm-up, untimed
        vllm.llm.reset_prefix_cache()  # only the sharing inside the timed play counts
        fed.update(prompt_tokens=0, calls=0)
        t, c = time.perf_counter(), cpu_seconds()
        episodes = play_episodes(engine, env, batch, fmt, sampling, seed=0)
        wall, cpu = time.perf_counter() - t, cpu_seconds() - c
    finally:
        release(vllm)
    policy = [m["content"] for e in episodes for m, s in zip(e.messages, e.sources) if s == "policy"]
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "episodes": len(episodes),
        "turns_mean": sum(e.assistant_turns for e in episodes) / len(episodes),
        "prompt_tokens": fed["prompt_tokens"],
        "engine_calls": fed["calls"],
        "generated_tokens": sum(len(tok(t, add_special_tokens=False).input_ids) for t in policy),
        "success": sum(e.verdict.correct for e in episodes) / len(episodes),
        "transcripts": [json.dumps(e.messages, ensure_ascii=False) for e in episodes],
    }


def cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="an HF folder with a chat template (default: the test model)")
    ap.add_argument("--out", default="bench/out/episode_prefix_cache")
    ap.add_argument("--rows", type=int, default=12, help="tickets played per play")
    ap.add_argument("--group", type=int, default=8, help="episodes per ticket (GRPO's num_generations)")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=96, help="per assistant message")
    ap.add_argument("--sft-steps", type=int, default=150, help="the test model's SFT on worked transcripts")
    ap.add_argument("--smoke", action="store_true", help="2 tickets x 2, 1 repeat, 20 SFT steps")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.group, args.repeats, args.sft_steps = 2, 2, 1, 20
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = retail_environment()
    rows, worked = retail_rows(env, args.rows)
    model = Path(args.model) if args.model else test_model(env, worked, out / "model", args.sft_steps)
    pairs = []
    for r in range(args.repeats):  # off and on in turn, the order flipped every repeat
        order = (False, True) if r % 2 == 0 else (True, False)
        play = {c: play_once(model, env, rows, args.group, args.max_new_tokens, c) for c in order}
        pairs.append((play[False], play[True]))
        off, on = pairs[-1]
        same = sum(a == b for a, b in zip(off["transcripts"], on["transcripts"])) / len(off["transcripts"])
        print(
            f"repeat {r}: off {off['wall_s']:.2f} s ({off['cpu_s']:.2f} CPU s), on {on['wall_s']:.2f} s "
            f"({on['cpu_s']:.2f} CPU s): wall x{off['wall_s'] / on['wall_s']:.2f}, CPU x{off['cpu_s'] / on['cpu_s']:.2f}; "
            f"{off['episodes']} episodes, {off['turns_mean']:.2f} turns each, {off['prompt_tokens']} prompt tokens in "
            f"{off['engine_calls']} engine calls, {off['generated_tokens']} generated; the same episodes: {same:.0%}",
            flush=True,
        )
    wall = statistics.median(off["wall_s"] / on["wall_s"] for off, on in pairs)
    cpu = statistics.median(off["cpu_s"] / on["cpu_s"] for off, on in pairs)
    same = min(
        sum(a == b for a, b in zip(off["transcripts"], on["transcripts"])) / len(off["transcripts"])
        for off, on in pairs
    )
    print(
        f"prefix caching, off/on (median of {len(pairs)}): wall x{wall:.2f}, CPU x{cpu:.2f}; the same episodes: {same:.0%}"
    )
    result = {
        "model": str(args.model or "the in-project Qwen2 test model after SFT on the worked transcripts"),
        "rows": args.rows,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "ratio_wall": round(wall, 3),
        "ratio_cpu": round(cpu, 3),
        "same_episodes": same,
        "repeats": [
            {side: {k: v for k, v in arm.items() if k != "transcripts"} for side, arm in zip(("off", "on"), pair)}
            for pair in pairs
        ],
    }
    (out / "episode_prefix_cache.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
