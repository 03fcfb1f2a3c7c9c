"""The doctor on a run from outcome-only logs (no worked rows, so no SFT): the answer_collapse and
no_sft_too_hard rules on hand-built records, the advice that fits a run without SFT, and one
zero-variance figure, the same as report.json's."""

from __future__ import annotations

import json

from rlvrflow.training import doctor_rules as R
from rlvrflow.training.answer_collapse import collapsed_answers
from rlvrflow.training.doctor import diagnose, format_findings
from rlvrflow.training.doctor_rules import RunRecords

STEPS = 40
CATS = ("gcd", "lcm", "products", "chain_sum")


def flat_metrics(correct=lambda s: 0.05) -> list[dict]:
    """Steps whose groups are mostly flat; even steps refill (24 groups scored), odd ones do not (8),
    so the pooled share (the trainer's) and the mean of the steps' shares differ."""
    rows = []
    for s in range(1, STEPS + 1):
        seen, flat = (24, 23) if s % 2 == 0 else (8, 4)
        rows.append(
            {
                "step": s,
                "reward_mean": 0.1,
                "correct_rate": correct(s),
                "completion_tokens_mean": 3.0,
                "kl": 0.0,
                "grad_norm": 1.0,
                "loss": 0.0,
                "groups_seen": seen,
                "groups_zero_variance": flat,
                "groups_zero_solved": 0,
                "zero_variance_fraction": flat / seen,
                "groups_used": seen - flat,
                **({"skipped": 1} if s % 4 == 0 else {}),
            }
        )
    return rows


def heldout(name: str, answers: list[str], golds: list[str]) -> dict:
    """An eval result whose by_prompt carries the greedy answers (what training.eval.summarize writes)."""
    right = [int(a == g) for a, g in zip(answers, golds)]
    share = sum(right) / len(right)
    return {
        "name": name,
        "step": 0 if name == "sft" else int(name.split("_")[1]),
        "pass_at_1_greedy": share,
        "pass_at_1_sampled": share,
        "pass_at_k": share,
        "format_rate": 1.0,
        "length_mean": 2.0,
        "by_prompt": {
            "ids": [f"p{i}" for i in range(len(answers))],
            "greedy": right,
            "answers": answers,
            "categories": [CATS[i % len(CATS)] for i in range(len(answers))],
        },
    }


GOLDS = ["2" if i % 8 == 0 else str(100 + i) for i in range(200)]  # '2' is the gold of 25 of 200 prompts
SFT_ANSWERS = [str(i % 37) for i in range(200)]  # scattered: the most frequent answer is 6 of 200
CONSTANT = ["2" if i % 10 else str(100 + i) for i in range(200)]  # '2' on 180 of 200


def test_answer_collapse_names_the_constant_its_hits_and_the_spread_per_category():
    rec = RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS), heldout("step_000060", CONSTANT, GOLDS)])
    f = R.answer_collapse(rec)
    assert f is not None and f.severity == "critical" and f.title.endswith("most prompts of: all prompts")
    # hits: '2' where the gold is '2' (multiples of 8 that are not of 10: 20) and 15 prompts answered with their gold
    assert f.evidence[0] == (
        "step_000060 answers '2' on 180 of 200 held-out prompts (20 right); 20 of its 35 right "
        "answers on the 200 held-out prompts are those"
    )
    # gcd holds i % 4 == 0: '2' except at the 10 multiples of 20; lcm (odd i) is '2' throughout
    assert "gcd 11 of 50" in f.evidence[1] and "lcm 1 of 50" in f.evidence[1]
    assert f.evidence[2].startswith("sft for comparison: chain_sum ")
    assert "do not ship" in f.change


def by_prompt(answers: list[str], golds: list[str], cats: list[str] | None = None) -> dict:
    return {
        "answers": answers,
        "greedy": [int(a == g) for a, g in zip(answers, golds)],
        **({"categories": cats} if cats else {}),
    }


def test_one_category_answered_with_one_wrong_answer_is_a_warning():
    cats = [CATS[i % 4] for i in range(200)]
    golds = [f"g{i}" if i % 12 else "2" for i in range(200)]  # gcd's gold is '2' on 17 of its 50 prompts
    answers = ["2" if c == "gcd" else golds[i] if i % 3 == 0 else f"w{i}" for i, c in enumerate(cats)]
    c = collapsed_answers(by_prompt(answers, golds, cats))
    assert [(x.where, x.answer, x.count, x.prompts, x.right) for x in c.sets] == [("gcd", "2", 50, 50, 17)]
    assert not c.critical and c.covered == 50 and c.hits_from_constant == 17
    f = R.answer_collapse(
        RunRecords(
            evals=[
                heldout("sft", SFT_ANSWERS, GOLDS),
                {"name": "step_000090", "by_prompt": by_prompt(answers, golds, cats)},
            ]
        )
    )
    assert f.severity == "warning" and f.title.endswith("most prompts of: gcd")


