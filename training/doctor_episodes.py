"""The run doctor's episode rules: what goes wrong when the policy works an environment's tools.

Each reads `RunRecords` (training/doctor_rules.py) and returns a `Finding` or None, like the other
rules; training/doctor.py runs them after those. What they read:

    metrics      the per-step keys of training.episodes.episode_stats, bare: turns_mean, malformed_rate,
                 max_turns_rate, tool_calls_mean, success_rate (correct_rate when a step lacks it)
    evals        a model's episode figures: its eval result's `episodes` (the evaluate stage), or the
                 result itself when it holds those keys (episode GRPO's evals.jsonl)
    transcripts  finished episodes ({model, transcript: verifiers.episode.Episode.to_dict()}) from the
                 samples files of the evaluate stage and of episode GRPO

turns_grow       assistant turns per episode up by x1.3 and half a turn while success stays flat
tool_loops       episodes that make the same call (tool and arguments) twice or more
malformed_rises  the share of episodes with a malformed call up by 10 points (training or held out)
turn_limit_stops a fifth or more of the episodes end at max_turns, unfinished
"""

from __future__ import annotations

import json
from collections import Counter

from rlvrflow.training.doctor_rules import Finding, RunRecords, _pts, _quarters, _series

TURNS_GROWTH = 1.3  # 30% more turns from the first to the last quarter is a drift, not noise
TURNS_MIN = 0.5  # ... and half a turn: on 2-turn episodes one episode in two takes an extra turn
SUCCESS_FLAT = 0.02  # success up by at most 2 points: the extra turns bought nothing
LOOP_SHARE = 0.2  # a fifth of a model's episodes repeat a call: a habit, not one odd episode
LOOP_MIN_EPISODES = 2
MALFORMED_RISE = 0.10  # 10 more episodes in 100 with a call that does not parse or fails its schema
MAX_TURNS_SHARE = 0.2  # a fifth of the episodes never reach a final reply


def _episode_figures(result: dict) -> dict | None:
    if result.get("episodes"):
        return result["episodes"]
    return result if any(k in result for k in ("turns_mean", "malformed_rate", "max_turns_rate")) else None


def _eval_figures(rec: RunRecords, key: str) -> list[tuple[str, float]]:
    """(model name, figure) of every eval that has the episode figure `key`, in model order."""
    out = []
    for e in rec.evals:
        fig = _episode_figures(e)
        if fig is not None and fig.get(key) is not None:
            out.append((str(e.get("name")), float(fig[key])))
    return out


def _success(rec: RunRecords):
    return _quarters(_series(rec.metrics, "success_rate")) or _quarters(_series(rec.metrics, "correct_rate"))


def turns_grow(rec: RunRecords) -> Finding | None:
    """Episodes take more turns while success does not rise: the turns pay for nothing."""
    q = _quarters(_series(rec.metrics, "turns_mean"))
    if q is None:
        return None
    s1, t1, s2, t2 = q
    if t2 < TURNS_GROWTH * t1 or t2 - t1 < TURNS_MIN:
        return None
    ok = _success(rec)
    if ok is not None and ok[3] - ok[1] > SUCCESS_FLAT:
        return None
    evidence = [f"assistant turns per episode {t1:.2f} ({s1}) -> {t2:.2f} ({s2}): x{t2 / max(t1, 1e-9):.2f}"]
    if ok is not None:
        evidence.append(f"training success {_pts(ok[1])} -> {_pts(ok[3])}")
    calls = _quarters(_series(rec.metrics, "tool_calls_mean"))
    if calls is not None:
        evidence.append(f"tool calls per episode {calls[1]:.2f} -> {calls[3]:.2f}")
    held = _eval_figures(rec, "turns_mean")
    if len(held) >= 2:
        evidence.append(f"held-out turns {held[0][1]:.2f} ({held[0][0]}) -> {held[-1][1]:.2f} ({held[-1][0]})")
    change = (
        "raise the episode reward's turn penalty (per_turn, or lower free_turns), or lower the environment's "
        "max_turns; read the transcripts for calls that repeat (tool_loops) or results the policy ignores"
    )
    return Finding(
        "turns_grow", "warning", "episodes take more turns while success does not rise", tuple(evidence), change
    )


