"""The run doctor's rules: each a small pure function of a run's records that names one symptom.

A rule takes `RunRecords` (GRPO metrics per logged step, the eval of the SFT baseline and of every
checkpoint, regression and robustness scores per model, samples) and returns a `Finding` (what it
sees, the evidence with steps and numbers, the change to try) or None. `RULES` lists them in the
order they print. training/doctor.py loads the records from a run folder and prints the findings;
training/README.md ("Run doctor") says what each rule reads.

Thresholds are named constants; each comment says why it sits where it does. Trend rules compare
the mean of the first quarter of logged steps with the last quarter (a single step is noise) and
need at least MIN_STEPS logged steps.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from rlvrflow.training.answer_collapse import collapse_line, collapsed_answers

MIN_STEPS = 8  # fewer logged steps give quarters of one or two steps: too noisy to call a trend
REWARD_RISE = 0.05  # rewards live in ~[0, 1]; +0.05 of mean reward is ~3 more right answers per 64 rollouts
EVAL_FLAT_POINTS = 1.0  # held-out pass@1 within 1 point of SFT: on 200 prompts that is 2 prompts, noise
SWING_WINDOW = 10  # steps in the rolling mean that the swings are measured around
# The retail demo (8 prompts x 8 completions a step) wanders by a residual std of ~0.09 around its
# rolling mean; past 0.15 single steps no longer show the trend and advantages are mostly noise.
SWING_STD = 0.15
LENGTH_GROWTH = 1.3  # completions 30% longer from the first to the last quarter is a drift, not noise
LENGTH_MIN_TOKENS = 4.0  # ... and at least 4 tokens longer: on 15-token answers 30% is 4-5 tokens
ACCURACY_FLAT = 0.02  # training correct rate up by at most 2 points: the extra length bought nothing
FORMAT_DROP_POINTS = 5.0  # a format-rate fall of 5 points on the held-out set is beyond sampling noise
# KL per token to the reference (nats): ~0.01 is a policy close to SFT; 0.1 is far from it, where the
# KL term (and the SFT model's knowledge) has stopped holding the policy. Growth: 5x within the run.
KL_HIGH = 0.1
KL_MIN = 0.02
KL_GROWTH = 5.0
# Mean token entropy of the policy (nats, metrics `entropy`). The retail demo's policy starts at 0.11-0.15
# and stays near 0.1 over 180 steps without a bonus; at entropy_coef 0.02 it rose 0.36 -> 1.58 with
# single steps past 3 nats (0.005: 0.30 -> 0.35). A fall to a quarter of the first quarter is a policy
# settling on one answer per prompt (its groups go flat); a rise to 3x and past 1 nat is a policy whose
# samples wander, which the bonus or the lr, not the task, drives.
ENTROPY_MIN = 0.02  # below this at the start there is nothing left to collapse (a near-greedy policy)
ENTROPY_COLLAPSE = 0.25
ENTROPY_GROWTH = 3.0
ENTROPY_HIGH = 1.0
# ... a fall counts only while the groups go flat: zero-variance share up by this much over the same quarters
# (a policy that learns its prompts also sheds entropy, and its groups go flat at 1: the correct rate says so)
ENTROPY_FLAT_RISE = 0.1
ZERO_VARIANCE_MOST = 0.5  # more than half the groups all right or all wrong: half the rollouts teach nothing
TOO_HARD_CORRECT = 0.3  # with most groups flat, a correct rate below this means they are flat at 0
TOO_EASY_CORRECT = 0.7  # ... and above this, flat at 1
# where the run counted its all-right flat groups (groups_zero_solved): at most this share of them all
# right means flat at 0, at least 1 minus it flat at 1; the count decides before the correct rate does
FLAT_SIDE_MINORITY = 1 / 3
# ... unless the training correct rate itself fell by this much from the first to the last quarter: then
# the groups went flat because the policy collapsed, and re-tiering would treat the symptom
COLLAPSE_DROP = 0.1
DEFAULT_MAX_REGRESSION = 2.0  # eval.max_regression's default, used when the run does not record its own
HELDOUT_DROP_POINTS = 2.0  # the same bar for the main held-out set: GRPO made the model worse than SFT
ROBUSTNESS_DROP_POINTS = 5.0  # robustness sets are small (tens of rows): 5 points is a few rows, not one
# no SFT and nearly every tiered prompt unsolved by the base: GRPO has almost no group with a right answer
NEARLY_ALL_TOO_HARD = 0.9
GRAD_SPIKE_RATIO = 10.0  # a step whose grad norm is 10x the run's median is an explosion, not a hard batch
GRAD_NORM_HIGH = 100.0  # past this, clipping turns every update into a unit step in a random direction
TOP_SAMPLES = 3  # highest-reward samples printed as evidence


@dataclass(frozen=True)
class Finding:
    """One symptom: `name` (slug), `severity` (critical | warning; info: seen, but no evidence of a
    problem), `title`, `evidence` lines with steps and numbers, and `change`: what to try."""

    name: str
    severity: str
    title: str
    evidence: tuple[str, ...]
    change: str

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "severity": self.severity,
            "title": self.title,
            "evidence": list(self.evidence),
            "change": self.change,
        }


@dataclass
class RunRecords:
    """What the rules read. metrics: GRPO metrics lines (step, reward_mean, correct_rate,
    completion_tokens_mean, kl, entropy, grad_norm, loss, zero_variance_fraction, groups_seen,
    groups_zero_variance). evals: eval results in model order, the SFT baseline first, each with `name`
    and `step` (and `by_prompt`: ids, greedy correctness, `answers`, `categories`). sft_rows, tiers: see
    the fields. regression: {set: {model name:
    greedy pass@1}}. robustness: {model name: share handled well}. samples: rows with `response`
    and `reward` (optionally `prompt`, `step`, `model`). transcripts: finished episodes as {model,
    transcript: verifiers.episode.Episode.to_dict()} (training/doctor_episodes.py reads them).
    read_only_tools: the environments' tools whose SQL is a SELECT, when the run's episodes are found.
    sampler: the curriculum.sampler GRPO drew with (summary.json, or a stopped run's newest checkpoint), when
    recorded.
    notes: what could not be read."""

    metrics: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    # rows SFT trained on (the sft stage's rows_used; 0: no worked rows, the base is the "SFT" model;
    # None: not recorded) and the tier stage's prompts per tier
    sft_rows: int | None = None
    tiers: dict[str, int] = field(default_factory=dict)
    regression: dict[str, dict[str, float]] = field(default_factory=dict)
    robustness: dict[str, float] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    transcripts: list[dict] = field(default_factory=list)
    read_only_tools: frozenset[str] = frozenset()
    # curriculum.sampler the GRPO stage drew with (summary.json or the newest checkpoint); None: not recorded
    sampler: str | None = None
    max_regression: float = DEFAULT_MAX_REGRESSION
    notes: list[str] = field(default_factory=list)


# ----- helpers -----------------------------------------------------------------------------------


def _series(metrics: list[dict], key: str) -> list[tuple[int, float]]:
    """(step, value) of one metric, finite values only (numbers_break reports the others)."""
    return [(int(m["step"]), float(m[key])) for m in metrics if _finite(m.get(key)) and "step" in m]


def _quarters(series: list[tuple[int, float]]) -> tuple[str, float, str, float] | None:
    """(first steps, first mean, last steps, last mean) over the first and last quarter."""
    if len(series) < MIN_STEPS:
        return None
    q = len(series) // 4
    first, last = series[:q], series[-q:]
    return (
        f"steps {first[0][0]}-{first[-1][0]}",
        statistics.fmean(v for _, v in first),
        f"steps {last[0][0]}-{last[-1][0]}",
        statistics.fmean(v for _, v in last),
    )


def _eval_change(rec: RunRecords, key: str) -> tuple[dict, dict, float] | None:
    """(baseline, last eval, change in points) of an eval metric; None without a checkpoint eval."""
    evals = [e for e in rec.evals if e.get(key) is not None]
    if len(evals) < 2:
        return None
    return evals[0], evals[-1], 100 * (float(evals[-1][key]) - float(evals[0][key]))


def zero_variance_share(metrics: list[dict]) -> tuple[float, int] | None:
    """The run's zero-variance share: zero-variance groups over every group scored, all logged steps
    pooled (refill rounds included), and how many groups that is. The same figure as the GRPO
    summary's and report.json's `zero_variance_fraction` when every step is logged (logging_steps 1):
    a step's `groups_*` counts cover single-reply and episode groups alike (training/grpo.py
    step_counts). None when the steps carry no group counts."""
    seen = sum(int(m.get("groups_seen") or 0) for m in metrics)
    flat = sum(int(m.get("groups_zero_variance") or 0) for m in metrics)
    return (flat / seen, seen) if seen else None


def _pts(x: float) -> str:
    return f"{100 * x:.1f}%"


def _clip(text: object, limit: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ----- the rules ---------------------------------------------------------------------------------


def reward_rises_eval_flat(rec: RunRecords) -> Finding | None:
    """Training reward rises while held-out pass@1 stays flat: memorization or a verifier loophole."""
    q, ev = _quarters(_series(rec.metrics, "reward_mean")), _eval_change(rec, "pass_at_1_greedy")
    if q is None or ev is None:
        return None
    s1, r1, s2, r2 = q
    base, last, delta = ev
    if r2 - r1 < REWARD_RISE or delta > EVAL_FLAT_POINTS:
        return None
    evidence = [
        f"training reward_mean {r1:.3f} ({s1}) -> {r2:.3f} ({s2}): {r2 - r1:+.3f}",
        f"held-out pass@1 greedy {_pts(base['pass_at_1_greedy'])} ({base['name']}) -> "
        f"{_pts(last['pass_at_1_greedy'])} ({last['name']}): {delta:+.1f} points",
    ]
    scored = [s for s in rec.samples if _finite(s.get("reward"))]
    latest = [s for s in scored if s.get("model") == last["name"]]  # the model the reward rose to, if sampled
    top = sorted(latest or scored, key=lambda s: -float(s["reward"]))
    for s in top[:TOP_SAMPLES]:
        where = ", ".join(str(s[k]) for k in ("model", "mode") if s.get(k)) or f"step {s.get('step', '?')}"
        evidence.append(
            f"high-reward sample ({where}, reward {float(s['reward']):.2f}): prompt "
            f"{_clip(s.get('prompt', ''), 60)!r} -> {_clip(s['response'], 140)!r}"
        )
    if rec.samples and not top:
        evidence.append("the samples files hold no rows with a numeric reward to rank")
    change = (
        "read the highest-reward completions for a verifier loophole (format-only credit, length, an answer "
        "that scores everywhere; the reward canaries list the known ones) and check that tiering and GRPO used "
        "rows SFT did not train on; until then trust the SFT model or the best checkpoint, not the last"
    )
    return Finding(
        "reward_rises_eval_flat",
        "warning",
        "training reward rises while held-out pass@1 is flat",
        tuple(evidence),
        change,
    )


def reward_swings(rec: RunRecords) -> Finding | None:
    """The per-step reward jumps around its own rolling mean: too few rollouts per step or a noisy reward."""
    series = _series(rec.metrics, "reward_mean")
    if len(series) < MIN_STEPS:
        return None
    values = [v for _, v in series]
    half = SWING_WINDOW // 2
    resid = [v - statistics.fmean(values[max(0, i - half) : i + half + 1]) for i, v in enumerate(values)]
    spread = statistics.pstdev(resid)
    if spread <= SWING_STD:
        return None
    jumps = sorted(((abs(b[1] - a[1]), a, b) for a, b in zip(series, series[1:])), key=lambda j: -j[0])
    _, a, b = jumps[0]
    groups = [m["groups_used"] for m in rec.metrics if m.get("groups_used") is not None]
    evidence = [
        f"reward_mean deviates from its {SWING_WINDOW}-step rolling mean by a std of {spread:.3f} over "
        f"{len(series)} logged steps (threshold {SWING_STD})",
        f"largest jump: step {a[0]} {a[1]:.3f} -> step {b[0]} {b[1]:.3f}",
    ]
    if groups:
        evidence.append(f"groups used per step: {statistics.fmean(groups):.1f} on average")
    change = (
        "raise training.grpo.num_generations (more completions per prompt) or prompts_per_step so each step "
        "averages over more rollouts; if the verifier's score is itself noisy (timeouts, flaky tests, "
        "partial credit), make it deterministic before training on it"
    )
    return Finding(
        "reward_swings", "warning", "training reward swings widely from step to step", tuple(evidence), change
    )


def length_grows(rec: RunRecords) -> Finding | None:
    """Completions get longer while accuracy does not: the reward pays for length, not for answers."""
    q = _quarters(_series(rec.metrics, "completion_tokens_mean"))
    acc = _quarters(_series(rec.metrics, "correct_rate"))
    if q is None:
        return None
    s1, l1, s2, l2 = q
    if l2 < LENGTH_GROWTH * l1 or l2 - l1 < LENGTH_MIN_TOKENS:
        return None
    if acc is not None and acc[3] - acc[1] > ACCURACY_FLAT:
        return None
    ev = _eval_change(rec, "pass_at_1_greedy")
    if ev is not None and ev[2] > EVAL_FLAT_POINTS:
        return None
    evidence = [f"completion tokens {l1:.1f} ({s1}) -> {l2:.1f} ({s2}): x{l2 / max(l1, 1e-9):.2f}"]
    if acc is not None:
        evidence.append(f"training correct_rate {acc[1]:.3f} -> {acc[3]:.3f}")
    if ev is not None:
        base, last, delta = ev
        evidence.append(
            f"held-out pass@1 greedy {delta:+.1f} points ({base['name']} -> {last['name']}); "
            f"eval length_mean {base.get('length_mean', float('nan')):.1f} -> "
            f"{last.get('length_mean', float('nan')):.1f} tokens"
        )
    change = (
        "enable verifiers.reward.length_penalty (or raise its max_penalty / lower target_tokens), and check "
        "that no reward part (format, process, keyword hits) grows with the response's length"
    )
    return Finding(
        "length_grows", "warning", "completions grow longer while accuracy does not", tuple(evidence), change
    )


def format_falls(rec: RunRecords) -> Finding | None:
    """The held-out format rate (the verifier could read an answer) fell against SFT."""
    ev = _eval_change(rec, "format_rate")
    if ev is None or ev[2] > -FORMAT_DROP_POINTS:
        return None
    base, last, delta = ev
    worst = min(rec.evals, key=lambda e: float(e.get("format_rate", 1.0)))
    evidence = [
        f"held-out format rate {_pts(base['format_rate'])} ({base['name']}) -> {_pts(last['format_rate'])} "
        f"({last['name']}): {delta:+.1f} points",
        f"lowest: {_pts(worst['format_rate'])} at {worst['name']}",
    ]
    change = (
        "raise verifiers.reward.format_weight, or make the format a hard requirement (a response the verifier "
        "cannot parse scores 0 whatever else it has); read a few unparsed samples to see the new format"
    )
    return Finding("format_falls", "warning", "the format rate falls", tuple(evidence), change)


def kl_grows(rec: RunRecords) -> Finding | None:
    """The KL to the reference grows fast: the policy is moving away from SFT quicker than it learns."""
    series = _series(rec.metrics, "kl")
    q = _quarters(series)
    if q is None:
        return None
    s1, k1, s2, k2 = q
    fast = k2 >= KL_MIN and (k1 <= 0 or k2 >= KL_GROWTH * k1)
    if k2 < KL_HIGH and not fast:
        return None
    peak = max(series, key=lambda p: p[1])
    evidence = [f"kl {k1:.4f} ({s1}) -> {k2:.4f} ({s2})", f"peak {peak[1]:.4f} at step {peak[0]}"]
    lr = _series(rec.metrics, "lr")
    if lr:
        evidence.append(f"peak lr {max(v for _, v in lr):.2e}")
    change = (
        "lower training.grpo.learning_rate (2-5x) or raise training.grpo.beta so the KL term holds the policy near SFT"
    )
    return Finding("kl_grows", "warning", "KL to the reference grows fast", tuple(evidence), change)


def entropy_drifts(rec: RunRecords) -> Finding | None:
    """The policy's token entropy collapses (one answer per prompt, flat groups) or blows up (noise)."""
    q = _quarters(_series(rec.metrics, "entropy"))
    if q is None:
        return None
    s1, e1, s2, e2 = q
    evidence = [f"mean token entropy {e1:.3f} ({s1}) -> {e2:.3f} ({s2}) nats"]
    zv = _quarters(_series(rec.metrics, "zero_variance_fraction"))
    if zv is not None:
        evidence.append(f"zero-variance groups {zv[1]:.0%} ({zv[0]}) -> {zv[3]:.0%} ({zv[2]})")
    correct = _quarters(_series(rec.metrics, "correct_rate"))
    flattening = zv is not None and zv[3] - zv[1] >= ENTROPY_FLAT_RISE
    learned = correct is not None and correct[3] >= TOO_EASY_CORRECT
    if e1 >= ENTROPY_MIN and e2 <= ENTROPY_COLLAPSE * e1 and flattening and not learned:
        if correct is not None:
            evidence.append(f"training correct rate {correct[1]:.3f} -> {correct[3]:.3f}")
        change = (
            "the policy is settling on one completion per prompt, so its groups stop disagreeing: add "
            "training.grpo.entropy_coef (or raise it; start near 0.005), lower training.grpo.learning_rate, or sample "
            "rollouts at a higher temperature (a spec's generation.temperature)"
        )
        return Finding("entropy_drifts", "warning", "policy entropy collapses", tuple(evidence), change)
    if e2 >= ENTROPY_HIGH and e2 >= ENTROPY_GROWTH * e1:
        length = _quarters(_series(rec.metrics, "completion_tokens_mean"))
        if length is not None:
            evidence.append(f"completion tokens {length[1]:.1f} -> {length[3]:.1f}")
        change = (
            "the policy's samples are spreading away from any one answer; unless held-out pass@1 rises with "
            "it, lower training.grpo.entropy_coef (or set it to 0) and training.grpo.learning_rate, and keep the rollout "
            "temperature at 1 or below"
        )
        return Finding("entropy_drifts", "warning", "policy entropy blows up", tuple(evidence), change)
    return None


