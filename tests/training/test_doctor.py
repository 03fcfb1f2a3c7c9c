"""The run doctor: every rule on a synthetic run that shows its symptom and on one that does not, and
the loader on the three folder shapes a user may pass (run folder, output folder, GRPO folder)."""

from __future__ import annotations

import json
import math

import pytest

from rlvrflow.training import doctor_rules as R
from rlvrflow.training.doctor import diagnose, format_findings, load_records, main
from rlvrflow.training.doctor_rules import RunRecords

STEPS = 40


def metrics(**series) -> list[dict]:
    """STEPS metric lines; each keyword is a function of the step (1-based) giving that metric."""
    healthy = {
        "reward_mean": lambda s: 0.5 + 0.02 * (s % 3),
        "correct_rate": lambda s: 0.45,
        "completion_tokens_mean": lambda s: 18.0 + (s % 2),
        "kl": lambda s: 0.0,
        "grad_norm": lambda s: 1.7,
        "loss": lambda s: 0.01,
        "zero_variance_fraction": lambda s: 0.3,
        "groups_used": lambda s: 8,
        "lr": lambda s: 1e-4,
    }
    healthy.update(series)
    return [{"step": s, **{k: f(s) for k, f in healthy.items()}} for s in range(1, STEPS + 1)]


def ev(name: str, greedy: float, **extra) -> dict:
    return {
        "name": name,
        "step": 0 if name == "sft" else int(name.split("_")[1]),
        "pass_at_1_greedy": greedy,
        "pass_at_1_sampled": greedy,
        "pass_at_k": greedy + 0.1,
        "format_rate": 0.9,
        "length_mean": 20.0,
        "length_p90": 40.0,
        "per_prompt_variance": 0.06,
        "zero_variance_prompts": 0.7,
        **extra,
    }


EVALS = [ev("sft", 0.34), ev("step_000020", 0.36), ev("step_000040", 0.38)]


def healthy(**changes) -> RunRecords:
    return RunRecords(**{"metrics": metrics(), "evals": list(EVALS), **changes})


def test_a_healthy_run_has_no_findings():
    rec = healthy(
        regression={"general": {"sft": 0.8, "step_000040": 0.79}}, robustness={"sft": 0.5, "step_000040": 0.5}
    )
    assert [rule.__name__ for rule in R.RULES if rule(rec) is not None] == []


def test_reward_rises_eval_flat_prints_the_highest_reward_samples():
    rising = metrics(reward_mean=lambda s: 0.3 + 0.01 * s)
    flat = [ev("sft", 0.34), ev("step_000040", 0.34)]
    samples = [
        {"prompt": "What is 2+2?", "response": "Answer: 4 4 4 4", "reward": 1.1, "step": 39},
        {"prompt": "p", "response": "low", "reward": 0.1},
        {"prompt": "p", "response": "nan", "reward": "x"},
    ]
    f = R.reward_rises_eval_flat(RunRecords(metrics=rising, evals=flat, samples=samples))
    assert f is not None and "+0.300" in f.evidence[0] and "+0.0 points" in f.evidence[1]
    assert "Answer: 4 4 4 4" in f.evidence[2] and "reward 1.10" in f.evidence[2] and len(f.evidence) == 4
    assert R.reward_rises_eval_flat(RunRecords(metrics=rising, evals=EVALS)) is None  # eval rose 4 points
    assert R.reward_rises_eval_flat(healthy(evals=flat)) is None  # reward did not rise


def test_reward_swings():
    f = R.reward_swings(healthy(metrics=metrics(reward_mean=lambda s: 0.15 if s % 2 else 0.85)))
    assert f is not None and "largest jump" in f.evidence[1] and "num_generations" in f.change
    assert R.reward_swings(healthy()) is None
    # a steady climb is a trend, not a swing
    assert R.reward_swings(healthy(metrics=metrics(reward_mean=lambda s: 0.1 + 0.02 * s))) is None


