"""The pretrained tiny base: the embedded model after generic arithmetic and number reading.

A team brings a pretrained model to rlvrflow: it already knows that 6*15 is 90 and that "3 boxes,
12 each" asks for a product, so it can sample right answers on rows that carry only an outcome,
which is what RL with a verifier needs. The embedded model starts from random weights and knows
none of that. This module builds the stand-in, in-project and without a download: the embedded
architecture trained on a generic corpus of
  - arithmetic in the replies' compact notation (`37+25=62`, `6*15=90`, `200*80%=160`, `2.5*1000=2500`,
    three-term sums `12+25+40=77`, chains of two and three steps `4*12-5=48-5=43`,
    `2*40+3*5+8=80+15+8=103`, `3*20*90%=60*90%=54`), behind the prompt `calc: `;
  - numbers read from random English or Chinese word salad, the operation given by a cue word
    (`plus`, `left`, `each`, `一共`, `减去`, `每个`, ...), answered as the chain and `Answer: N` /
    `答案: N`.
It never sees a domain's prompts, templates or tasks, though it writes its answers the way the retail
sample's worked replies do (the chain, then `Answer: N`). Its vocabulary is the corpus's characters;
`adapt_base` extends it with a domain's own characters (new embedding rows, which SFT trains), so any
domain can start from it (`training.model: embedded-base`).

    rlvrflow make-model --arch tiny-base --out DIR [--steps 20000]   # 40-60 min on one CPU core

The shipped base (`BASE_DIR`) was built with that command's defaults; its `rlvrflow_model.json` records
the recipe and its held-out accuracy. Left out: natural language (the word salad teaches where the
numbers are, not what the words mean) and anything a domain's SFT rows are there to teach.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from fractions import Fraction
from pathlib import Path

from rlvrflow.training.config import TINY_BASE_DIMS

BASE_DIR = Path(__file__).resolve().parent / "assets" / "tiny_base"
BASE_DIMS = TINY_BASE_DIMS
CALC_PROMPT = "calc: "
ANSWER = {"en": "Answer: ", "zh": "答案: "}
ROUND_PRICES = (5, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200)

EN_WORDS = (
    "the a an of to in for on with at by from about over under into after before we they he she it this that "
    "these those man woman child team city school book car tree house road river day week month year box bag "
    "cup table chair window door garden farm shop office friend teacher student driver worker family group "
    "red blue green small large old new good bad long short happy busy quick slow has had have got took gave "
    "made saw found kept put brought bought sold paid carried moved counted packed sent needed wanted used"
).split()
ZH_WORDS = (
    "我们 他们 她 他 这个 那个 今天 昨天 明天 学校 老师 学生 朋友 家里 城市 公司 工厂 农场 花园 司机 工人 "
    "孩子 小明 小红 书本 汽车 房子 树木 河边 桌子 椅子 窗户 盒子 袋子 杯子 篮子 一些 很多 已经 还有 然后 所以 "
    "因为 但是 如果 拿了 买了 卖了 送了 放了 带了 看到 找到 需要 想要 用了 搬了 数了"
).split()
# operator -> (English cue words, Chinese cue words): words any pretrained model ties to the operation
CUES = {
    "+": (
        ("plus", "and then", "more", "added", "in total", "together", "sum"),
        ("加", "一共", "合计", "总共", "再加", "共"),
    ),
    "-": (("minus", "less", "left", "fewer", "take away", "remove"), ("减", "剩下", "少了", "扣除", "还剩", "减去")),
    "*": (("times", "each", "per", "every"), ("乘", "每个", "每", "各", "每份")),
}


def fmt(x) -> str:
    """12 -> '12', 2.5 -> '2.5', 1/8 -> '0.125' (exact, no float noise)."""
    v = Fraction(x).limit_denominator(1000)
    return str(v.numerator) if v.denominator == 1 else f"{float(v):.4f}".rstrip("0").rstrip(".")


def arithmetic_line(rng: random.Random) -> str:
    """One line of arithmetic in the compact notation, random operands."""
    k = rng.random()
    if k < 0.3:  # chains of two and three steps
        kind = rng.random()
        q1, p1 = rng.randint(1, 9), rng.choice(ROUND_PRICES[:10])
        a = q1 * p1
        if kind < 0.3:
            b = rng.choice([2, 3, 5, 6, 8, 10, rng.randint(1, 30)])
            op = "-" if b < a and rng.random() < 0.5 else "+"
            return f"{q1}*{p1}{op}{b}={a}{op}{b}={a + b if op == '+' else a - b}"
        if kind < 0.55:
            q2, p2 = rng.randint(1, 9), rng.choice(ROUND_PRICES[:10])
            if rng.random() < 0.5:
                return f"{q1}*{p1}+{q2}*{p2}={a}+{q2 * p2}={a + q2 * p2}"
            c = rng.choice([5, 6, 8, 10, 12, 15, rng.randint(1, 30)])
            return f"{q1}*{p1}+{q2}*{p2}+{c}={a}+{q2 * p2}+{c}={a + q2 * p2 + c}"
        if kind < 0.8:  # three-term sums
            terms = [rng.choice(ROUND_PRICES[:12] + (rng.randint(1, 99),)) for _ in range(3)]
            return "+".join(map(str, terms)) + f"={sum(terms)}"
        d = rng.choice([10, 20, 25, 50, 75, 80, 90])  # a percentage of a product
        return f"{q1}*{p1}*{d}%={a}*{d}%={fmt(Fraction(a * d, 100))}"
    if k < 0.6:
        a, b = rng.randint(1, 499), rng.randint(1, 199)
        return f"{a}+{b}={a + b}"
    if k < 0.72:
        a = rng.randint(10, 500)
        b = rng.randint(1, a)
        return f"{a}-{b}={a - b}"
    if k < 0.88:
        q, p = rng.randint(1, 24), rng.choice(ROUND_PRICES + (rng.randint(1, 99),))
        return f"{q}*{p}={q * p}"
    if k < 0.95:
        p, d = rng.choice(ROUND_PRICES + (rng.randint(1, 20) * 10,)), rng.choice([10, 20, 25, 50, 75, 80, 90])
        return f"{p}*{d}%={fmt(Fraction(p * d, 100))}"
    if rng.random() < 0.5:
        q, f = rng.choice([0.25, 0.5, 0.75, 1.5, 2.5, *range(1, 10)]), rng.choice([100, 1000])
        return f"{fmt(q)}*{f}={fmt(Fraction(q).limit_denominator(100) * f)}"
    v, f = rng.choice([25, 50, 75, 120, 150, 250, 300, 500, 750, 1200, 1500, 2500]), rng.choice([100, 1000])
    return f"{v}/{f}={fmt(Fraction(v, f))}"


def _filler(rng: random.Random, lang: str, n: int) -> str:
    words = EN_WORDS if lang == "en" else ZH_WORDS
    return (" " if lang == "en" else "").join(rng.choice(words) for _ in range(n))


def _operand(rng: random.Random, op: str, first: bool) -> int:
    if op != "*":
        return rng.randint(1, 300)
    return rng.randint(1, 12) if first else rng.choice(ROUND_PRICES + (rng.randint(2, 99),))


def reading_example(rng: random.Random) -> tuple[str, str]:
    """(text, reply): 2-3 numbers in word salad with a cue word per operation; the reply is the chain
    in reading order and the answer line."""
    lang = "en" if rng.random() < 0.5 else "zh"
    ops = [rng.choice("+-*")] + ([rng.choice("+-")] if rng.random() < 0.35 else [])
    a, b = _operand(rng, ops[0], True), _operand(rng, ops[0], False)
    if ops[0] == "-" and b > a:
        a, b = b, a
    nums = [a, b]
    value = a + b if ops[0] == "+" else a - b if ops[0] == "-" else a * b
    left, steps = f"{a}{ops[0]}{b}", [str(value)]
    if len(ops) > 1:
        c = rng.randint(1, 30)
        if ops[1] == "-" and c > value:
            ops[1] = "+"
        nums.append(c)
        after = value + c if ops[1] == "+" else value - c
        left, steps, value = left + f"{ops[1]}{c}", [f"{value}{ops[1]}{c}", str(after)], after
    parts = [_filler(rng, lang, rng.randint(0, 3)), str(nums[0])]
    for op, n in zip(ops, nums[1:]):
        cue = rng.choice(CUES[op][0 if lang == "en" else 1])
        if rng.random() < 0.4:  # "3 boxes 12 each" as well as "3 boxes each 12"; a word keeps the numbers apart
            parts += [_filler(rng, lang, rng.randint(1, 3)), str(n), cue]
        else:
            parts += [_filler(rng, lang, rng.randint(0, 2)), cue, _filler(rng, lang, rng.randint(0, 1)), str(n)]
    parts.append(_filler(rng, lang, rng.randint(0, 2)))
    text = (" " if lang == "en" else "").join(p for p in parts if p) + ("?" if lang == "en" else "？")
    return text, "=".join([left, *steps]) + f"\n{ANSWER[lang]}{value}"


def base_corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """n (prompt, reply) pairs, half arithmetic lines behind `calc: `, half reading examples."""
    rng = random.Random(f"rlvrflow-tiny-base:{seed}")
    return [(CALC_PROMPT, arithmetic_line(rng)) if i % 2 else reading_example(rng) for i in range(n)]


def held_out(n: int, seed: int, corpus: list[tuple[str, str]] | None = None) -> list[dict]:
    """Rows (id, category, prompt, reference) for the base's own check, from a random stream of their
    own: `calc` gives the left side of a line with one `=` (a one-step line or a three-term sum),
    `reading` a reading example. With `corpus`, a line or text that occurs in it is skipped (many
    short sums do: the operand space is small)."""
    rng = random.Random(f"rlvrflow-tiny-base-held-out:{seed}")
    seen = {p + r for p, r in corpus} if corpus else set()
    rows: list[dict] = []
    while len(rows) < n:
        if len(rows) % 2:
            line = arithmetic_line(rng)
            if line.count("=") != 1 or CALC_PROMPT + line in seen:
                continue
            left, right = line.split("=")
            rows.append(
                {"id": f"calc{len(rows)}", "category": "calc", "prompt": f"{CALC_PROMPT}{left}=", "reference": right}
            )
        else:
            text, reply = reading_example(rng)
            if text + reply in seen:
                continue
            rows.append(
                {"id": f"read{len(rows)}", "category": "reading", "prompt": text, "reference": reply.rsplit(" ", 1)[-1]}
            )
    return rows


def build_base_model(
    out_dir: str | Path,
    steps: int = 20000,
    seed: int = 0,
    corpus_size: int = 300000,
    batch_size: int = 64,
    check_rows: int = 300,
) -> Path:
    """Build the embedded architecture on the generic corpus's characters, train it `steps` steps on
    the corpus, check it on `check_rows` held-out rows, and save it to `out_dir` with its card."""
    import polars as pl

    from rlvrflow.training.config import SFTConfig, TrainingConfig
    from rlvrflow.training.sft import run_sft
    from rlvrflow.training.tiny_model import build_tiny_model

    started = time.perf_counter()
    out = Path(out_dir).resolve()
    pairs = base_corpus(corpus_size, seed)
    check = held_out(check_rows, seed, pairs)
    texts = [p + r for p, r in pairs] + [r["prompt"] + r["reference"] for r in check]
    init_dir = out.with_name(out.name + ".init")
    try:
        init = build_tiny_model(texts, init_dir, seed, BASE_DIMS)
        cfg = TrainingConfig(
            tiny=BASE_DIMS,
            seed=seed,
            report_to=[],
            sft=SFTConfig(
                max_steps=steps,
                learning_rate=1e-3,
                batch_size=batch_size,
                max_length=160,
                warmup_steps=min(200, steps // 10),
            ),
        )
        train = pl.DataFrame({"prompt": [p for p, _ in pairs], "solution": [r for _, r in pairs]})
        model = run_sft(init, train, cfg, out, seed)
        card = json.loads((Path(init) / "rlvrflow_model.json").read_text())
    finally:
        shutil.rmtree(init_dir, ignore_errors=True)
    card.update(
        kind="embedded-tiny-base",
        recipe={"steps": steps, "seed": seed, "corpus_size": corpus_size, "batch_size": batch_size, "lr": 1e-3},
        held_out_greedy=check_base(model, check, seed),
        build_seconds=round(time.perf_counter() - started),
    )
    (out / "rlvrflow_model.json").write_text(json.dumps(card, indent=1) + "\n")
    return out


def check_base(model_dir: str | Path, rows: list[dict], seed: int = 0) -> dict[str, float]:
    """Greedy accuracy per category (`calc`, `reading`) of a model on `held_out` rows."""
    import polars as pl

    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.eval import evaluate

    check = pl.DataFrame(
        [{**r, "solution": None, "verifier": "math", "verifier_params": "{}", "split": "eval"} for r in rows]
    )
    m = evaluate(
        model_dir, check, EvalConfig(k=1, n_samples=1, max_new_tokens=40, max_prompts=len(rows)), seed, device="cpu"
    )
    return {k: round(v["pass_at_1_greedy"], 4) for k, v in m["per_category"].items()}


BASE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "rlvrflow_model.json")


def require_base(base_dir: str | Path) -> Path:
    """`base_dir` if it holds a whole base; else FileNotFoundError naming what is missing and the fix."""
    base = Path(base_dir)
    missing = [name for name in BASE_FILES if not (base / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"training.model: embedded-base needs the pretrained tiny base in {base}, which lacks "
            f"{', '.join(missing)}. It ships with rlvrflow as package data: reinstall rlvrflow (pip install -e . in a checkout), "
            f"restore {base.name}/ from the repository, or rebuild it (rlvrflow make-model --arch tiny-base "
            f"--out {base}, 40-60 minutes on one core); or set training.model to embedded or a model folder"
        )
    return base


def base_digest(base_dir: str | Path) -> str:
    """sha256 of a base's weights and tokenizer: what tells one build of it from another."""
    require_base(base_dir)
    h = hashlib.sha256()
    for name in ("model.safetensors", "tokenizer.json"):
        h.update(name.encode() + b"\0" + (Path(base_dir) / name).read_bytes())
    return h.hexdigest()