def mostly_zero_variance(rec: RunRecords) -> Finding | None:
    """Most groups have every completion right or every one wrong: no advantage, nothing learned."""
    zv = _series(rec.metrics, "zero_variance_fraction")
    if len(zv) < MIN_STEPS:
        return None
    pooled = zero_variance_share(rec.metrics)
    share = pooled[0] if pooled else statistics.fmean(v for _, v in zv)
    if share <= ZERO_VARIANCE_MOST:
        return None
    correct = _series(rec.metrics, "correct_rate")
    rate = statistics.fmean(v for _, v in correct) if correct else None
    trend = _quarters(correct)
    # groups pooled over the steps metrics.jsonl logs (every step at logging_steps 1; a finished run's
    # report.json pools every step, and a stopped run's stage folder has no report); older logs without
    # group counts give the mean of the steps' shares, and say so
    steps = f"steps {zv[0][0]}-{zv[-1][0]}"
    evidence = [
        f"zero-variance groups: {share:.0%} of the {pooled[1]} groups scored over {steps}, refills included "
        "(pooled over the steps metrics.jsonl logs; a finished run's report.json zero_variance_fraction pools every step)"
        if pooled
        else f"zero-variance groups: {share:.0%} per step on average over {steps} (the steps log no group counts)"
    ]
    if rate is not None:
        evidence.append(
            f"training correct rate {rate:.3f} on average"
            + (f", {trend[1]:.3f} ({trend[0]}) -> {trend[3]:.3f} ({trend[2]})" if trend else "")
        )
    # which side the flat groups are on: counted where the run logged it, else read off the correct rate
    flat = sum(v for _, v in _series(rec.metrics, "groups_zero_variance"))
    solved = _series(rec.metrics, "groups_zero_solved")
    side = None
    if flat > 0 and solved:
        right = sum(v for _, v in solved) / flat
        evidence.append(f"of those groups {right:.0%} all right, {1 - right:.0%} not (in the logged steps)")
        side = "hard" if right <= FLAT_SIDE_MINORITY else "easy" if right >= 1 - FLAT_SIDE_MINORITY else "both"
    elif rate is not None:
        side = "hard" if rate < TOO_HARD_CORRECT else "easy" if rate > TOO_EASY_CORRECT else "both"
    if rec.evals and rec.evals[0].get("zero_variance_prompts") is not None:
        evidence.append(
            f"SFT eval: {_pts(rec.evals[0]['zero_variance_prompts'])} of held-out prompts all right or all wrong"
        )
    if rec.sft_rows == 0:
        change = (
            "there was no SFT (no worked rows), so the groups are flat because the base model cannot do the "
            "task, not because of the learning rate or stale tiers: see no_sft_too_hard for the choices"
        )
    elif trend is not None and trend[1] - trend[3] > COLLAPSE_DROP:
        change = (
            "the policy collapsed during training (its correct rate fell), which emptied the groups: lower "
            "training.grpo.learning_rate, restart from SFT or the best checkpoint; the tiers are not the cause"
        )
    elif rec.sampler == "uniform":
        change = (
            "the prompts were drawn uniformly (curriculum.sampler: uniform), which reads no tiers: "
            "sampler: quota draws the learnable tier first and re-tiers online"
            + ("; the flat groups are mostly all wrong, so more SFT may also be needed" if side == "hard" else "")
        )
    elif side == "hard":
        change = (
            "the groups are flat at 0: the task is too hard for this SFT model; train SFT longer or on more "
            "solutions, then re-tier (rlvrflow tier) so GRPO draws prompts it sometimes solves"
        )
    elif side == "easy":
        change = (
            "the groups are flat at 1: the prompts are too easy; re-tier (the tiers are stale after SFT "
            "changed) and give curriculum.weights.too_easy 0"
        )
    else:
        change = (
            "re-tier with the current SFT model (stale tiers put solved and hopeless prompts in 'learnable'); "
            "more SFT if most flat groups are all wrong"
        )
    return Finding("mostly_zero_variance", "warning", "most groups are zero-variance", tuple(evidence), change)


