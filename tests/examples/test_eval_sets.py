"""The retail sample's regression and robustness sets: seeded, in the row format, outside the training
categories, and scored the right way round by their verifiers (the right reply scores, a confident
number or the echoed prompt does not)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rlvrflow.training.config import EvalConfig
from rlvrflow.training.scoring import Task
from rlvrflow.verifiers import verify

PATH = Path(__file__).resolve().parents[2] / "examples" / "retail" / "eval_sets.py"
TRAINING_CATEGORIES = {
    "arithmetic",
    "discount",
    "order_total",
    "unit_conversion",
    "policy_choice",
    "sql",
    "code",
    "reply_format",
    "tool_call",
}
ROW_COLUMNS = {
    "id",
    "domain",
    "category",
    "question",
    "reference",
    "solution",
    "prompt",
    "source",
    "verifier",
    "verifier_params",
    "split",
}


@pytest.fixture(scope="module")
def eval_sets():
    spec = importlib.util.spec_from_file_location("retail_eval_sets", PATH)  # stdlib only: no sys.path change
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_files_are_seeded_rows_in_the_row_format(eval_sets, tmp_path):
    paths = eval_sets.write_eval_sets(tmp_path / "a", seed=3)
    again = eval_sets.write_eval_sets(tmp_path / "b", seed=3)
    other = eval_sets.write_eval_sets(tmp_path / "c", seed=4)
    for name in ("general", "robustness"):
        assert paths[name].read_bytes() == again[name].read_bytes()
        assert paths[name].read_bytes() != other[name].read_bytes()
        rows = [json.loads(line) for line in paths[name].read_text(encoding="utf-8").splitlines()]
        assert rows and all(set(r) == ROW_COLUMNS for r in rows)
        assert len({r["id"] for r in rows}) == len(rows)
        assert all(Task.from_row(r).prompt.startswith(r["question"]) for r in rows)  # what eval reads
    assert not list(tmp_path.glob("*/*.tmp"))
    # the spec fields accept the files
    cfg = EvalConfig(
        regression_sets=[{"name": "general", "path": "eval/general.jsonl", "verifier": "math"}],
        robustness_set="eval/robustness.jsonl",
    )
    assert cfg.regression_sets[0].verifier == "math"


def test_regression_set_is_general_and_its_solutions_score(eval_sets):
    rows = eval_sets.regression_rows(seed=0, n=60)
    assert len(rows) == 60 and {r["category"] for r in rows} == {"general"}
    assert not {r["category"] for r in rows} & TRAINING_CATEGORIES
    assert sum("答案" in r["solution"] for r in rows) == 10  # every fifth round of five in Chinese
    for r in rows:
        assert verify(r["verifier"], r["solution"], r["reference"], {}).correct, r
        wrong = str(int(r["reference"]) + 1)
        assert not verify(r["verifier"], f"Answer: {wrong}", r["reference"], {}).correct, r
        assert "yuan" not in r["question"] and "refund" not in r["question"].lower()


def test_robustness_set_scores_asking_and_never_a_number(eval_sets):
    rows = eval_sets.robustness_rows(seed=0, n=45)
    assert {r["category"] for r in rows} == set(eval_sets.ASK_FOR) and len(rows) == 45
    assert sum(r["category"] == "missing_price" for r in rows) == 15
    for r in rows:
        ref = r["reference"]
        assert verify("refusal", r["solution"], ref, {}).correct, r
        assert verify("refusal", r["prompt"], ref, {}).score == 0.0, r  # the echoed prompt
        assert verify("refusal", r["question"], ref, {}).score == 0.0, r  # the question alone
        assert verify("refusal", "Answer: 36", ref, {}).score == 0.0
        assert verify("refusal", "I can't help with that.", ref, {}).score == 0.0
    # a reply that asks for one kind's item does not pass another kind's row
    price_reply = next(r["solution"] for r in rows if r["category"] == "missing_price")
    order_row = next(r for r in rows if r["category"] == "missing_order_id")
    assert not verify("refusal", price_reply, order_row["reference"], {}).correct


def test_cli_writes_both_files(eval_sets, tmp_path, capsys):
    assert eval_sets.main(["--out", str(tmp_path), "--seed", "1", "--general", "5", "--robust", "6"]) == 0
    assert len((tmp_path / "general.jsonl").read_text().splitlines()) == 5
    assert len((tmp_path / "robustness.jsonl").read_text().splitlines()) == 6
    assert "robustness_set" in capsys.readouterr().out