def test_length_grows_while_accuracy_does_not():
    longer = metrics(completion_tokens_mean=lambda s: 15 + s)
    f = R.length_grows(RunRecords(metrics=longer, evals=[ev("sft", 0.34), ev("step_000040", 0.34)]))
    assert f is not None and "length_penalty" in f.change and "completion tokens" in f.evidence[0]
    assert R.length_grows(healthy()) is None
    # longer answers that buy accuracy are fine
    assert (
        R.length_grows(
            RunRecords(metrics=metrics(completion_tokens_mean=lambda s: 15 + s, correct_rate=lambda s: 0.2 + 0.01 * s))
        )
        is None
    )


def test_format_falls():
    f = R.format_falls(healthy(evals=[ev("sft", 0.34), ev("step_000040", 0.34, format_rate=0.7)]))
    assert f is not None and "-20.0 points" in f.evidence[0] and "format_weight" in f.change
    assert R.format_falls(healthy(evals=[ev("sft", 0.34), ev("step_000040", 0.34, format_rate=0.88)])) is None


def test_a_nan_entropy_breaks_the_numbers():
    f = R.numbers_break(healthy(metrics=metrics(entropy=lambda s: math.nan if s == 7 else 0.1)))
    assert f is not None and "entropy is NaN or infinite at 1 step(s), first at step 7" in f.evidence[0]


def test_kl_grows():
    f = R.kl_grows(healthy(metrics=metrics(kl=lambda s: 0.002 * s)))
    assert f is not None and "step 40" in f.evidence[1] and "beta" in f.change
    assert R.kl_grows(healthy()) is None  # beta 0: KL is not computed
    assert R.kl_grows(healthy(metrics=metrics(kl=lambda s: 0.005 + 0.00001 * s))) is None  # small and steady


def test_entropy_drifts_both_ways():
    collapse = {
        "entropy": lambda s: 0.4 if s <= 10 else 0.05,
        "zero_variance_fraction": lambda s: 0.3 if s <= 10 else 0.7,
    }
    down = R.entropy_drifts(healthy(metrics=metrics(**collapse)))
    assert down is not None and down.title == "policy entropy collapses" and "entropy_coef" in down.change
    assert "0.400 (steps 1-10) -> 0.050 (steps 31-40)" in down.evidence[0]
    assert "30% (steps 1-10) -> 70%" in down.evidence[1]
    assert "training correct rate 0.450 -> 0.450" in down.evidence[2]
    # the same fall while the groups stay mixed, or while the policy learns its prompts, is not a collapse
    assert R.entropy_drifts(healthy(metrics=metrics(entropy=collapse["entropy"]))) is None
    learning = metrics(**collapse, correct_rate=lambda s: 0.5 if s <= 10 else 0.9)
    assert R.entropy_drifts(healthy(metrics=learning)) is None
    up = R.entropy_drifts(healthy(metrics=metrics(entropy=lambda s: 0.36 + 0.04 * s)))
    assert up is not None and up.title == "policy entropy blows up" and "lower training.grpo.entropy_coef" in up.change
    assert R.entropy_drifts(healthy()) is None  # a run that logged no entropy
    # the retail demo without a bonus (~0.11 -> ~0.10) and at entropy_coef 0.005 (0.30 -> 0.35): healthy
    assert R.entropy_drifts(healthy(metrics=metrics(entropy=lambda s: 0.112 - 0.0003 * s))) is None
    assert R.entropy_drifts(healthy(metrics=metrics(entropy=lambda s: 0.29 + 0.0015 * s))) is None
    # a rise to 3x that stays under 1 nat, and a fall from a start already near greedy, are not findings
    assert R.entropy_drifts(healthy(metrics=metrics(entropy=lambda s: 0.1 if s <= 10 else 0.5))) is None
    assert R.entropy_drifts(healthy(metrics=metrics(entropy=lambda s: 0.01 if s <= 10 else 0.001))) is None


@pytest.mark.parametrize("correct,advice", [(0.1, "too hard"), (0.9, "too easy"), (0.5, "re-tier")])
def test_mostly_zero_variance_names_the_side(correct, advice):
    rec = healthy(metrics=metrics(zero_variance_fraction=lambda s: 0.8, correct_rate=lambda s: correct))
    f = R.mostly_zero_variance(rec)
    assert f is not None and "80%" in f.evidence[0] and advice in f.change
    assert R.mostly_zero_variance(healthy()) is None