def answer_collapse(rec: RunRecords) -> Finding | None:
    """A checkpoint gives one answer to most held-out prompts (or to most of a category's) where that answer
    is mostly wrong: its hits there are the golds that equal the constant, not the task."""
    found = [(e, c) for e in rec.evals[1:] if (c := collapsed_answers(e.get("by_prompt"))) is not None]
    if not found:
        return None
    evidence = [collapse_line(e["name"], c) for e, c in found]
    last, c = found[-1]
    spread = ", ".join(f"{cat} {d} of {n}" for cat, (d, n) in c.distinct.items())
    evidence.append(f"distinct greedy answers per category at {last['name']}: {spread}")
    base = rec.evals[0].get("by_prompt") or {}
    if base.get("answers") and base.get("categories"):
        seen: dict[str, set] = {}
        for a, cat in zip(base["answers"], base["categories"]):
            seen.setdefault(str(cat), set()).add(str(a).strip())
        evidence.append(
            f"{rec.evals[0]['name']} for comparison: "
            + ", ".join(f"{cat} {len(seen.get(cat, ()))}" for cat in c.distinct)
        )
    if rec.sft_rows == 0:
        evidence.append("there was no SFT (no worked rows): GRPO started from the base model")
    change = (
        "do not ship this checkpoint for those categories, and read its gain there as the share of golds equal "
        "to the constant (compare with the best constant answer per category), not as skill. The policy found "
        "one answer that scores often enough to beat sampling anything else; give it something to learn "
        "from first: worked rows for SFT, or a base model that already solves some of these prompts"
        + ("" if rec.sft_rows == 0 else "; lower training.grpo.learning_rate or raise beta to hold it near SFT")
    )
    where = ", ".join(x.where for x in c.sets)
    return Finding(
        "answer_collapse",
        "critical" if c.critical else "warning",
        f"the model gives one answer, mostly wrong, to most prompts of: {where}",
        tuple(evidence),
        change,
    )


