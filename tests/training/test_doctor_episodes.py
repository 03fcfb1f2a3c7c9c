"""The run doctor's episode rules (training/doctor_episodes.py): each fires on a synthetic episode run
that shows its symptom and stays silent on a healthy one; an episode GRPO folder on disk is read whole
(metrics, evals, the transcripts in samples/)."""

from __future__ import annotations

import json

import pytest

from rlvrflow.training import doctor_episodes as E
from rlvrflow.training.doctor import diagnose, load_records
from rlvrflow.training.doctor_rules import RunRecords

STEPS = 40


def metrics(**series) -> list[dict]:
    """STEPS lines of episode GRPO's metrics (episode_stats' bare keys); keywords replace a series."""
    healthy = {
        "reward_mean": lambda s: 0.3 + 0.01 * s,
        "success_rate": lambda s: 0.2 + 0.01 * s,
        "correct_rate": lambda s: 0.2 + 0.01 * s,
        "turns_mean": lambda s: 3.0 + 0.1 * (s % 2),
        "tool_calls_mean": lambda s: 2.0,
        "malformed_rate": lambda s: max(0.0, 0.2 - 0.005 * s),
        "max_turns_rate": lambda s: 0.02,
        "format_rate": lambda s: 0.8,
    }
    healthy.update(series)
    return [{"step": s, **{k: f(s) for k, f in healthy.items()}} for s in range(1, STEPS + 1)]


def transcript(calls: list[tuple[str, dict]], stop: str = "final_reply") -> dict:
    return {
        "messages": [{"role": "user", "content": "Refund the shipping of order 4821."}],
        "sources": ["prompt"],
        "stop": stop,
        "tool_runs": [{"name": n, "arguments": a, "ok": True, "result": "{}"} for n, a in calls],
        "bad_calls": 0,
        "end_state": [],
        "verdict": {"status": "wrong", "score": 0.0},
    }


GOOD = [("get_order", {"order_id": 4821}), ("refund", {"order_id": 4821, "amount": 7})]
LOOP = [("get_order", {"order_id": 4821})] * 4


def episode_eval(name: str, **figures) -> dict:
    base = {"pass_at_1_greedy": 0.3, "turns_mean": 3.0, "malformed_rate": 0.05, "max_turns_rate": 0.0}
    return {"name": name, "pass_at_1_greedy": 0.5, "episodes": {**base, **figures}}


def healthy(**changes) -> RunRecords:
    rec = RunRecords(
        metrics=metrics(),
        evals=[episode_eval("sft"), episode_eval("step_000040", pass_at_1_greedy=0.6)],
        transcripts=[{"model": "step_000040", "transcript": transcript(GOOD)} for _ in range(6)],
    )
    for key, value in changes.items():
        setattr(rec, key, value)
    return rec


def names(rec: RunRecords) -> set[str]:
    return {f.name for f in (rule(rec) for rule in E.EPISODE_RULES) if f is not None}


def test_a_healthy_episode_run_has_no_episode_findings():
    assert names(healthy()) == set()


def test_turns_grow_while_success_is_flat():
    rec = healthy(metrics=metrics(turns_mean=lambda s: 2.0 + 0.05 * s, success_rate=lambda s: 0.3))
    f = E.turns_grow(rec)
    assert f is not None and "turns per episode 2.2" in f.evidence[0] and "per_turn" in f.change
    # the same growth with success rising is the policy learning to look things up: no finding
    assert E.turns_grow(healthy(metrics=metrics(turns_mean=lambda s: 2.0 + 0.05 * s))) is None


def test_tool_loops_name_the_repeated_call_and_the_model():
    looping = [{"model": "step_000040", "transcript": transcript(LOOP, stop="max_turns")} for _ in range(3)]
    f = E.tool_loops(healthy(transcripts=healthy().transcripts + looping))
    assert f is not None and "step_000040: 3 of 9 episodes repeat a call" in f.evidence[0]
    assert 'get_order({"order_id": 4821}) 4 times' in f.evidence[0] and "max_turns" in f.evidence[0]
    one = [{"model": "step_000040", "transcript": transcript(LOOP)}]  # one odd episode among many is not a habit
    assert E.tool_loops(healthy(transcripts=healthy().transcripts * 2 + one)) is None


def test_malformed_calls_rising_in_training_or_held_out():
    f = E.malformed_rises(healthy(metrics=metrics(malformed_rate=lambda s: 0.05 + 0.01 * s)))
    assert f is not None and f.evidence[0].startswith("training episodes with a malformed call")
    held = healthy(evals=[episode_eval("sft"), episode_eval("step_000040", malformed_rate=0.4)])
    f = E.malformed_rises(held)
    assert f is not None and "5.0% (sft) -> 40.0% (step_000040)" in f.evidence[0]


def test_turn_limit_stops_from_metrics_or_the_last_eval():
    f = E.turn_limit_stops(healthy(metrics=metrics(max_turns_rate=lambda s: 0.01 * s)))
    assert f is not None and "max_turns" in f.change
    # episode GRPO's own evals.jsonl carries the figures at the top level
    evals = [{"name": "sft", "turns_mean": 2.0, "max_turns_rate": 0.0}, {"name": "step_000040", "max_turns_rate": 0.5}]
    f = E.turn_limit_stops(healthy(evals=evals))
    assert f is not None and "50.0% (step_000040)" in f.evidence[0]


@pytest.mark.parametrize("rule", E.EPISODE_RULES)
def test_a_single_reply_run_is_never_an_episode_finding(rule):
    rec = RunRecords(
        metrics=[{"step": s, "reward_mean": 0.5, "correct_rate": 0.4} for s in range(1, STEPS + 1)],
        evals=[{"name": "sft", "pass_at_1_greedy": 0.3}, {"name": "step_000040", "pass_at_1_greedy": 0.4}],
    )
    assert rule(rec) is None


def test_an_episode_grpo_folder_is_read_whole(tmp_path):
    """metrics.jsonl, evals.jsonl and samples/step_NNNNNN.jsonl (each line a transcript) as episode GRPO
    writes them: the doctor reads the transcripts and names the loops and the turn-limit stops."""
    run = tmp_path / "grpo"
    (run / "samples").mkdir(parents=True)
    bad = metrics(max_turns_rate=lambda s: 0.01 * s)
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in bad))
    evals = [{"step": 0, "pass_at_1_greedy": 0.1, "turns_mean": 2.0}, {"step": 40, "pass_at_1_greedy": 0.1}]
    (run / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    lines = [transcript(LOOP, stop="max_turns")] * 3 + [transcript(GOOD)]
    (run / "samples" / "step_000040.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    rec = load_records(run)
    assert len(rec.transcripts) == 4 and {t["model"] for t in rec.transcripts} == {"step_000040"}
    found = {f.name for f in diagnose(run)}
    assert {"tool_loops", "turn_limit_stops"} <= found and "turns_grow" not in found
