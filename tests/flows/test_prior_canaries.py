"""Prior canaries in the attach stage: a constant gold over verifiers.canaries.max_prior_share stops the
stage naming the field; a skewed but allowed one lands in the attach stats' warnings and canary_report.json."""

from __future__ import annotations

import json

import pytest

from rlvrflow.flows import stages
from rlvrflow.flows.errors import StageFailed
from rlvrflow.flows.spec import load_spec


@pytest.mark.slow
def test_attach_stops_on_a_prior_over_the_bound_and_warns_below_it(toy_spec, tmp_path):
    spec_path, raw = toy_spec, toy_spec.parent / "raw" / "part-0.jsonl"

    def write(golds):
        raw.write_text(
            "".join(
                json.dumps({"qid": f"q{i:03d}", "q": f"gcd of {i} and 2 (case {i})?", "a": g, "s": f"Answer: {g}"})
                + "\n"
                for i, g in enumerate(golds)
            )
        )

    write(["2"] * 36 + [str(i) for i in range(3, 7)])  # 90% of the golds are 2
    spec = load_spec(spec_path)
    with pytest.raises(StageFailed, match=r"verifiers\.canaries\.max_prior_share") as err:
        stages.run("attach", spec, tmp_path / "a", {"prepare": stages.run("prepare", spec, tmp_path / "a", {})})
    assert "'Answer: 2'" in str(err.value)
    report = json.loads((tmp_path / "a" / "canary_report.json").read_text())
    assert report["priors"][0]["stop"] is True

    write(["2"] * 10 + [str(i) for i in range(3, 33)])  # a quarter: a warning in the attach stats
    spec = load_spec(spec_path)
    verified = stages.run("attach", spec, tmp_path / "b", {"prepare": stages.run("prepare", spec, tmp_path / "b", {})})
    [prior] = verified.stats["canaries"]["priors"]
    assert prior["response"] == "Answer: 2" and not prior["stop"]
    assert any(
        w.startswith("skewed prior") and "rule 'arithmetic' (math): 'Answer: 2' right on 10/40 rows" in w
        for w in verified.stats["warnings"]
    )
