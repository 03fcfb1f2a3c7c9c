"""The TRL benchmark's own pieces, without TRL: the arithmetic rows and the verifier-backed reward.

If these drift (a row the math verifier rejects, a reward that ignores correctness), the benchmark
would compare trainers on broken data, so they are checked here where TRL is not installed.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("trl_grpo")


@pytest.fixture(scope="module")
def rows(bench):
    df, dropped = bench.arithmetic_rows(24, seed=3)
    return df, dropped


def test_rows_follow_the_row_schema_and_are_unique(rows):
    df, dropped = rows
    assert df.height + dropped == 24
    for col in (
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
    ):
        assert col in df.columns, col
    assert df["id"].n_unique() == df.height
    assert set(df["verifier"]) == {"math"}
    assert all(json.loads(p) == {} for p in df["verifier_params"])
    assert all("Format example:" in p and q in p for p, q in zip(df["prompt"], df["question"]))


def test_rows_are_deterministic_for_a_seed(bench, rows):
    again, _ = bench.arithmetic_rows(24, seed=3)
    assert again["id"].to_list() == rows[0]["id"].to_list()


def test_verifier_reward_pays_for_the_right_answer(bench, rows):
    from rlvrflow.training.scoring import tasks_from_df
    from rlvrflow.verifiers import RewardConfig

    df = rows[0].head(2)
    reward = bench.VerifierReward({t.id: t for t in tasks_from_df(df)}, RewardConfig())
    ids = df["id"].to_list()
    right = [f"Answer: {ref}" for ref in df["reference"]]
    wrong = ["Answer: 123456789", "no idea"]
    got = reward(
        prompts=df["prompt"].to_list() * 2, completions=right + wrong, completion_ids=[[0] * 5] * 4, id=ids + ids
    )
    assert len(got) == 4
    assert min(got[:2]) > max(got[2:])
