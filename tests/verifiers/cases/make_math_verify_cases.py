"""Writes math_verify_cases.jsonl: the (gold, pred, expected) cases of math-verify's own test suite.

An outside table: cases the math-verify authors collected from real model outputs (MATH, NuminaMath,
OpenThoughts, ...), not written here. Source: the math-verify 0.9.0 sdist (Apache-2.0,
huggingface/Math-Verify), files tests/test_*.py, every `parametrize("gold,pred,expected", ...)`
whose values are plain literals. Regenerate with

    pip download --no-deps --no-binary :all: math-verify==0.9.0 && tar xzf math_verify-0.9.0.tar.gz
    python tests/verifiers/cases/make_math_verify_cases.py math_verify-0.9.0/tests

Where our verdict differs from math-verify's expectation on purpose, tests/verifiers/test_math_public.py
lists the case with the reason.
"""

import ast
import json
import sys
from pathlib import Path


def cases_in(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize"):
            continue
        names = node.args[0].value if isinstance(node.args[0], ast.Constant) else ""
        fields = [n.strip() for n in names.split(",")]
        if fields[:3] != ["gold", "pred", "expected"]:
            continue
        test = next(
            (f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and node in f.decorator_list), "?"
        )
        for i, elt in enumerate(node.args[1].elts):
            try:
                values = ast.literal_eval(elt)
            except ValueError:
                continue
            gold, pred, expected = values[:3]
            if isinstance(gold, str) and isinstance(pred, str) and expected in (0, 1, True, False):
                yield {"gold": gold, "pred": pred, "expected": int(expected), "source": f"{path.name}::{test}[{i}]"}


def main(folder: str) -> None:
    out = [c for p in sorted(Path(folder).glob("test_*.py")) for c in cases_in(p)]
    dest = Path(__file__).with_name("math_verify_cases.jsonl")
    dest.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out), encoding="utf-8")
    print(f"wrote {len(out)} cases to {dest.name}")


if __name__ == "__main__":
    main(sys.argv[1])
