"""The reward canaries on the retail sample's reply rows: the keyword rule a pretrained model hacked
(the prompt's format example, the link followed by junk) stops attach; the spec's `reply` rule passes."""
from __future__ import annotations

import json
import random

import pytest

OLD_RULE = ("keyword", {"forbidden": ["Requirements:", "Format:"]})  # the spec's reply rule before `reply`


def _rows(retail, verifier: str, params: dict, n: int = 60) -> list[dict]:
    """Reply rows as attach hands them to the canaries: the rendered prompt, the generator's reference
    (for the old rule, as the generator wrote it then: {"required": [link]})."""
    from rlvrflow.cleaning import render_prompt
    from rlvrflow.flows.spec import load_spec

    template = load_spec(retail.generate.HERE / "spec.yaml").cleaning.template
    rng = random.Random(0)
    rows = []
    for i in range(n):
        task = retail.tasks_other.reply_format(rng, rng.choice(["en", "zh"]))
        ref = task.answer if verifier == "reply" else json.dumps({"required": [json.loads(task.answer)["link"]]})
        rows.append({"id": f"r{i}", "category": "reply_format", "prompt": render_prompt(task.question, "reply_format",
                     template), "reference": ref, "verifier": verifier,
                     "verifier_params": json.dumps(params)})
    return rows


class _Rule:
    category = "reply_format"

    def __init__(self, verifier: str):
        self.verifier = verifier


def _probe(rows, verifier):
    from rlvrflow.verifiers import canary

    return canary.probe(rows, [_Rule(verifier)], canary.CanaryConfig(), workers=1)


def test_the_old_keyword_rule_is_caught_by_the_prompt_canaries_alone(retail, monkeypatch):
    from rlvrflow.verifiers import canary

    verifier, params = OLD_RULE
    rows = _rows(retail, verifier, params)
    report = _probe(rows, verifier)
    assert not report["ok"]
    failed = {f["canary"]: f for f in report["failed"]}
    assert set(failed) == {"the prompt's format example", "the prompt's format example twice",
                           "the prompt's format example padded with junk", "the prompt's question and format example",
                           "a link from the prompt", "a link from the prompt followed by junk",
                           "the required keywords padded with junk"}  # its max_hits stops the repeated ones
    assert all(f["hits"] == f["rows"] == 50 for f in failed.values())
    assert "rule 'reply_format' (keyword)" in canary.summary(report)
    assert "reply" in canary.summary(report)  # the fix names the reply verifier
    # the fixed battery alone let this rule through, as it did before the real model found the hack
    monkeypatch.setattr(canary, "prompt_canaries", lambda *a: [])
    assert _probe(rows, verifier)["ok"]


def test_the_spec_reply_rule_passes_every_canary(retail):
    from rlvrflow.flows.spec import load_spec

    rule = load_spec(retail.generate.HERE / "spec.yaml").verifiers.rule_for("reply_format")
    report = _probe(_rows(retail, rule.verifier, dict(rule.params)), rule.verifier)
    assert report["ok"], report["failed"]
    assert report["rules"][0]["scored"] == {}  # not one canary scored on any row
    from rlvrflow.verifiers.canary import GARBAGE
    from rlvrflow.verifiers.prompt_canaries import PROMPT_CANARY_NAMES

    assert report["rules"][0]["canaries"] >= len(GARBAGE) + len(PROMPT_CANARY_NAMES)  # the prompt's own were probed


@pytest.mark.parametrize("verifier", ["keyword", "reply"])
def test_prompt_canaries_for_a_reply_row(retail, verifier):
    from rlvrflow.verifiers.prompt_canaries import format_examples, prompt_canaries

    row = _rows(retail, verifier, {}, n=1)[0]
    assert format_examples(row["prompt"]) == ["https://shop.example.com/returns - start the return there."]
    pairs = dict(prompt_canaries(verifier, {}, row["reference"], row["prompt"]))
    assert pairs["a link from the prompt"] == "https://shop.example.com/returns"
    assert pairs["a link from the prompt repeated"].count("https://shop.example.com/returns") == 5
    assert "Requirements:" not in pairs["the prompt's question and format example"]
    assert "https://shop.example.com/returns" in pairs["the required keywords repeated"]
    assert prompt_canaries("math", {}, "42", row["prompt"]) == []