def no_sft_too_hard(rec: RunRecords) -> Finding | None:
    """No worked rows (SFT skipped) and the base solves almost no tiered prompt: GRPO has nothing to sharpen."""
    total = sum(int(v) for v in rec.tiers.values())
    hard = int(rec.tiers.get("too_hard", 0))
    if rec.sft_rows != 0 or not total or hard < NEARLY_ALL_TOO_HARD * total:
        return None
    evidence = [
        "SFT trained on 0 rows (no train row has a worked solution): the base model is the SFT model",
        f"tiering: {hard} of {total} prompts too hard for it (no correct sample)",
    ]
    pooled = zero_variance_share(rec.metrics)
    if pooled:
        evidence.append(f"zero-variance groups: {pooled[0]:.0%} of the {pooled[1]} groups scored")
    idle = sum(1 for m in rec.metrics if m.get("skipped"))
    if idle:
        evidence.append(f"{idle} of {len(rec.metrics)} GRPO steps updated nothing (no group had reward variance)")
    change = (
        "GRPO can only reinforce what the model already sometimes gets right; here it gets almost nothing "
        "right, so expect little, or a constant answer that matches frequent golds. Choices: log a worked "
        "reply (`solution`) for a few dozen rows per category so SFT runs (costs writing them); set "
        "verifiers.answer_only_targets: true (SFT on `Answer: <gold>` targets: teaches the format, not the "
        "working); or set training.model to a local instruct model that solves some of these prompts (costs "
        "its size in time and memory). Lowering the lr or re-tiering does not help here"
    )
    return Finding(
        "no_sft_too_hard",
        "critical",
        "no SFT, and the base model solves almost no training prompt",
        tuple(evidence),
        change,
    )