def adapt_base(base_dir: str | Path, texts, out_dir: str | Path, seed: int = 0) -> Path:
    """The base with its vocabulary extended by the characters of `texts` it lacks, saved to `out_dir`.

    New characters get new embedding rows (tied with the output layer) at the mean of the trained ones
    (transformers' mean resizing; its noise is negligible, so they start alike, as an average character,
    and SFT tells them apart). Reused when `out_dir` already holds the same base (by `base_digest`)
    adapted to the same texts.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.training.checkpoint import save_pretrained_atomic
    from rlvrflow.training.tiny_model import SPECIAL_TOKENS, tokenizer_from_vocab

    base, out = require_base(base_dir), Path(out_dir)
    base_card = json.loads((base / "rlvrflow_model.json").read_text())
    texts = list(texts)
    h = hashlib.sha256(json.dumps([base_digest(base), seed]).encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    key = h.hexdigest()[:16]
    card_path = out / "rlvrflow_model.json"
    if card_path.exists() and json.loads(card_path.read_text()).get("build_key") == key:
        return out
    vocab = dict(AutoTokenizer.from_pretrained(base).get_vocab())
    new = sorted({ch for t in texts for ch in t} - set(vocab) - set(SPECIAL_TOKENS))
    for ch in new:
        vocab[ch] = len(vocab)
    model = AutoModelForCausalLM.from_pretrained(base)
    if new:
        torch.manual_seed(seed)  # the new rows are a random draw
        model.resize_token_embeddings(len(vocab), mean_resizing=True)
    card = {
        **base_card,
        "kind": "embedded-tiny-base-adapted",
        "build_key": key,
        "base_build_key": base_card.get("build_key"),
        "characters_added": len(new),
        "params": sum(p.numel() for p in model.parameters()),
    }
    save_pretrained_atomic(model, tokenizer_from_vocab(vocab), out, extra={"rlvrflow_model.json": json.dumps(card)})
    return out
