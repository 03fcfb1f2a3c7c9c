"""The reward canaries on the retail sample's reply rows: the keyword rule a pretrained model hacked
(the prompt's format example, the link followed by junk) stops attach, and so does a reply rule that
still pays the format example plus the customer's name; the spec's `reply` rule passes."""

from __future__ import annotations

import json
import random

import pytest

OLD_RULE = ("keyword", {"forbidden": ["Requirements:", "Format:"]})  # the spec's reply rule before `reply`
OLD_FORMAT = "https://shop.example.com/returns - start the return there."  # the example the model copied


def _old_template(retail):
    """The spec's template as it was when the model found the hack: a format example with the link."""
    from rlvrflow.cleaning.config import TemplatePart
    from rlvrflow.flows.spec import load_spec

    template = load_spec(retail.generate.HERE / "spec.yaml").cleaning.template
    part = TemplatePart(
        requirements="a short polite reply that includes the returns page link https://shop.example.com/returns",
        format_example=OLD_FORMAT,
    )
    return template.model_copy(update={"by_category": {**template.by_category, "reply_format": part}})


def _old_reference(task) -> str:
    """The generator's reference as it was then: the customer and one stock action for every request."""
    ref = json.loads(task.answer)
    name = ref["mention"][0]
    return json.dumps(
        {
            "link": ref["link"],
            "mention": [name],
            "action": "start the return",
            "reply": f"{ref['link']} - start the return there, {name}.",
        }
    )


def _rows(retail, verifier: str, params: dict, n: int = 60, template=None, reference=None) -> list[dict]:
    """Reply rows as attach hands them to the canaries: the prompt rendered with `template` (the
    spec's by default), the reference `reference(task)` makes (the generator's by default; for the old
    keyword rule, as the generator wrote it then: {"required": [link]})."""
    from rlvrflow.cleaning import render_prompt
    from rlvrflow.flows.spec import load_spec

    template = template or load_spec(retail.generate.HERE / "spec.yaml").cleaning.template
    if reference is None:
        reference = (
            (lambda t: t.answer)
            if verifier == "reply"
            else (lambda t: json.dumps({"required": [json.loads(t.answer)["link"]]}))
        )
    rng = random.Random(0)
    rows = []
    for i in range(n):
        task = retail.tasks_other.reply_format(rng, rng.choice(["en", "zh"]))
        rows.append(
            {
                "id": f"r{i}",
                "category": "reply_format",
                "prompt": render_prompt(task.question, "reply_format", template),
                "reference": reference(task),
                "verifier": verifier,
                "verifier_params": json.dumps(params),
            }
        )
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
    rows = _rows(retail, verifier, params, template=_old_template(retail))
    report = _probe(rows, verifier)
    assert not report["ok"]
    failed = {f["canary"]: f for f in report["failed"]}
    assert set(failed) == {
        "the prompt's format example",
        "the prompt's format example twice",
        "the prompt's format example padded with junk",
        "the prompt's question and format example",
        "a link from the prompt",
        "a link from the prompt followed by junk",
        "the required keywords padded with junk",
    }  # its max_hits stops the repeated ones
    assert all(f["hits"] == f["rows"] == 50 for f in failed.values())
    assert "rule 'reply_format' (keyword)" in canary.summary(report)
    assert "reply" in canary.summary(report)  # the fix names the reply verifier
    # the fixed battery alone let this rule through, as it did before the real model found the hack
    monkeypatch.setattr(canary, "prompt_canaries", lambda *a: [])
    assert _probe(rows, verifier)["ok"]


def test_a_reply_rule_that_pays_the_format_example_and_the_name_is_caught(retail):
    """A deliberately weak reply rule on the old prompt: one stock action for every request, no
    `format_example` to refuse copies and no sentence check (min_words: 0). `<format example>, <name>.`
    (what the model wrote next) scores on every row, and the canary built from the format example
    and the required keywords stops attach; so does the question followed by the example."""
    from rlvrflow.verifiers import canary

    weak = {"forbidden": ["Requirements:", "Format:"], "min_words": 0}
    rows = _rows(retail, "reply", weak, template=_old_template(retail), reference=_old_reference)
    report = _probe(rows, "reply")
    assert not report["ok"]
    failed = {f["canary"]: f for f in report["failed"]}
    assert set(failed) == {
        "the prompt's format example with the required keywords",
        "the prompt's question and format example",
    }
    assert all(f["hits"] == f["rows"] == 50 for f in failed.values())
    assert "rule 'reply_format' (reply)" in canary.summary(report)
    # the rule given the format example: a copy with the name put in before its stop still copies it
    rows = _rows(
        retail,
        "reply",
        {**weak, "format_example": OLD_FORMAT},
        template=_old_template(retail),
        reference=_old_reference,
    )
    assert _probe(rows, "reply")["ok"]


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
    assert format_examples(row["prompt"]) == ["<link> - <what the customer should do>"]  # a placeholder now
    pairs = dict(prompt_canaries(verifier, {}, row["reference"], row["prompt"]))
    assert pairs["a link from the prompt"] == "https://shop.example.com/returns"
    assert pairs["a link from the prompt repeated"].count("https://shop.example.com/returns") == 5
    assert "Requirements:" not in pairs["the prompt's question and format example"]
    assert "https://shop.example.com/returns" in pairs["the required keywords repeated"]
    with_keywords = pairs["the prompt's format example with the required keywords"]
    assert with_keywords.startswith("<link> - <what the customer should do>, https://shop.example.com/returns")
    assert prompt_canaries("math", {}, "42", row["prompt"]) == []


def test_the_format_example_canary_puts_the_missing_keywords_before_its_stop(retail):
    from rlvrflow.verifiers.prompt_canaries import prompt_canaries

    row = _rows(retail, "reply", {}, n=1, template=_old_template(retail), reference=_old_reference)[0]
    name = json.loads(row["reference"])["mention"][0]
    pairs = dict(prompt_canaries("reply", {}, row["reference"], row["prompt"]))
    assert (
        pairs["the prompt's format example with the required keywords"]
        == f"https://shop.example.com/returns - start the return there, {name}."
    )  # what the model wrote