def heldout_falls(rec: RunRecords) -> Finding | None:
    """A checkpoint is worse than SFT on the main held-out set. With per-prompt scores, the drop's paired
    bootstrap interval decides: one that reaches zero is noise (an `info` finding), not a warning."""
    from rlvrflow.training.report import gain_interval

    ev = _eval_change(rec, "pass_at_1_greedy")
    if ev is None:
        return None
    base = rec.evals[0]
    worst = min(rec.evals[1:], key=lambda e: float(e.get("pass_at_1_greedy", 1.0)))
    drop = 100 * (float(base["pass_at_1_greedy"]) - float(worst["pass_at_1_greedy"]))
    if drop <= HELDOUT_DROP_POINTS:
        return None
    gap = gain_interval(base, worst)
    evidence = [
        f"held-out pass@1 greedy {_pts(base['pass_at_1_greedy'])} ({base['name']}) -> "
        f"{_pts(worst['pass_at_1_greedy'])} ({worst['name']}): -{drop:.1f} points"
        + (
            ""
            if gap is None
            else f" (95% interval {gap['low']:+.1f} to {gap['high']:+.1f} over {gap['prompts']} prompts)"
        ),
        "per model: " + ", ".join(f"{e['name']} {_pts(e['pass_at_1_greedy'])}" for e in rec.evals),
    ]
    if gap is not None and gap["high"] >= 0:
        return Finding(
            "heldout_falls",
            "info",
            "held-out pass@1 below the SFT baseline, within noise",
            tuple(evidence),
            "no change on this evidence: evaluate more held-out prompts "
            "(eval.max_prompts) or more seeds to tell a fall from noise",
        )
    change = (
        "lower training.grpo.learning_rate (a small policy loses held-out points at a few times the working lr), train "
        "fewer steps, and ship the best checkpoint (or SFT) rather than the last"
    )
    return Finding("heldout_falls", "warning", "held-out pass@1 falls below the SFT baseline", tuple(evidence), change)


