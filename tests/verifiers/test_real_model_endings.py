"""The math verifier on real model endings labelled by hand (tests/verifiers/cases/real_model_endings.jsonl).

Replies that SmolLM2-135M-Instruct and the embedded tiny base wrote to the retail sample's numeric
questions (bench/real_model_answers.py), each labelled by a person reading it: correct, wrong,
no-answer or hedged against the gold. The verifier must agree (accept exactly the `correct` ones),
except the cases in real_model_known_differences.json, each with its reason. A listed case that
starts to agree fails too, so the list only shrinks.

A false positive (a reply labelled anything but correct that the verifier accepts) may be listed
only when the reply was cut at the generation limit (`stopped: length`) with a number at the cut,
its reason starting "FALSE POSITIVE": the text alone cannot show that `The total is 15` was about to
become `150`, so the verifier cannot refuse it; whoever scores rollouts knows the finish reason. A
false positive on a reply that ended by itself is a bug, never a known difference. Labels read the
text as a careful reader would: a completed sentence is read, a number at the cut is not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvrflow.verifiers import verify

HERE = Path(__file__).with_name("cases")
CASES = [json.loads(line) for line in (HERE / "real_model_endings.jsonl").read_text(encoding="utf-8").splitlines()]
KNOWN = json.loads((HERE / "real_model_known_differences.json").read_text(encoding="utf-8"))
LABELS = {"correct", "wrong", "no-answer", "hedged"}
# the retail spec's math rules pass no params (examples/retail/spec.yaml, verifiers.rules)
PARAMS: dict = {}


def test_table_is_whole():
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 200 and len(set(ids)) == len(ids)
    assert {c["label"] for c in CASES} <= LABELS and {c["stopped"] for c in CASES} <= {"eos", "length"}
    assert {"en", "zh"} <= {c["language"] for c in CASES}
    assert set(KNOWN) <= set(ids), sorted(set(KNOWN) - set(ids))


def test_no_false_positive_is_excused():
    by_id = {c["id"]: c for c in CASES}
    listed = [i for i in KNOWN if i in by_id and by_id[i]["label"] != "correct"]
    excused = sorted(
        i for i in listed if not (by_id[i]["stopped"] == "length" and KNOWN[i].startswith("FALSE POSITIVE"))
    )
    assert not excused, (
        f"a reply labelled not correct that the verifier accepts is a bug to fix, not a known difference: {excused}"
    )
    assert len(listed) <= 1, f"false positives on cut-off replies grow: {sorted(listed)}"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_real_model_ending(case):
    v = verify("math", case["response"], case["gold"], PARAMS)
    agrees = bool(v.correct) == (case["label"] == "correct")
    if case["id"] in KNOWN:
        assert not agrees, f"now agrees with the hand label: drop it from the known differences ({KNOWN[case['id']]})"
    else:
        assert agrees, (case["label"], case["note"], v)
