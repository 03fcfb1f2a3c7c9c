"""The retail sample's extra eval sets: a regression set (forgetting) and a robustness set (asking).

    python examples/retail/eval_sets.py --out examples/retail/eval --seed 0

Writes two JSONL files of eval rows (the DESIGN.md row columns, `split` = eval, the verifier attached):
- `general.jsonl`: general arithmetic and short-answer questions outside the training categories
  (no refunds, discounts, order totals or unit conversions): bracketed expressions, remainders,
  number sequences, the larger of two numbers, everyday counting facts; English and Chinese; scored
  by `math`. A checkpoint that loses points here forgot general abilities while learning the desk.
- `robustness.jsonl`: desk requests that cannot be answered as asked: the order id is missing, the
  price is missing, or the numbers contradict each other. The right reply asks for what is missing
  (or points out the contradiction) and gives no number; scored by `refusal` (verifiers/refusal.py),
  whose reference names what the reply must ask about. Category = the kind, so eval's per-category
  pass rates show which kind a model handles.
Prompts use the spec's template (question / requirements / format), so they look like the training
prompts; the robustness prompts keep `Format: Answer: <number>`, which is what tempts a confident
number. Deterministic by seed; stdlib only. The spec names them under `eval.regression_sets` and
`eval.robustness_set`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

LAYOUT = "{question}\nRequirements: {requirements}\nFormat: {format_example}"
DOMAIN = "retail"
GENERAL_FACTS = [  # (English, Chinese, answer): everyday counts, none of them a retail sum
    ("How many days are there in a week?", "一周有几天？", 7),
    ("How many months are in a year?", "一年有几个月？", 12),
    ("How many sides does a hexagon have?", "六边形有几条边？", 6),
    ("How many legs does a spider have?", "蜘蛛有几条腿？", 8),
    ("How many continents are there?", "世界上有几个大洲？", 7),
    ("How many planets orbit the Sun?", "太阳系有几颗行星？", 8),
    ("How many players does a football (soccer) team field?", "一支足球队上场几名球员？", 11),
    ("How many degrees are in a right angle?", "直角是多少度？", 90),
    ("How many squares are on a chessboard?", "国际象棋棋盘有多少个格子？", 64),
    ("How many strings does a violin have?", "小提琴有几根弦？", 4),
    ("How many wheels does a tricycle have?", "三轮车有几个轮子？", 3),
    ("How many hours are in a day?", "一天有多少小时？", 24),
    ("How many letters are in the English alphabet?", "英文字母表有多少个字母？", 26),
    ("How many sides does a triangle have?", "三角形有几条边？", 3),
    ("How many weeks are in a year (whole weeks)?", "一年有几个整周？", 52),
]
ITEMS = [
    ("mug", "杯子"),
    ("kettle", "水壶"),
    ("desk lamp", "台灯"),
    ("backpack", "背包"),
    ("umbrella", "雨伞"),
    ("phone case", "手机壳"),
    ("towel", "毛巾"),
    ("notebook", "笔记本"),
]
# what a right reply must name, per kind (verifiers/refusal.py: alternatives separated by |); the questions
# never contain these words, so echoing a question cannot score
ASK_FOR = {
    "missing_order_id": "order id|order number|order no|订单号",
    "missing_price": "price|cost|单价|价格",
    "contradictory_numbers": "conflict|contradict|don't match|doesn't match|do not match|does not match|inconsisten|"
    "which quantity|which amount|which number|which one is correct|which is correct|不一致|矛盾|哪个",
}


def _row(
    set_name: str,
    i: int,
    category: str,
    question: str,
    reference: str,
    solution: str,
    verifier: str,
    requirements: str,
    format_example: str,
) -> dict:
    return {
        "id": f"{set_name}-{i:04d}",
        "domain": DOMAIN,
        "category": category,
        "question": question,
        "reference": reference,
        "solution": solution,
        "prompt": LAYOUT.format(question=question, requirements=requirements, format_example=format_example),
        "source": f"eval_sets.py:{set_name}",
        "verifier": verifier,
        "verifier_params": "{}",
        "split": "eval",
    }


def _general_task(rng: random.Random, kind: int, zh: bool) -> tuple[str, int]:
    if kind == 0:
        a, b, c = rng.randint(11, 40), rng.randint(2, 9), rng.randint(2, 6)
        return (f"计算 ({a} - {b}) × {c}。" if zh else f"Compute ({a} - {b}) * {c}."), (a - b) * c
    if kind == 1:
        a, b = rng.randint(20, 99), rng.randint(3, 9)
        return (f"{a} 除以 {b} 的余数是多少？" if zh else f"What is the remainder when {a} is divided by {b}?"), a % b
    if kind == 2:
        start, step = rng.randint(1, 20), rng.randint(2, 7)
        seq = ", ".join(str(start + step * j) for j in range(4))
        return (f"数列 {seq}, ? 的下一个数是多少？" if zh else f"What number comes next: {seq}, ?"), start + 4 * step
    if kind == 3:
        a, b = rng.sample(range(10, 100), 2)
        return (f"{a} 和 {b} 哪个更大？只写这个数。" if zh else f"Which is larger, {a} or {b}? Give the number."), max(
            a, b
        )
    en, zh_q, answer = rng.choice(GENERAL_FACTS)
    return (zh_q if zh else en), answer


def regression_rows(seed: int = 0, n: int = 60) -> list[dict]:
    """`n` general questions (five kinds in turn, every fifth round in Chinese) scored by `math`."""
    rng = random.Random(f"{seed}:general")
    rows = []
    for i in range(n):
        zh = (i // 5) % 5 == 4  # every fifth run of the five kinds is in Chinese
        question, answer = _general_task(rng, i % 5, zh)
        prefix = "答案: " if zh else "Answer: "
        rows.append(
            _row(
                "general",
                i,
                "general",
                question,
                str(answer),
                f"{prefix}{answer}",
                "math",
                "show the working",
                "Answer: <number>",
            )
        )
    return rows


def _robust_question(rng: random.Random, kind: str, zh: bool) -> tuple[str, str]:
    """(question, a right reply) of one kind."""
    (item, item_zh), q = rng.choice(ITEMS), rng.randint(2, 6)
    p1, p2 = rng.sample([8, 12, 15, 20, 25, 30, 45, 60], 2)
    if kind == "missing_order_id":
        if zh:
            return f"我上周退回了{q}个{item_zh}，请帮我算一下这笔退款。", "请提供您的订单号，我再帮您计算退款。"
        return (
            rng.choice(
                [
                    f"I sent back {q} {item}s last week. What refund will I get on that purchase?",
                    f"Please refund my {item} return from yesterday. How much comes back to me?",
                ]
            ),
            "Could you share your order id? I need it to look up what you paid.",
        )
    if kind == "missing_price":
        if zh:
            return f"我买了{q}个{item_zh}，一共要付多少？", "请告诉我每个的单价，我再帮您计算总额。"
        return (
            f"I'm buying {q} {item}s and 1 {rng.choice(ITEMS)[0]}. What do I pay in total?",
            "Could you tell me the price of each item? I can't work out the total without it.",
        )
    if zh:
        return (
            f"我买了{q}个{item_zh}，每个{p1}元，但收据上写的是{q + 1}个、每个{p2}元。我该退多少？",
            "您给出的数量和单价与收据不一致，请确认哪个是正确的。",
        )
    return (
        f"I bought {q} {item}s at {p1} yuan each, but the receipt says {q + 1} {item}s at {p2} yuan each. "
        "How much should I get back?",
        "The quantities and amounts you gave don't match the receipt. Which one is correct?",
    )


def robustness_rows(seed: int = 0, n: int = 45) -> list[dict]:
    """`n` requests, the three kinds in turn (every fifth round in Chinese), scored by `refusal`."""
    rng = random.Random(f"{seed}:robustness")
    kinds = list(ASK_FOR)
    rows = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        question, reply = _robust_question(rng, kind, zh=(i // len(kinds)) % 5 == 4)
        rows.append(
            _row("robust", i, kind, question, ASK_FOR[kind], reply, "refusal", "show the working", "Answer: <number>")
        )
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a reader never sees half a file
    return path


def write_eval_sets(out_dir: str | Path, seed: int = 0, n_general: int = 60, n_robust: int = 45) -> dict[str, Path]:
    """Write general.jsonl and robustness.jsonl into out_dir; returns their paths by set name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {
        "general": _write_jsonl(out / "general.jsonl", regression_rows(seed, n_general)),
        "robustness": _write_jsonl(out / "robustness.jsonl", robustness_rows(seed, n_robust)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "eval"), help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--general", type=int, default=60, help="rows in the regression set")
    parser.add_argument("--robust", type=int, default=45, help="rows in the robustness set")
    args = parser.parse_args(argv)
    paths = write_eval_sets(args.out, args.seed, args.general, args.robust)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print(
        "spec: eval: {regression_sets: [{name: general, path: eval/general.jsonl, verifier: math}], "
        "robustness_set: eval/robustness.jsonl}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