def test_no_collapse_where_the_answer_is_mostly_right_or_the_sets_are_small():
    assert (
        R.answer_collapse(
            RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS), heldout("step_000060", SFT_ANSWERS, GOLDS)])
        )
        is None
    )
    golds = [f"g{i}" for i in range(200)]
    assert collapsed_answers(by_prompt(["2"] * 99 + golds[99:], golds)) is None  # under half
    assert collapsed_answers(by_prompt(["2"] * 100 + golds[100:], golds)).sets[0].count == 100
    # a category whose golds are skewed, answered with its frequent gold where that is right: learned, not collapsed
    skewed = ["1" if i < 70 else f"g{i}" for i in range(100)]
    assert collapsed_answers(by_prompt(["1"] * 70 + skewed[70:], skewed, ["gcd"] * 100)) is None
    # 9 prompts of a category, all '2' and wrong: too few to judge
    small = by_prompt(["2"] * 9 + golds[9:40], golds[:40], ["gcd"] * 9 + ["lcm"] * 31)
    assert collapsed_answers(small) is None
    unparsed = heldout("step_000060", [""] * 200, GOLDS)  # no answer at all is format_falls' business
    assert R.answer_collapse(RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS), unparsed])) is None
    # an eval of an older run, without answers: nothing to read, no finding
    assert (
        R.answer_collapse(
            RunRecords(
                evals=[
                    {"name": "sft", "by_prompt": {"ids": ["a"]}},
                    {"name": "step_000002", "by_prompt": {"ids": ["a"]}},
                ]
            )
        )
        is None
    )


def test_no_sft_too_hard_gives_the_choices_not_the_lr():
    rec = RunRecords(metrics=flat_metrics(), sft_rows=0, tiers={"learnable": 9, "too_hard": 391, "too_easy": 0})
    f = R.no_sft_too_hard(rec)
    assert f is not None and f.severity == "critical"
    assert "391 of 400 prompts too hard" in f.evidence[1]
    assert "10 of 40 GRPO steps updated nothing" in f.evidence[3]
    assert "verifiers.answer_only_targets: true" in f.change and "training.model" in f.change
    assert "restart from SFT" not in f.change
    with_sft = RunRecords(metrics=flat_metrics(), sft_rows=220, tiers={"too_hard": 391, "learnable": 9})
    assert R.no_sft_too_hard(with_sft) is None
    assert R.no_sft_too_hard(RunRecords(sft_rows=0, tiers={"too_hard": 200, "learnable": 200})) is None
    assert R.no_sft_too_hard(RunRecords(sft_rows=None, tiers={"too_hard": 400})) is None  # not recorded: no claim


def test_flat_groups_without_sft_do_not_blame_the_learning_rate():
    falling = flat_metrics(correct=lambda s: 0.4 if s <= 10 else 0.05)  # would read as a collapse with SFT
    with_sft = R.mostly_zero_variance(RunRecords(metrics=falling, sft_rows=220))
    assert with_sft is not None and "restart from SFT" in with_sft.change
    without = R.mostly_zero_variance(RunRecords(metrics=falling, sft_rows=0))
    assert without is not None and "no SFT" in without.change
    assert "restart from SFT" not in without.change and "lower training.grpo.learning_rate" not in without.change


def test_the_zero_variance_figure_is_the_pooled_share_of_groups():
    rows = flat_metrics()
    pooled, seen = R.zero_variance_share(rows)
    assert seen == 20 * 24 + 20 * 8 and pooled == (20 * 23 + 20 * 4) / seen  # 540 / 640 = 84.4%
    step_mean = sum(m["zero_variance_fraction"] for m in rows) / len(rows)  # 72.9%: the other definition
    assert round(step_mean, 3) == 0.729
    f = R.mostly_zero_variance(RunRecords(metrics=rows))
    assert f.evidence[0].startswith("zero-variance groups: 84% of the 640 groups scored")


def test_a_collapsed_run_on_disk(tmp_path):
    """report.json's sft_rows and tiers reach the rules; the doctor's zero-variance figure is report.json's."""
    grpo, evaluate, run = tmp_path / "grpo", tmp_path / "evaluate", tmp_path / "run"
    for d in (grpo, evaluate, run):
        d.mkdir()
    rows = flat_metrics()
    (grpo / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in rows))
    evals = [heldout("sft", SFT_ANSWERS, GOLDS), heldout("step_000040", CONSTANT, GOLDS)]
    for e in evals:
        (evaluate / f"{e['name']}.json").write_text(json.dumps(e))
    fraction = R.zero_variance_share(rows)[0]  # what training.grpo's summary writes
    (run / "report.json").write_text(
        json.dumps(
            {
                "stages": {"grpo": {"dir": str(grpo)}, "evaluate": {"dir": str(evaluate)}},
                "evals": [{"name": e["name"]} for e in evals],
                "sft_rows": 0,
                "zero_variance_fraction": fraction,
                "tiers": {"learnable": 9, "too_hard": 391, "too_easy": 0},
                "eval_matrix": [{"name": "sft"}],
            }
        )
    )
    findings = diagnose(run)
    names = [f.name for f in findings]
    assert names[:2] == ["answer_collapse", "no_sft_too_hard"] and "mostly_zero_variance" in names
    text = format_findings(findings)
    assert f"{fraction:.0%}" in text and "84% of the 640 groups" in text
    assert "restart from SFT" not in text
