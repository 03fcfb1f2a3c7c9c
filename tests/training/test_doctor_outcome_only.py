"""The doctor on a run from outcome-only logs (no worked rows, so no SFT): the answer_collapse and
no_sft_too_hard rules on hand-built records, the advice that fits a run without SFT, and one
zero-variance figure, the same as report.json's."""
from __future__ import annotations

import json

from training import doctor_rules as R
from training.doctor import diagnose, format_findings
from training.doctor_rules import RunRecords

STEPS = 40
CATS = ("gcd", "lcm", "products", "chain_sum")


def flat_metrics(correct=lambda s: 0.05) -> list[dict]:
    """Steps whose groups are mostly flat; even steps refill (24 groups scored), odd ones do not (8),
    so the pooled share (the trainer's) and the mean of the steps' shares differ."""
    rows = []
    for s in range(1, STEPS + 1):
        seen, flat = (24, 23) if s % 2 == 0 else (8, 4)
        rows.append({"step": s, "reward_mean": 0.1, "correct_rate": correct(s), "completion_tokens_mean": 3.0,
                     "kl": 0.0, "grad_norm": 1.0, "loss": 0.0, "groups_seen": seen, "groups_zero_variance": flat,
                     "groups_zero_solved": 0, "zero_variance_fraction": flat / seen, "groups_used": seen - flat,
                     **({"skipped": 1} if s % 4 == 0 else {})})
    return rows


def heldout(name: str, answers: list[str], golds: list[str]) -> dict:
    """An eval result whose by_prompt carries the greedy answers (what training.eval.summarize writes)."""
    right = [int(a == g) for a, g in zip(answers, golds)]
    share = sum(right) / len(right)
    return {"name": name, "step": 0 if name == "sft" else int(name.split("_")[1]), "pass_at_1_greedy": share,
            "pass_at_1_sampled": share, "pass_at_k": share, "format_rate": 1.0, "length_mean": 2.0,
            "by_prompt": {"ids": [f"p{i}" for i in range(len(answers))], "greedy": right, "answers": answers,
                          "categories": [CATS[i % len(CATS)] for i in range(len(answers))]}}


GOLDS = ["2" if i % 8 == 0 else str(100 + i) for i in range(200)]  # '2' is the gold of 25 of 200 prompts
SFT_ANSWERS = [str(i % 37) for i in range(200)]  # scattered: the most frequent answer is 6 of 200
CONSTANT = ["2" if i % 10 else str(100 + i) for i in range(200)]  # '2' on 180 of 200


def test_answer_collapse_names_the_constant_its_hits_and_the_spread_per_category():
    rec = RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS), heldout("step_000060", CONSTANT, GOLDS)])
    f = R.answer_collapse(rec)
    assert f is not None and f.severity == "critical"
    assert f.evidence[0] == ("step_000060 answers '2' on 180 of 200 held-out prompts (90.0%); 20 of its 35 right "
                             "answers are that answer")  # hits: '2' at multiples of 8 not of 10, and 15 own golds
    # gcd holds i % 4 == 0: '2' except at the 10 multiples of 20; lcm (odd i) is '2' throughout
    assert "gcd 11 of 50" in f.evidence[1] and "lcm 1 of 50" in f.evidence[1]
    assert "for comparison, sft answers" in f.evidence[2]
    assert "do not ship" in f.change


def test_no_collapse_without_a_dominant_answer_or_with_too_few_prompts():
    assert R.answer_collapse(RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS),
                                               heldout("step_000060", SFT_ANSWERS, GOLDS)])) is None
    half_but_one = ["2"] * 99 + [str(1000 + i) for i in range(101)]
    assert R.collapsed_answer(heldout("step_000001", half_but_one, GOLDS)["by_prompt"]) is None
    half = ["2"] * 100 + [str(1000 + i) for i in range(100)]
    assert R.collapsed_answer(heldout("step_000001", half, GOLDS)["by_prompt"]).count == 100
    few = heldout("step_000060", ["2"] * 10, ["2"] * 10)
    assert R.answer_collapse(RunRecords(evals=[heldout("sft", ["1"] * 10, ["2"] * 10), few])) is None
    unparsed = heldout("step_000060", [""] * 200, GOLDS)  # no answer at all is format_falls' business
    assert R.answer_collapse(RunRecords(evals=[heldout("sft", SFT_ANSWERS, GOLDS), unparsed])) is None
    # an eval of an older run, without answers: nothing to read, no finding
    assert R.answer_collapse(RunRecords(evals=[{"name": "sft", "by_prompt": {"ids": ["a"]}},
                                               {"name": "step_000002", "by_prompt": {"ids": ["a"]}}])) is None


def test_no_sft_too_hard_gives_the_choices_not_the_lr():
    rec = RunRecords(metrics=flat_metrics(), sft_rows=0, tiers={"learnable": 9, "too_hard": 391, "too_easy": 0})
    f = R.no_sft_too_hard(rec)
    assert f is not None and f.severity == "critical"
    assert "391 of 400 prompts too hard" in f.evidence[1]
    assert "10 of 40 GRPO steps updated nothing" in f.evidence[3]
    assert "verifiers.answer_only_targets: true" in f.change and "training.model" in f.change
    assert "restart from SFT" not in f.change
    assert R.no_sft_too_hard(RunRecords(metrics=flat_metrics(), sft_rows=220, tiers={"too_hard": 391, "learnable": 9})) is None
    assert R.no_sft_too_hard(RunRecords(sft_rows=0, tiers={"too_hard": 200, "learnable": 200})) is None
    assert R.no_sft_too_hard(RunRecords(sft_rows=None, tiers={"too_hard": 400})) is None  # not recorded: no claim


def test_flat_groups_without_sft_do_not_blame_the_learning_rate():
    falling = flat_metrics(correct=lambda s: 0.4 if s <= 10 else 0.05)  # would read as a collapse with SFT
    with_sft = R.mostly_zero_variance(RunRecords(metrics=falling, sft_rows=220))
    assert with_sft is not None and "restart from SFT" in with_sft.change
    without = R.mostly_zero_variance(RunRecords(metrics=falling, sft_rows=0))
    assert without is not None and "no SFT" in without.change
    assert "restart from SFT" not in without.change and "lower training.grpo.lr" not in without.change


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
    (run / "report.json").write_text(json.dumps({
        "stages": {"grpo": {"dir": str(grpo)}, "evaluate": {"dir": str(evaluate)}},
        "evals": [{"name": e["name"]} for e in evals], "sft_rows": 0, "zero_variance_fraction": fraction,
        "tiers": {"learnable": 9, "too_hard": 391, "too_easy": 0}, "eval_matrix": [{"name": "sft"}]}))
    findings = diagnose(run)
    names = [f.name for f in findings]
    assert names[:2] == ["answer_collapse", "no_sft_too_hard"] and "mostly_zero_variance" in names
    text = format_findings(findings)
    assert f"{fraction:.0%}" in text and "84% of the 640 groups" in text
    assert "restart from SFT" not in text