@pytest.mark.parametrize(
    "correct,solved,advice", [(0.5, 1, "too hard"), (0.5, 5, "too easy"), (0.5, 3, "re-tier"), (0.1, 5, "too easy")]
)
def test_counted_all_right_groups_decide_the_side_before_the_correct_rate(correct, solved, advice):
    """With groups_zero_solved logged, the count of all-right flat groups says which side they are on."""
    rec = healthy(
        metrics=metrics(
            zero_variance_fraction=lambda s: 0.75,
            correct_rate=lambda s: correct,
            groups_zero_variance=lambda s: 6,
            groups_zero_solved=lambda s: solved,
        )
    )
    f = R.mostly_zero_variance(rec)
    assert f is not None and advice in f.change
    assert f"{solved / 6:.0%} all right, {1 - solved / 6:.0%} not" in f.evidence[2]


def test_zero_variance_after_a_collapse_blames_the_update_not_the_tiers():
    rec = healthy(metrics=metrics(zero_variance_fraction=lambda s: 0.8, correct_rate=lambda s: 0.4 if s <= 10 else 0.0))
    f = R.mostly_zero_variance(rec)
    assert f is not None and "collapsed" in f.change and "0.400 (steps 1-10) -> 0.000" in f.evidence[1]


@pytest.mark.parametrize("correct, extra", [(0.1, "more SFT"), (0.5, None)])
def test_zero_variance_under_the_uniform_sampler_points_at_the_sampler_not_the_tiers(correct, extra):
    rec = healthy(
        metrics=metrics(zero_variance_fraction=lambda s: 0.8, correct_rate=lambda s: correct), sampler="uniform"
    )
    f = R.mostly_zero_variance(rec)
    assert f is not None and "curriculum.sampler: uniform" in f.change and "re-tier (" not in f.change
    assert (extra in f.change) if extra else "SFT" not in f.change


def test_the_doctor_reads_the_sampler_from_the_grpo_summary(tmp_path):
    from rlvrflow.training.doctor import load_records

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.1}\n')
    (tmp_path / "summary.json").write_text('{"sampler": "uniform"}')
    assert load_records(tmp_path).sampler == "uniform"
    (tmp_path / "summary.json").unlink()
    assert load_records(tmp_path).sampler is None


def test_a_stopped_run_s_sampler_comes_from_its_newest_checkpoint(tmp_path):
    """No summary.json (the run stopped before finishing): the newest complete checkpoint's meta.json,
    which the trainer writes at every checkpoint, says which sampler drew."""
    from rlvrflow.training.checkpoint import checkpoint_tmp_dir
    from rlvrflow.training.doctor import load_records

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.1}\n')
    for step, sampler in ((8, "quota"), (16, "uniform")):
        ckpt = tmp_path / f"step_{step:06d}"
        ckpt.mkdir()
        (ckpt / "state.pt").write_bytes(b"")
        (ckpt / "meta.json").write_text(json.dumps({"step": step, "sampler": sampler}))
    # an unfinished save (checkpoint_tmp_dir's folder, renamed into place only when complete)
    unfinished = tmp_path / f"{checkpoint_tmp_dir(tmp_path, 24).name}"
    unfinished.mkdir()
    (unfinished / "state.pt").write_bytes(b"")
    (unfinished / "meta.json").write_text(json.dumps({"step": 24, "sampler": "adaptive"}))
    assert load_records(tmp_path).sampler == "uniform"
    (tmp_path / "summary.json").write_text('{"sampler": "adaptive"}')  # a finished run's summary wins
    assert load_records(tmp_path).sampler == "adaptive"


def test_heldout_falls():
    f = R.heldout_falls(healthy(evals=[ev("sft", 0.34), ev("step_000020", 0.20), ev("step_000040", 0.25)]))
    assert f is not None and "-14.0 points" in f.evidence[0] and "step_000020" in f.evidence[0]
    assert R.heldout_falls(healthy(evals=[ev("sft", 0.34), ev("step_000040", 0.33)])) is None


