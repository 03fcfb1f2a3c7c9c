"""The run doctor's episode rules: what goes wrong when the policy works an environment's tools.

Each reads `RunRecords` (training/doctor_rules.py) and returns a `Finding` or None, like the other
rules; training/doctor.py runs them after those. What they read:

    metrics      the per-step keys of training.episodes.episode_stats: turns_mean, malformed_rate,
                 max_turns_rate, tool_calls_mean, success_rate. The chain's GRPO stage logs them with an
                 `episode_` prefix (episode_turns_mean, ...) beside the single-reply correct_rate, on the
                 steps that drew episodes; runs of the earlier episode-only trainer logged them bare. A
                 step's `episode_<key>` is read when present, else `<key>`; success falls back to correct_rate only in a run with no
                 `episode_` key at all (in a mixed run correct_rate is the single replies' rate).
    evals        a model's episode figures: its eval result's `episodes` (the evaluate stage, GRPO's
                 held-out evals beside single replies), or the result itself when it holds those keys,
                 bare or `episode_`-prefixed (an agent-only GRPO run's evals.jsonl, whose headline they
                 are); the episode count is `n_prompts` or `prompts`
    transcripts  finished episodes ({model, transcript: verifiers.episode.Episode.to_dict()}) from the
                 samples files of the evaluate stage and of GRPO's held-out evals
    read_only_tools  tools whose SQL is a SELECT (from the run's environments), when known

turns_grow       assistant turns per episode up by x1.3 and half a turn while success stays flat
tool_loops       episodes that repeat a call (tool and arguments) with nothing changed in between, or
                 repeat a call that failed
malformed_rises  the share of episodes with a malformed call up by 10 points (training, or held out
                 on 20+ episodes with 2+ more such episodes)
turn_limit_stops a fifth or more of the episodes end at max_turns, unfinished (held out: 2+ of 20+)
"""

from __future__ import annotations

import json
from collections import Counter

from rlvrflow.training.doctor_rules import Finding, RunRecords, _finite, _pts, _quarters

TURNS_GROWTH = 1.3  # 30% more turns from the first to the last quarter is a drift, not noise
TURNS_MIN = 0.5  # ... and half a turn: on 2-turn episodes one episode in two takes an extra turn
SUCCESS_FLAT = 0.02  # success up by at most 2 points: the extra turns bought nothing
LOOP_SHARE = 0.2  # a fifth of a model's episodes repeat a call: a habit, not one odd episode
LOOP_MIN_EPISODES = 2
MALFORMED_RISE = 0.10  # 10 more episodes in 100 with a call that does not parse or fails its schema
MAX_TURNS_SHARE = 0.2  # a fifth of the episodes never reach a final reply
# held out, a share is read only on this many episodes, and only when this many episodes make it: on
# 5 episodes one episode is 20 points
HELD_MIN_EPISODES = 20
HELD_MIN_COUNT = 2
PREFIX = "episode_"  # the chain's GRPO stage logs the episode figures under this prefix


def _steps(metrics: list[dict], key: str) -> list[tuple[int, float]]:
    """(step, value) of an episode figure: a step's `episode_<key>` when it has one, else `<key>`."""
    out = []
    for m in metrics:
        value = m.get(PREFIX + key, m.get(key))
        if "step" in m and _finite(value):
            out.append((int(m["step"]), float(value)))
    return out


def _series(rec: RunRecords, key: str):
    return _quarters(_steps(rec.metrics, key))


def _success(rec: RunRecords):
    q = _series(rec, "success_rate")
    if q is not None or any(k.startswith(PREFIX) for m in rec.metrics for k in m):
        return q  # in a run with episode_ keys, correct_rate is the single replies' rate
    return _quarters(_steps(rec.metrics, "correct_rate"))


def _episode_figures(result: dict) -> dict | None:
    """A model's episode figures: its `episodes`, or its own keys, bare or `episode_`-prefixed."""
    if isinstance(result.get("episodes"), dict) and result["episodes"]:
        return result["episodes"]
    keys = ("turns_mean", "malformed_rate", "max_turns_rate")
    if any(PREFIX + k in result for k in keys):
        sized = {k: result[k] for k in ("n_prompts", "prompts") if k in result}
        return sized | {k[len(PREFIX) :]: v for k, v in result.items() if k.startswith(PREFIX)}
    return result if any(k in result for k in keys) else None