def regression_drops(rec: RunRecords) -> Finding | None:
    """A regression set (general abilities outside the domain) dropped more than max_regression points."""
    base_name = rec.evals[0]["name"] if rec.evals else "sft"
    evidence = []
    for name, by_model in sorted(rec.regression.items()):
        base = by_model.get(base_name)
        if base is None:
            continue
        for model, score in by_model.items():
            if model != base_name and score is not None and 100 * (base - score) > rec.max_regression:
                evidence.append(
                    f"{name}: {_pts(base)} ({base_name}) -> {_pts(score)} ({model}): "
                    f"-{100 * (base - score):.1f} points (allowed {rec.max_regression:g})"
                )
    if not evidence:
        return None
    change = (
        "the model forgets general abilities: train fewer steps (or ship an earlier checkpoint), lower "
        "training.grpo.learning_rate, raise beta, or mix general-domain rows into SFT and the GRPO prompts"
    )
    return Finding("regression_drops", "warning", "a regression set drops", tuple(evidence), change)


def robustness_drops(rec: RunRecords) -> Finding | None:
    """Fewer unanswerable requests get a refusal or a question than at SFT."""
    base_name = rec.evals[0]["name"] if rec.evals else "sft"
    base = rec.robustness.get(base_name)
    if base is None:
        return None
    worse = [
        (m, s)
        for m, s in rec.robustness.items()
        if m != base_name and s is not None and 100 * (base - s) > ROBUSTNESS_DROP_POINTS
    ]
    if not worse:
        return None
    evidence = [f"robustness (declines or asks) {_pts(base)} ({base_name}) -> {_pts(s)} ({m})" for m, s in worse]
    change = (
        "GRPO rewarded confident answers everywhere: add rows whose right answer is to ask (the refusal "
        "verifier) to the training prompts, or lower lr / train fewer steps"
    )
    return Finding(
        "robustness_drops",
        "warning",
        "robustness falls: more confident answers to unanswerable requests",
        tuple(evidence),
        change,
    )


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def numbers_break(rec: RunRecords) -> Finding | None:
    """NaN or infinite loss / reward / KL / entropy / grad norm, or a grad norm that explodes."""
    evidence = []
    for key in ("loss", "reward_mean", "kl", "entropy", "grad_norm"):
        bad = [m["step"] for m in rec.metrics if key in m and m[key] is not None and not _finite(m[key])]
        if bad:
            evidence.append(f"{key} is NaN or infinite at {len(bad)} step(s), first at step {bad[0]}")
    norms = [(s, v) for s, v in _series(rec.metrics, "grad_norm") if math.isfinite(v)]
    if len(norms) >= MIN_STEPS:
        median = statistics.median(v for _, v in norms)
        spikes = [(s, v) for s, v in norms if v > GRAD_NORM_HIGH or (median > 0 and v > GRAD_SPIKE_RATIO * median)]
        if spikes:
            s, v = max(spikes, key=lambda p: p[1])
            evidence.append(
                f"grad norm {v:.3g} at step {s} against a median of {median:.3g} "
                f"({len(spikes)} step(s) above {GRAD_SPIKE_RATIO:g}x the median or {GRAD_NORM_HIGH:g})"
            )
    if not evidence:
        return None
    change = (
        "lower training.grpo.learning_rate and keep max_grad_norm at 1.0; with float16 switch to bfloat16; a NaN "
        "reward means a verifier or reward part returned NaN: score a few completions by hand"
    )
    return Finding("numbers_break", "critical", "loss, reward or gradients break", tuple(evidence), change)


RULES: tuple[Callable[[RunRecords], Finding | None], ...] = (
    numbers_break,
    answer_collapse,
    no_sft_too_hard,
    reward_rises_eval_flat,
    heldout_falls,
    regression_drops,
    robustness_drops,
    reward_swings,
    length_grows,
    format_falls,
    kl_grows,
    entropy_drifts,
    mostly_zero_variance,
)