def scored(greedy: list[int]) -> dict:
    return {"by_prompt": {"ids": [f"p{i}" for i in range(len(greedy))], "greedy": greedy, "sampled": greedy}}


def test_heldout_falls_within_its_interval_is_noise_not_a_warning():
    # a real-model run: 23 -> 21 of 80 prompts, the two models differing on a handful of prompts
    sft = [1] * 23 + [0] * 57
    step = [1] * 19 + [0] * 4 + [1, 1] + [0] * 55
    f = R.heldout_falls(healthy(evals=[ev("sft", 23 / 80, **scored(sft)), ev("step_000016", 21 / 80, **scored(step))]))
    assert f is not None and f.severity == "info" and "within noise" in f.title
    assert "95% interval" in f.evidence[0] and "80 prompts" in f.evidence[0]
    # 20 of 80 prompts lost by the checkpoint, none gained: the interval stays below zero, a warning
    lost = [1] * 20 + [0] * 60
    f = R.heldout_falls(healthy(evals=[ev("sft", 20 / 80, **scored(lost)), ev("step_000016", 0.0, **scored([0] * 80))]))
    assert f is not None and f.severity == "warning" and "+" not in f.evidence[0].split("interval")[1].split(" to ")[1]


def test_regression_drops_against_max_regression():
    rec = healthy(regression={"general": {"sft": 0.80, "step_000020": 0.79, "step_000040": 0.70}})
    f = R.regression_drops(rec)
    assert f is not None and len(f.evidence) == 1 and "step_000040" in f.evidence[0] and "-10.0" in f.evidence[0]
    rec.max_regression = 15.0
    assert R.regression_drops(rec) is None
    assert R.regression_drops(healthy(regression={"general": {"step_000040": 0.1}})) is None  # no baseline


def test_robustness_drops():
    f = R.robustness_drops(healthy(robustness={"sft": 0.6, "step_000040": 0.2}))
    assert f is not None and "20.0%" in f.evidence[0] and "refusal" in f.change
    assert R.robustness_drops(healthy(robustness={"sft": 0.6, "step_000040": 0.58})) is None


def test_numbers_break_on_nan_and_grad_explosion():
    f = R.numbers_break(healthy(metrics=metrics(loss=lambda s: math.nan if s > 30 else 0.01)))
    assert f is not None and f.severity == "critical" and "first at step 31" in f.evidence[0]
    f = R.numbers_break(healthy(metrics=metrics(grad_norm=lambda s: 500.0 if s == 12 else 1.5)))
    assert f is not None and "at step 12" in f.evidence[0]
    assert R.numbers_break(healthy()) is None
    # NaN rewards do not turn into a fake trend for the other rules
    assert R.reward_rises_eval_flat(healthy(metrics=metrics(reward_mean=lambda s: math.nan))) is None


def test_short_runs_call_no_trend():
    short = metrics(reward_mean=lambda s: 0.1 * s)[: R.MIN_STEPS - 1]
    rec = RunRecords(metrics=short, evals=[ev("sft", 0.34), ev("step_000007", 0.30)])
    assert R.reward_rises_eval_flat(rec) is None and R.reward_swings(rec) is None


# ----- loading a run from disk -------------------------------------------------------------------