def _repeated_call(transcript: dict) -> tuple[str, int] | None:
    """The call (tool and arguments) an episode made most often, when it made it twice or more."""
    runs = transcript.get("tool_runs") or []
    counts = Counter(f"{r.get('name')}({json.dumps(r.get('arguments'), sort_keys=True)})" for r in runs)
    if not counts:
        return None
    call, n = counts.most_common(1)[0]
    return (call, n) if n >= 2 else None


def tool_loops(rec: RunRecords) -> Finding | None:
    """The same call, tool and arguments, made twice or more in one episode by a fifth of a model's episodes."""
    by_model: dict[str, list[dict]] = {}
    for t in rec.transcripts:
        by_model.setdefault(str(t.get("model")), []).append(t["transcript"])
    evidence = []
    for model, episodes in by_model.items():
        looped = [(r, e) for e in episodes if (r := _repeated_call(e)) is not None]
        if len(looped) < LOOP_MIN_EPISODES or len(looped) < LOOP_SHARE * len(episodes):
            continue
        (call, n), worst = max(looped, key=lambda x: x[0][1])
        stops = Counter(e.get("stop") for _, e in looped)
        evidence.append(
            f"{model}: {len(looped)} of {len(episodes)} episodes repeat a call, e.g. {call[:160]} {n} times in one "
            f"episode; they ended by {dict(stops)}"
        )
    if not evidence:
        return None
    change = (
        "the policy calls a tool again instead of reading its result: check that tool results reach the "
        "prompt in a form the model reads (the episode format, max_result_rows), add worked transcripts that "
        "use a result once, and keep a turn penalty so a loop costs reward"
    )
    return Finding(
        "tool_loops", "warning", "tools are called in loops (the same call repeated)", tuple(evidence), change
    )


def malformed_rises(rec: RunRecords) -> Finding | None:
    """More episodes with a malformed call (bad JSON, an unknown tool, arguments that fail the schema)."""
    evidence = []
    q = _quarters(_series(rec.metrics, "malformed_rate"))
    if q is not None and q[3] - q[1] >= MALFORMED_RISE:
        evidence.append(f"training episodes with a malformed call {_pts(q[1])} ({q[0]}) -> {_pts(q[3])} ({q[2]})")
    held = _eval_figures(rec, "malformed_rate")
    if len(held) >= 2 and held[-1][1] - held[0][1] >= MALFORMED_RISE:
        evidence.append(
            f"held-out episodes with a malformed call {_pts(held[0][1])} ({held[0][0]}) -> "
            f"{_pts(held[-1][1])} ({held[-1][0]})"
        )
    if not evidence:
        return None
    change = (
        "read the tool messages named `error` in the transcripts to see which check fails; raise the episode "
        "reward's format_weight, check that generation stops where a message ends (the format's stop string), "
        "and that max_new_tokens leaves room for a whole <tool_call>"
    )
    return Finding("malformed_rises", "warning", "malformed tool calls are rising", tuple(evidence), change)


def turn_limit_stops(rec: RunRecords) -> Finding | None:
    """A fifth or more of the episodes end at the environment's max_turns without a final reply."""
    evidence = []
    q = _quarters(_series(rec.metrics, "max_turns_rate"))
    if q is not None and q[3] >= MAX_TURNS_SHARE:
        evidence.append(f"training episodes stopped at max_turns: {_pts(q[3])} ({q[2]}; {_pts(q[1])} at {q[0]})")
    held = _eval_figures(rec, "max_turns_rate")
    if held and held[-1][1] >= MAX_TURNS_SHARE:
        evidence.append(f"held-out episodes stopped at max_turns: {_pts(held[-1][1])} ({held[-1][0]})")
    if not evidence:
        return None
    change = (
        "an episode cut at max_turns scores no format and usually no outcome: raise the environment's "
        "max_turns when the tasks need more steps, else look for loops (tool_loops) and teach the final "
        "reply with worked transcripts that end in one"
    )
    return Finding(
        "turn_limit_stops", "warning", "episodes stop at the turn limit, unfinished", tuple(evidence), change
    )


EPISODE_RULES = (turns_grow, tool_loops, malformed_rises, turn_limit_stops)
