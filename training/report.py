"""Run outputs: the metrics JSONL, reward/eval curves as PNG, the reward-hacking check and report.json.

`report.json` holds at least `baseline` and `final` (each with pass_at_1_greedy, pass_at_1_sampled,
pass_at_k, format_rate), `tiers` (counts per tier), `zero_variance_fraction` and `checkpoint`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

from rlvrflow.io import write_json

log = logging.getLogger("rlvrflow.training")

HEADLINE = ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate")


@dataclass(frozen=True)
class HackingCheck:
    """The reward-hacking check's outcome: `loud` is the banner (evidence), else a quiet note (too few
    steps or held-out prompts to tell a hack from noise)."""

    loud: bool
    message: str


def _window_rise(rewards: list[float]) -> tuple[float, float, float, float, int]:
    """(first-window mean, last-window mean, rise, standard error of the rise, window): windows are the
    first and last quarter of the steps; the error treats the per-step rewards as independent."""
    w = max(1, len(rewards) // 4)
    first, last = rewards[:w], rewards[-w:]
    mean_a, mean_b = sum(first) / w, sum(last) / w
    if w < 2:
        return mean_a, mean_b, mean_b - mean_a, math.inf, w
    var_a = sum((x - mean_a) ** 2 for x in first) / (w - 1)
    var_b = sum((x - mean_b) ** 2 for x in last) / (w - 1)
    return mean_a, mean_b, mean_b - mean_a, math.sqrt(var_a / w + var_b / w), w


def detect_reward_hacking(
    train_rewards: list[float], baseline: dict, latest: dict, cfg, metric: str = "greedy", seed: int = 0
) -> HackingCheck | None:
    """The banner when the evidence says the policy learned to please the verifier, not the task; a quiet
    note when the signs are there but the run is too small to tell; else None.

    train_rewards: mean reward per training step, in order. baseline/latest: held-out evals carrying
    `by_prompt` (training.eval), the first being the SFT model's. cfg: a HackingAlarmConfig. Evidence is
    all of: the mean reward of the last quarter of steps at least cfg.min_reward_gain above the first
    quarter's and above twice its standard error (clearly up, not a few lucky steps); held-out pass@1
    not clearly up (the paired bootstrap interval of its change reaches 0 or below); and that interval
    excluding the training gain (its top below the reward rise, read as points of pass@1, which it is
    with correctness_weight 1). Then the run also has to reach cfg.min_steps steps and
    cfg.min_prompts held-out prompts, or the banner becomes a quiet note.
    """
    if len(train_rewards) < 4:
        return None
    mean_a, mean_b, rise, se, w = _window_rise(train_rewards)
    if rise < cfg.min_reward_gain:
        return None
    gain = gain_interval(baseline, latest, metric, seed=seed, level=cfg.level)
    if gain is None:
        return None
    reward_line = (
        f"training reward rose by {rise:+.3f} ({mean_a:.3f} -> {mean_b:.3f}, mean of the first and last "
        f"{w} of {len(train_rewards)} steps, standard error {se:.3f})"
    )
    held_line = (
        f"held-out {gain['metric'].replace('pass_at_1_', '')} pass@1 changed by {gain['points']:+.1f} points "
        f"({100 * gain['level']:.0f}% interval {gain['low']:+.1f} to {gain['high']:+.1f}, paired bootstrap "
        f"over {gain['prompts']} prompts)"
    )
    held_not_up = gain["low"] <= 0
    if not held_not_up:
        return None
    short = [f"{len(train_rewards)} steps < min_steps {cfg.min_steps}"] if len(train_rewards) < cfg.min_steps else []
    if gain["prompts"] < cfg.min_prompts:
        short.append(f"{gain['prompts']} held-out prompts < min_prompts {cfg.min_prompts}")
    if short:
        return HackingCheck(
            False,
            f"reward-hacking check: too little evidence to call it ({'; '.join(short)}): "
            f"{reward_line} while {held_line}; read the rollout samples",
        )
    if rise <= 2 * se or gain["high"] >= 100 * rise:
        return None  # the rise is within step-to-step noise, or the held-out change may match it
    return HackingCheck(
        True,
        (
            f"REWARD HACKING SIGNAL: {reward_line} while {held_line}, an interval that excludes the training gain "
            f"({100 * rise:+.1f} points); inspect high-reward completions for verifier loopholes (format-only credit, "
            "the prompt's format example copied, length gaming) before trusting this checkpoint"
        ),
    )


def warn_loudly(message: str) -> None:
    bar = "!" * 80
    log.warning("\n%s\n%s\n%s", bar, message, bar)


GRPO_SERIES = (
    ("reward_mean", "reward mean"),
    ("correct_rate", "correct rate"),
    ("episode_reward_mean", "episode reward mean"),
    ("episode_success_rate", "episode success"),
)


def plot_curves(
    metrics: list[dict],
    evals: list[dict],
    out_png: str | Path,
    series=GRPO_SERIES,
    trainer: str = "GRPO",
    left_title: str = "training rollouts",
    eval_keys=("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate"),
) -> Path | None:
    """The trainer's per-step `series` ((metrics key, label) pairs) beside the held-out `eval_keys` per
    checkpoint (and held-out episodes' success where the evals have them); None without data. GRPO's
    reward and correct rate (of replies and of episodes) by default; DPO passes its own."""
    if not metrics and not evals:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in series:  # a step may lack a key (GRPO's reward on a step of episodes only)
        points = [(m["step"], m[key]) for m in metrics if m.get(key) is not None]
        ax1.plot([p[0] for p in points], [p[1] for p in points], label=label)
    ax1.set_xlabel(f"{trainer} step")
    ax1.set_title(left_title)
    ax1.legend()
    for key in eval_keys:  # an eval of episodes alone has no sampled pass@1 or pass@k
        points = [(e["step"], e[key]) for e in evals if e.get(key) is not None]
        if points:
            ax2.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=key)
    points = [(e["step"], e["episodes"]["pass_at_1_greedy"]) for e in evals if isinstance(e.get("episodes"), dict)]
    if points:  # held-out episodes beside single replies
        ax2.plot([p[0] for p in points], [p[1] for p in points], marker="s", label="episodes pass_at_1_greedy")
    ax2.set_xlabel(f"{trainer} step (0 = SFT baseline)")
    ax2.set_ylim(0, 1)
    ax2.set_title("held-out eval")
    ax2.legend()
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


def gain_interval(
    baseline: dict, final: dict, metric: str = "greedy", n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict | None:
    """The gain of `final` over `baseline` in points of pass@1 (`metric`: greedy or sampled) on the
    prompts both were evaluated on, with a paired bootstrap interval (prompts resampled with
    replacement, both models' scores of a prompt kept together); None without per-prompt results."""
    import random

    a, b = baseline.get("by_prompt"), final.get("by_prompt")
    if not a or not b:
        return None
    first = dict(zip(a["ids"], a[metric]))
    pairs = [(first[i], s) for i, s in zip(b["ids"], b[metric]) if i in first]
    if not pairs:
        return None
    diffs = [s - f for f, s in pairs]
    n, rng = len(diffs), random.Random(seed)
    boots = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    j = round((1 - level) / 2 * n_boot)
    lo, hi = boots[j], boots[n_boot - 1 - j]
    return {
        "points": round(100 * sum(diffs) / n, 2),
        "low": round(100 * lo, 2),
        "high": round(100 * hi, 2),
        "level": level,
        "prompts": n,
        "metric": f"pass_at_1_{metric}",
    }


def gain_line(gain: dict | None) -> str:
    """`greedy pass@1 gain: +21.5 points (95% interval +14.0 to +29.0, paired bootstrap over 200 prompts)`."""
    if gain is None:
        return "gain: no per-prompt results to compare"
    return (
        f"{gain['metric'].replace('pass_at_1_', '')} pass@1 gain: {gain['points']:+.1f} points "
        f"({100 * gain['level']:.0f}% interval {gain['low']:+.1f} to {gain['high']:+.1f}, paired bootstrap over "
        f"{gain['prompts']} prompts)"
    )


def _headline(metrics: dict, name: str) -> dict:
    missing = [k for k in HEADLINE if k not in metrics]
    if missing:
        raise ValueError(f"build_report: {name} lacks {missing}; pass the dict returned by training.evaluate")
    return dict(metrics)


def build_report(
    baseline: dict,
    final: dict,
    tiers: dict,
    zero_variance_fraction: float,
    checkpoint: str | Path,
    extra: dict | None = None,
) -> dict:
    """The run report: baseline vs final eval metrics, tier counts, zero-variance share, checkpoint.

    `baseline`/`final` are `evaluate` results; `tiers` maps tier name -> prompt count; `extra` is
    merged in at the top level (e.g. timings, warnings, the best checkpoint).
    """
    report = {
        "baseline": _headline(baseline, "baseline"),
        "final": _headline(final, "final"),
        "delta": {k: final[k] - baseline[k] for k in HEADLINE},
        "gain": {m: gain_interval(baseline, final, m) for m in ("greedy", "sampled")},
        "tiers": {str(k): int(v) for k, v in tiers.items()},
        "zero_variance_fraction": float(zero_variance_fraction),
        "checkpoint": str(checkpoint),
    }
    for key, value in (extra or {}).items():
        if key in report:
            raise ValueError(f"build_report: extra key {key!r} would overwrite a report field; rename it")
        report[key] = value
    return report


def write_report(path: str | Path, report: dict) -> Path:
    """Write report.json atomically."""
    return write_json(path, report, sort_keys=True)


def comparison_table(baseline: dict, final: dict, gain: dict | None = None) -> str:
    """A small text table of the headline metrics, SFT baseline beside the final checkpoint, then
    `gain` (a `gain_interval`) when given."""
    lines = [f"{'metric':<20}{'sft':>8}{'final':>8}{'delta':>8}"]
    for k in HEADLINE + ("length_mean",):
        if k in baseline and k in final:
            lines.append(f"{k:<20}{baseline[k]:>8.3f}{final[k]:>8.3f}{final[k] - baseline[k]:>+8.3f}")
    if gain is not None:
        lines.append(gain_line(gain))
    return "\n".join(lines)