def write_run(tmp_path, metric_rows, evals, matrix=None, samples=None):
    out = tmp_path / "out"
    grpo, evaluate = out / "stages" / "grpo" / "k1", out / "stages" / "evaluate" / "k2"
    run = out / "runs" / "20260101T000000Z-abcd1234"
    for d in (grpo, evaluate, run):
        d.mkdir(parents=True)
    (grpo / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metric_rows))
    (grpo / "evals.jsonl").write_text("".join(json.dumps({**e, "name": None}) + "\n" for e in evals))
    for e in evals:
        (evaluate / f"{e['name']}.json").write_text(json.dumps(e))
    if samples:
        (evaluate / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    report = {
        "stages": {"grpo": {"dir": str(grpo)}, "evaluate": {"dir": str(evaluate)}},
        "evals": [{"name": e["name"]} for e in evals],
        "max_regression": 2.0,
    }
    if matrix is not None:
        report["eval_matrix"] = matrix
    (run / "report.json").write_text(json.dumps(report))
    (out / "latest.json").write_text(json.dumps({"run_dir": str(run)}))
    return out, run, grpo


def test_a_bad_run_on_disk_names_its_symptoms(tmp_path, capsys):
    bad = metrics(
        reward_mean=lambda s: 0.3 + 0.01 * s,
        completion_tokens_mean=lambda s: 15 + s,
        grad_norm=lambda s: 400.0 if s == 33 else 2.0,
    )
    evals = [ev("sft", 0.34), ev("step_000020", 0.30), ev("step_000040", 0.26, format_rate=0.6)]
    matrix = [
        {"name": "sft", "regression": {"general": 0.8}, "robustness": 0.5},
        {"name": "step_000040", "regression": {"general": 0.6}, "robustness": 0.1},
    ]
    samples = [{"prompt": "q", "response": "Answer: 7 Answer: 7", "reward": 1.0}]
    out, run, grpo = write_run(tmp_path, bad, evals, matrix, samples)
    names = [f.name for f in diagnose(run)]
    assert names[0] == "numbers_break"
    assert set(names) == {
        "numbers_break",
        "reward_rises_eval_flat",
        "heldout_falls",
        "regression_drops",
        "robustness_drops",
        "length_grows",
        "format_falls",
    }
    assert [f.name for f in diagnose(out)] == names  # the output folder: latest.json's run
    assert main([str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("run doctor: 7 finding(s)") and "Answer: 7 Answer: 7" in text and "try: " in text
    assert main([str(run), "--json"]) == 0
    assert {f["name"] for f in json.loads(capsys.readouterr().out)} == set(names)
    # the GRPO folder alone: its evals.jsonl, no matrix
    assert "heldout_falls" in [f.name for f in diagnose(grpo)]


def test_samples_of_the_last_model_are_ranked_first(tmp_path):
    rising = metrics(reward_mean=lambda s: 0.3 + 0.01 * s)
    flat = [ev("sft", 0.34), ev("step_000040", 0.34)]
    out, run, grpo = write_run(tmp_path, rising, flat)
    (grpo / "samples").mkdir()
    rows = [
        {
            "id": "a",
            "category": "c",
            "prompt": "q",
            "mode": mode,
            "response": f"{name} {mode}",
            "status": "wrong",
            "score": 0.0,
            "reward": reward,
            "n_tokens": 3,
        }
        for name, reward in (("sft", 1.1), ("step_000040", 0.9))
        for mode in ("greedy", "sampled")
    ]
    (grpo / "samples" / "step_000000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (tmp_path / "out" / "stages" / "evaluate" / "k2" / "step_000040.samples.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows[2:])
    )
    rec = load_records(run)
    assert sorted({s["model"] for s in rec.samples}) == ["step_000000", "step_000040"]
    f = next(f for f in diagnose(run) if f.name == "reward_rises_eval_flat")
    shown = [e for e in f.evidence if e.startswith("high-reward sample")]
    assert len(shown) == 2 and all("(step_000040, " in e for e in shown), shown


def test_missing_files_are_named(tmp_path, capsys):
    out, run, grpo = write_run(tmp_path, metrics(), list(EVALS))
    (grpo / "metrics.jsonl").unlink()
    findings = diagnose(run)
    assert [f.name for f in findings] == ["records_missing"]
    text = format_findings(findings)
    assert "no symptoms found" in text and "metrics.jsonl not found" in text and "no eval_matrix" in text
    assert main([str(tmp_path / "nowhere")]) == 2 and "is not a folder" in capsys.readouterr().err
    (grpo / "evals.jsonl").write_text('{"step": 0}\n{"step": 1, "pass_at')
    (run / "report.json").write_text(json.dumps({"stages": {"grpo": {"dir": str(grpo)}}}))
    with pytest.raises(ValueError, match=r"evals.jsonl:2 is not valid JSON"):
        load_records(run)
