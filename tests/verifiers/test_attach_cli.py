"""attach (rules, path resolution, solution filling, the reference self-check, counts) and the
`rlvrflow verify` function on every built-in."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rlvrflow.verifiers import VerifierConfig, attach
from rlvrflow.verifiers.cli import verify_file

CODE_REF = json.dumps({"tests": "def check(c):\n    assert c(2) == 4\n", "entry_point": "dbl"})


def config(**extra) -> VerifierConfig:
    return VerifierConfig.model_validate(
        {
            "rules": [
                {"category": "arithmetic", "verifier": "math"},
                {"category": "policy", "verifier": "choice"},
                {"category": "sql", "verifier": "sql", "params": {"database": "shop.db"}},
                {"category": "code", "verifier": "code", "params": {"timeout_s": 3}},
            ],
            **extra,
        }
    )


def rows() -> pl.DataFrame:
    data = [
        ("m1", "arithmetic", "What is 6*6?", "36", "", "Answer: 42"),
        ("m2", "arithmetic", "求和", "答案: 36", "", "答案: 42"),
        ("m3", "arithmetic", "Box it", "\\frac{3}{4}", "", "\\boxed{42}"),
        ("m4", "arithmetic", "bad gold", "   ", "", ""),
        ("m5", "arithmetic", "wrong solution", "36", "The answer is 35.", ""),
        ("c1", "policy", "Which?", "B", "", "Answer: A"),
        ("c2", "policy", "Which?", "maybe", "", ""),
        ("s1", "sql", "Total per customer", "SELECT customer, SUM(total) FROM orders GROUP BY customer", "", ""),
        ("s2", "sql", "Broken gold", "SELECT nope FROM orders", "", ""),
        ("k1", "code", "Double it", CODE_REF, "```python\ndef dbl(x):\n    return 2 * x\n```", ""),
        ("k2", "code", "Double it", CODE_REF, "```python\ndef dbl(x):\n    return x + 1\n```", ""),
        ("k3", "code", "Double it", CODE_REF, "", ""),
        ("u1", "poetry", "Write a poem", "roses", "", ""),
    ]
    return pl.DataFrame(data, schema=["id", "category", "question", "reference", "solution", "prompt"], orient="row")


@pytest.mark.sandbox
def test_attach_rules_selfcheck_and_counts(tmp_path, shop_db):
    (tmp_path / "shop.db").write_bytes(shop_db.read_bytes())
    kept, rejects, stats = attach(rows(), config(answer_only_targets=True), tmp_path, workers=2)
    assert stats["rows_in"] == 13 == stats["rows_kept"] + stats["rows_rejected"]
    # m1, m2, m3, c1 and s1 got a target built from their reference; k3 (code) could not get one
    assert (stats["answer_only_targets"], stats["outcome_only_rows"]) == (5, 1)
    reasons = dict(zip(rejects["id"], rejects["reason"]))
    assert reasons == {
        "m4": "empty_reference",
        "m5": "reference_self_check",
        "c2": "reference_self_check",
        "s2": "reference_self_check",
        "k2": "reference_self_check",
        "u1": "no_verifier_rule",
    }
    assert stats["rejected_by_reason"] == {"empty_reference": 1, "reference_self_check": 4, "no_verifier_rule": 1}
    assert set(rejects["stage"]) == {"attach"} and all(rejects["detail"])
    assert "gold SQL" in rejects.filter(pl.col("id") == "s2")["detail"][0]
    sol = dict(zip(kept["id"], kept["solution"]))
    assert sol["m1"] == "Answer: 36" and sol["m2"] == "答案：36" and sol["m3"] == "\\boxed{\\frac{3}{4}}"
    assert sol["c1"] == "Answer: B" and sol["s1"].startswith("```sql") and sol["k3"] == ""
    params = json.loads(kept.filter(pl.col("id") == "s1")["verifier_params"][0])
    assert params["database"] == str((tmp_path / "shop.db").resolve())
    assert list(kept.columns[:6]) == ["id", "category", "question", "reference", "solution", "prompt"]
    assert set(kept["verifier"]) == {"math", "choice", "sql", "code"}


def test_rows_without_a_logged_solution_stay_outcome_only_by_default(tmp_path):
    cfg = VerifierConfig.model_validate(
        {"rules": [{"category": "arithmetic", "verifier": "math"}, {"category": "policy", "verifier": "choice"}]}
    )
    df = rows().filter(pl.col("id").is_in(["m1", "m2", "c1"]))
    df = pl.concat(
        [
            df,
            pl.DataFrame(
                [("m9", "arithmetic", "What is 2+2?", "4", "2+2=4\nAnswer: 4", "")], schema=df.schema, orient="row"
            ),
        ]
    )
    kept, _, stats = attach(df, cfg, tmp_path, workers=0)
    sol = dict(zip(kept["id"], kept["solution"]))
    assert sol == {"m1": "", "m2": "", "c1": "", "m9": "2+2=4\nAnswer: 4"}  # nothing made up for SFT
    assert (stats["answer_only_targets"], stats["outcome_only_rows"], stats["rows_kept"]) == (0, 3, 4)


def test_attach_without_self_check_and_empty_frame(tmp_path):
    cfg = VerifierConfig.model_validate(
        {"rules": [{"category": "arithmetic", "verifier": "math"}], "self_check": False}
    )
    kept, rejects, stats = attach(rows().filter(pl.col("category") == "arithmetic"), cfg, tmp_path)
    assert stats["rows_rejected"] == 1 and rejects["reason"][0] == "empty_reference"
    kept, rejects, stats = attach(rows().head(0), cfg, tmp_path)
    assert (kept.height, rejects.height, stats["rows_in"]) == (0, 0, 0)


def write_jsonl(path, lines):
    path.write_text(
        "".join((json.dumps(x, ensure_ascii=False) if not isinstance(x, str) else x) + "\n" for x in lines),
        encoding="utf-8",
    )


@pytest.mark.sandbox
@pytest.mark.parametrize(
    "verifier,good,bad,reference,params",
    [
        ("math", "Answer: 36", "Answer: 35", "36", {}),
        ("choice", "(B)", "(C)", "B", {}),
        ("json", '{"a": 1}', '{"a": 2}', json.dumps({"fields": {"a": 1}}), {}),
        ("keyword", "see shop.example/returns", "no link", json.dumps({"required": ["shop.example/returns"]}), {}),
        ("regex", "order #12345", "order #12", json.dumps({"required": [r"#\d{5}"]}), {}),
        (
            "code",
            "```python\ndef dbl(x):\n    return 2*x\n```",
            "```python\ndef dbl(x):\n    return x\n```",
            CODE_REF,
            {},
        ),
        ("sql", "select count(*) from orders", "select count(*) from items", "select count(*) from orders", None),
    ],
)
def test_verify_file_on_every_builtin(tmp_path, shop_db, verifier, good, bad, reference, params):
    params = {"database": str(shop_db)} if params is None else params
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(
        src,
        [
            {"id": 1, "response": good, "reference": reference, "note": "kept"},
            "{not json",
            {"id": 3, "reference": reference, "response": bad},
            {"id": 4, "reference": reference},
            {"id": 5, "response": good, "reference": reference, "params": {"nonsense": 1}},
        ],
    )
    assert verify_file(verifier, json.dumps(params), src, out, workers=2, progress=False) == 0
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [g["status"] for g in got] == ["correct", "error", "wrong", "error", "correct"]
    assert list(got[0]) == ["id", "response", "reference", "note", "score", "status", "extracted", "detail", "hedged"]
    assert got[1]["line"] == 2 and got[1]["raw"] == "{not json" and "in.jsonl:2" in got[1]["detail"]
    assert got[3]["line"] == 4 and "response" in got[3]["detail"]


def test_verify_file_usage_errors(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"response": "1", "reference": "1"}])
    assert verify_file("nope", "{}", src, tmp_path / "o.jsonl", progress=False) == 2
    assert "valid names" in capsys.readouterr().err
    assert verify_file("math", "[1]", src, tmp_path / "o.jsonl", progress=False) == 2
    assert verify_file("math", "{}", tmp_path / "missing.jsonl", tmp_path / "o.jsonl", progress=False) == 2