def _eval_figures(rec: RunRecords, key: str) -> list[tuple[str, float, int | None]]:
    """(model name, figure, episodes played or None) of every eval that has the episode figure `key`."""
    out = []
    for e in rec.evals:
        fig = _episode_figures(e)
        if fig is not None and _finite(fig.get(key)):
            n = fig.get("n_prompts", fig.get("prompts"))
            out.append((str(e.get("name")), float(fig[key]), int(n) if _finite(n) else None))
    return out


def _count(rate: float, n: int | None) -> int:
    return 0 if n is None else round(rate * n)


def _enough(n: int | None) -> bool:
    return n is not None and n >= HELD_MIN_EPISODES


def turns_grow(rec: RunRecords) -> Finding | None:
    """Episodes take more turns while success does not rise: the turns pay for nothing."""
    q = _series(rec, "turns_mean")
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
    calls = _series(rec, "tool_calls_mean")
    if calls is not None:
        evidence.append(f"tool calls per episode {calls[1]:.2f} -> {calls[3]:.2f}")
    held = _eval_figures(rec, "turns_mean")
    if len(held) >= 2:
        evidence.append(f"held-out turns {held[0][1]:.2f} ({held[0][0]}) -> {held[-1][1]:.2f} ({held[-1][0]})")
    change = (
        "lower the environment's max_turns (verifiers.rules[].environment) or raise "
        "verifiers.reward.turn_penalty.per_turn (default 0.02 a message past free_turns 3, at most 0.2); read "
        "the transcripts for calls that repeat (tool_loops) or results the policy ignores"
    )
    return Finding(
        "turns_grow", "warning", "episodes take more turns while success does not rise", tuple(evidence), change
    )


def _repeated_call(transcript: dict, read_only: frozenset[str] = frozenset()) -> tuple[str, int] | None:
    """The call (tool and arguments) an episode repeated most with nothing changed in between, and how
    many times it made it; None when it repeated none. A repeat is the same call again with no
    state-changing call since it (a successful call to a tool not in `read_only`: when a tool's SQL is
    unknown, any other call may have changed what it reads), or the same call again after it failed.
    Reading an order back after a refund is a check, not a loop."""
    since_change: set[str] = set()  # the calls made since the last state-changing one
    failed: set[str] = set()
    repeats: Counter = Counter()
    for r in transcript.get("tool_runs") or []:
        call = f"{r.get('name')}({json.dumps(r.get('arguments'), sort_keys=True)})"
        if call in since_change or call in failed:
            repeats[call] += 1
        if r.get("ok") is False:
            failed.add(call)
        elif r.get("name") not in read_only and call not in since_change:
            since_change = set()
        since_change.add(call)
    if not repeats:
        return None
    call, n = repeats.most_common(1)[0]
    return call, n + 1


def tool_loops(rec: RunRecords) -> Finding | None:
    """A fifth of a model's episodes repeat a call with nothing changed in between, or a failed call."""
    by_model: dict[str, list[dict]] = {}
    for t in rec.transcripts:
        by_model.setdefault(str(t.get("model")), []).append(t["transcript"])
    evidence = []
    for model, episodes in by_model.items():
        looped = [(r, e) for e in episodes if (r := _repeated_call(e, rec.read_only_tools)) is not None]
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
    q = _series(rec, "malformed_rate")
    if q is not None and q[3] - q[1] >= MALFORMED_RISE:
        evidence.append(f"training episodes with a malformed call {_pts(q[1])} ({q[0]}) -> {_pts(q[3])} ({q[2]})")
    held = _eval_figures(rec, "malformed_rate")
    if len(held) >= 2:
        (first, a, n_a), (last, b, n_b) = held[0], held[-1]
        more = _count(b, n_b) - _count(a, n_b if n_a is None else n_a)  # the same episodes, when one lacks its size
        if b - a >= MALFORMED_RISE and _enough(n_b) and more >= HELD_MIN_COUNT:
            evidence.append(
                f"held-out episodes with a malformed call {_pts(a)} ({first}) -> {_pts(b)} ({last}; "
                f"{_count(b, n_b)} of {n_b})"
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
    q = _series(rec, "max_turns_rate")
    if q is not None and q[3] >= MAX_TURNS_SHARE:
        evidence.append(f"training episodes stopped at max_turns: {_pts(q[3])} ({q[2]}; {_pts(q[1])} at {q[0]})")
    held = _eval_figures(rec, "max_turns_rate")
    if held:
        name, share, n = held[-1]
        if share >= MAX_TURNS_SHARE and _enough(n) and _count(share, n) >= HELD_MIN_COUNT:
            evidence.append(
                f"held-out episodes stopped at max_turns: {_pts(share)} ({name}; {_count(share, n)} of {n})"
            )
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
