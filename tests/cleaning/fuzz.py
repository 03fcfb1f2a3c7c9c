"""Seeded generator of messy text values for the cleaner's equivalence and idempotence tests."""
from __future__ import annotations

import random

FRAGMENTS = [
    "What is 12 + 7?", "计算３＋４等于多少？", "请回答，谢谢。", "cafÃ© costs â‚¬5", "â€œquotedâ€\x9d",
    "<|im_start|>user\n", "<|im_end|>", "<s>", "</s>", "[CLS]", "[SEP]", "<pad>", "<unk>", "<|endoftext|>",
    "### Human:", "\\dfrac{1}{2}", "\\tfrac34", "\\left(", "\\right)", "\\left.", "\\right|", "1\\,000",
    "90^\\circ", "^{\\circ}", "5\\text{ cm}", "\\mbox{kg}", "$42$", "$$x$$", "\\(x\\)", "42$", "\\!", "\\;",
    "\\quad", "\\%", "\u200b", "\ufeff", "\u00ad", "\x00", "\x07", "\x1b[31m", "\r\n", "\n\n\n\n", "\t",
    "\u3000", "\u00a0", "\u2009", "  ", "ＳＥＬＥＣＴ ＊", "１２．５％", "`ｘ＝１`", "```\nｙ＝２\n```",
    "$ａ＋ｂ$", "naïve", "é", "ﬁne", "×", "Ω", "—", "“", "”", "e\u0301", "Ｈｅｌｌｏ", "  indented",
    "x  = 1", "SELECT name FROM t WHERE a = '，'", '{"input": "a  b", "output": 3}', "&amp;", "\u2028",
    "\\leftarrow", "\\rightarrow", "￥５", "（１）", "ＡＢＣ", "abc", "123", " ", ".", "?", "？", "。",
    "ｘ＋１＝３", "求ｘ", "ｆ（ｘ）", "×", "ａ－ｂ", "Ｘ型号", "-", "=",
    # shapes that once made the width regexes backtrack: number chains, unclosed openers
    "１．１．１．", "ｖ１．５－ａ", "\\(", "\\[", "\\(ｘ＋１\\)", "\\\\[2pt]", "（１＋",
]
CATEGORIES = ["arithmetic", "sql", "policy", "code", "unit"]


def messy_value(rng: random.Random, max_parts: int = 6) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, max_parts)))


def messy_rows(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [{"question": messy_value(rng), "reference": messy_value(rng, 3), "solution": messy_value(rng, 4),
             "category": rng.choice(CATEGORIES)} for _ in range(n)]
