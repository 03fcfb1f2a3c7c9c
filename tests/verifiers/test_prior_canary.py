"""Prior canaries: a rule's own most frequent golds, answered as constants, against its rows. A skewed
category warns with the share, one over verifiers.canaries.max_prior_share stops attach naming the
field, and a balanced one is quiet."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlvrflow.verifiers import canary
from rlvrflow.verifiers.config import CanaryConfig


class Gcd:
    category, verifier = "gcd", "math"


def _rows(golds: list[str], category: str = "gcd") -> list[dict]:
    return [
        {
            "id": f"r{i:03d}",
            "category": category,
            "prompt": f"gcd question {i}?",
            "reference": g,
            "verifier": "math",
            "verifier_params": "{}",
        }
        for i, g in enumerate(golds)
    ]


def test_a_skewed_category_warns_with_the_constant_and_its_share():
    golds = ["2"] * 10 + [str(i) for i in range(3, 23)]  # a third of the golds are 2
    priors = canary.prior_probe(_rows(golds), [Gcd], CanaryConfig(), workers=0)
    assert [(p["category"], p["constant"], p["response"], p["hits"], p["rows"]) for p in priors] == [
        ("gcd", "2", "Answer: 2", 10, 30)
    ]
    assert priors[0]["share"] == pytest.approx(1 / 3, abs=1e-3) and priors[0]["stop"] is False
    text = canary.prior_summary(priors, CanaryConfig().max_prior_share)
    assert text.startswith("skewed prior") and "rule 'gcd' (math): 'Answer: 2' right on 10/30 rows (33.3%)" in text
    assert "max_prior_share" not in text and len(text.splitlines()) == 1  # a warning, not a stop


def test_a_constant_over_the_bound_stops_and_names_the_field():
    priors = canary.prior_probe(_rows(["2"] * 9 + ["3"]), [Gcd], CanaryConfig(), workers=0)
    assert priors[0]["response"] == "Answer: 2" and priors[0]["share"] == 0.9 and priors[0]["stop"] is True
    text = canary.prior_summary(priors, CanaryConfig().max_prior_share)
    assert "over verifiers.canaries.max_prior_share=80%" in text and "fix:" in text
    # a raised bound lets it through as a warning
    assert not canary.prior_probe(_rows(["2"] * 9 + ["3"]), [Gcd], CanaryConfig(max_prior_share=0.95), workers=0)[0][
        "stop"
    ]


def test_a_balanced_two_way_choice_warns_but_never_stops_on_its_samples_noise():
    class Pick:
        category, verifier = "pick", "choice"

    for seed in range(6):  # 100 A / 100 B: a sample of 50 lands at 0.52-0.56 for most seeds
        rows = [{**r, "category": "pick", "verifier": "choice"} for r in _rows(["A", "B"] * 100, "pick")]
        priors = canary.prior_probe(rows, [Pick], CanaryConfig(seed=seed), workers=0)
        assert priors and not any(p["stop"] for p in priors), (seed, priors)


def test_a_rubric_reference_is_not_an_answer_and_is_not_probed():
    class Reply:
        category, verifier = "reply", "keyword"

    rows = [
        {**r, "category": "reply", "verifier": "keyword"}
        for r in _rows(['{"required": ["https://shop.example.com/returns"]}'] * 20)
    ]
    assert canary.render_constant("keyword", rows[0]["reference"]) == ""
    assert canary.prior_probe(rows, [Reply], CanaryConfig(), workers=0) == []


def test_a_balanced_category_is_quiet_and_the_probe_can_be_off():
    rows = _rows([str(i) for i in range(40)])
    assert canary.prior_probe(rows, [Gcd], CanaryConfig(), workers=0) == []
    assert canary.prior_summary([], 0.5).startswith("prior canaries: no constant")
    assert canary.prior_probe(_rows(["2"] * 10), [Gcd], CanaryConfig(prior_golds=0), workers=0) == []


def test_the_bound_is_validated_against_the_warning_threshold():
    with pytest.raises(ValidationError, match="max_prior_share .* below max_share"):
        CanaryConfig(max_share=0.2, max_prior_share=0.1)
    with pytest.raises(ValidationError, match="max_prior_share"):
        CanaryConfig(max_prior_share=0.0)
