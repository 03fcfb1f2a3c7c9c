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
EPISODE_KEYS = ("success_rate", "turns_mean", "tool_calls_mean", "malformed_rate", "max_turns_rate", "format_rate")
# episode GRPO logs episode_stats' keys bare; the chain's GRPO stage logs them as episode_<key>
NAMINGS = ("", "episode_")


def metrics(prefix: str = "", **series) -> list[dict]:
    """STEPS lines of GRPO metrics; keywords replace a series. prefix: how the episode figures are named
    (the single-reply reward_mean and correct_rate stay bare)."""
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
    name = {k: prefix + k if k in EPISODE_KEYS else k for k in healthy}
    return [{"step": s, **{name[k]: f(s) for k, f in healthy.items()}} for s in range(1, STEPS + 1)]


def transcript(calls: list[tuple], stop: str = "final_reply") -> dict:
    """calls: (tool, arguments) or (tool, arguments, ok)."""
    return {
        "messages": [{"role": "user", "content": "Refund the shipping of order 4821."}],
        "sources": ["prompt"],
        "stop": stop,
        "tool_runs": [
            {"name": c[0], "arguments": c[1], "ok": c[2] if len(c) > 2 else True, "result": "{}"} for c in calls
        ],
        "bad_calls": 0,
        "end_state": [],
        "verdict": {"status": "wrong", "score": 0.0},
    }


ORDER = ("get_order", {"order_id": 4821})
REFUND = ("refund", {"order_id": 4821, "amount": 7})
GOOD = [ORDER, REFUND]
CHECKED = [ORDER, REFUND, ORDER]  # the order read back after the refund: a check, not a loop
LOOP = [ORDER] * 4


def episode_eval(name: str, **figures) -> dict:
    base = {"pass_at_1_greedy": 0.3, "turns_mean": 3.0, "malformed_rate": 0.05, "max_turns_rate": 0.0}
    return {"name": name, "pass_at_1_greedy": 0.5, "episodes": {"n_prompts": 40, **base, **figures}}


def healthy(**changes) -> RunRecords:
    rec = RunRecords(
        metrics=metrics(),
        evals=[episode_eval("sft"), episode_eval("step_000040", pass_at_1_greedy=0.6)],
        transcripts=[{"model": "step_000040", "transcript": transcript(t)} for t in [GOOD, CHECKED] * 3],
    )
    for key, value in changes.items():
        setattr(rec, key, value)
    return rec


def names(rec: RunRecords) -> set[str]:
    return {f.name for f in (rule(rec) for rule in E.EPISODE_RULES) if f is not None}


@pytest.mark.parametrize("prefix", NAMINGS)
def test_a_healthy_episode_run_has_no_episode_findings(prefix):
    assert names(healthy(metrics=metrics(prefix))) == set()


@pytest.mark.parametrize("prefix", NAMINGS)
def test_turns_grow_while_success_is_flat(prefix):
    rec = healthy(metrics=metrics(prefix, turns_mean=lambda s: 2.0 + 0.05 * s, success_rate=lambda s: 0.3))
    f = E.turns_grow(rec)
    assert (
        f is not None
        and "turns per episode 2.2" in f.evidence[0]
        and "verifiers.rules[].environment" in f.change
        and "verifiers.reward.turn_penalty.per_turn" in f.change
    )
    # the same growth with success rising is the policy learning to look things up: no finding
    assert E.turns_grow(healthy(metrics=metrics(prefix, turns_mean=lambda s: 2.0 + 0.05 * s))) is None


def test_a_mixed_run_reads_episode_success_not_the_single_replies():
    """The chain's GRPO stage: episode figures on the steps that drew episodes, beside a rising
    single-reply correct_rate that says nothing about the episodes."""
    lines = metrics("episode_", turns_mean=lambda s: 2.0 + 0.05 * s, success_rate=lambda s: 0.3)
    for m in lines[1::2]:  # a step without an episode row
        for k in [k for k in m if k.startswith("episode_")]:
            del m[k]
    assert E.turns_grow(healthy(metrics=lines)) is not None
    # episode GRPO without success_rate: its correct_rate is the episodes' own
    bare = [{k: v for k, v in m.items() if k != "success_rate"} for m in metrics(turns_mean=lambda s: 2.0 + 0.05 * s)]
    assert E.turns_grow(healthy(metrics=bare)) is None


def test_tool_loops_name_the_repeated_call_and_the_model():
    looping = [{"model": "step_000040", "transcript": transcript(LOOP, stop="max_turns")} for _ in range(3)]
    f = E.tool_loops(healthy(transcripts=healthy().transcripts + looping))
    assert f is not None and "step_000040: 3 of 9 episodes repeat a call" in f.evidence[0]
    assert 'get_order({"order_id": 4821}) 4 times' in f.evidence[0] and "max_turns" in f.evidence[0]
    one = [{"model": "step_000040", "transcript": transcript(LOOP)}]  # one odd episode among many is not a habit
    assert E.tool_loops(healthy(transcripts=healthy().transcripts * 2 + one)) is None


ITEMS = ("list_items", {"order_id": 4821})


@pytest.mark.parametrize(
    "calls, read_only, repeated",
    [
        (CHECKED, frozenset(), None),  # a look-up, a write, the look-up again
        (CHECKED, frozenset({"get_order"}), None),  # known: refund writes
        ([ORDER, ITEMS, ORDER], frozenset(), None),  # list_items's SQL unknown: it may have changed the order
        ([ORDER, ITEMS, ORDER], frozenset({"get_order", "list_items"}), 'get_order({"order_id": 4821})'),
        ([ORDER, ORDER], frozenset(), 'get_order({"order_id": 4821})'),  # back to back
        ([REFUND, ORDER, REFUND], frozenset({"get_order"}), 'refund({"amount": 7, "order_id": 4821})'),
        ([(*REFUND, False), ORDER, REFUND], frozenset(), 'refund({"amount": 7, "order_id": 4821})'),  # failed
        ([(*ORDER, False), REFUND, ORDER], frozenset(), 'get_order({"order_id": 4821})'),
    ],
)
def test_a_repeat_is_a_call_again_with_nothing_changed_since(calls, read_only, repeated):
    found = E._repeated_call(transcript(calls), read_only)
    assert (found and found[0]) == repeated


def test_read_back_after_a_write_is_not_a_loop():
    checks = [{"model": "step_000040", "transcript": transcript(CHECKED)} for _ in range(3)]
    assert E.tool_loops(healthy(transcripts=checks)) is None
    assert E.tool_loops(healthy(transcripts=checks, read_only_tools=frozenset({"get_order"}))) is None


@pytest.mark.parametrize("prefix", NAMINGS)
def test_malformed_calls_rising_in_training_or_held_out(prefix):
    f = E.malformed_rises(healthy(metrics=metrics(prefix, malformed_rate=lambda s: 0.05 + 0.01 * s)))
    assert f is not None and f.evidence[0].startswith("training episodes with a malformed call")
    held = healthy(evals=[episode_eval("sft"), episode_eval("step_000040", malformed_rate=0.4)])
    f = E.malformed_rises(held)
    assert f is not None and "5.0% (sft) -> 40.0% (step_000040; 16 of 40)" in f.evidence[0]


def test_one_episode_of_five_is_not_a_held_out_rise():
    five = [episode_eval("sft", n_prompts=5, malformed_rate=0.0, max_turns_rate=0.0)]
    five.append(episode_eval("step_000040", n_prompts=5, malformed_rate=0.2, max_turns_rate=0.2))
    assert E.malformed_rises(healthy(evals=five)) is None and E.turn_limit_stops(healthy(evals=five)) is None
    # unknown size: the share alone says nothing
    unsized = [{**e, "episodes": {k: v for k, v in e["episodes"].items() if k != "n_prompts"}} for e in five]
    assert E.turn_limit_stops(healthy(evals=unsized)) is None
    twenty = [episode_eval("sft", n_prompts=20, malformed_rate=0.0)]
    twenty.append(episode_eval("step_000040", n_prompts=20, malformed_rate=0.1, max_turns_rate=0.2))
    assert E.malformed_rises(healthy(evals=twenty)) is not None
    assert "4 of 20" in E.turn_limit_stops(healthy(evals=twenty)).evidence[0]


@pytest.mark.parametrize("prefix", NAMINGS)
def test_turn_limit_stops_from_metrics_or_the_last_eval(prefix):
    f = E.turn_limit_stops(healthy(metrics=metrics(prefix, max_turns_rate=lambda s: 0.01 * s)))
    assert f is not None and "max_turns" in f.change
    # episode GRPO's own evals.jsonl carries the figures at the top level (`prompts` episodes played)
    evals = [
        {"name": "sft", "prompts": 20, prefix + "turns_mean": 2.0, prefix + "max_turns_rate": 0.0},
        {"name": "step_000040", "prompts": 20, prefix + "max_turns_rate": 0.5},
    ]
    f = E.turn_limit_stops(healthy(evals=evals))
    assert f is not None and "50.0% (step_000040; 10 of 20)" in f.evidence[0]


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


def test_a_run_folder_keeps_episodes_out_of_the_samples_and_reads_the_tools(tmp_path):
    """The evaluate stage's samples hold single replies and episodes (mode `episode`, the final reply as
    `response`): only the single replies are samples, the episodes are transcripts. The split's
    episodes.parquet says which tools only read."""
    import polars as pl

    grpo, evaluate, split, run = (tmp_path / d for d in ("grpo", "evaluate", "split", "run"))
    for d in (grpo, evaluate, split, run):
        d.mkdir()
    (grpo / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics()))
    for e in (episode_eval("sft"), episode_eval("step_000040")):
        (evaluate / f"{e['name']}.json").write_text(json.dumps(e))
    reply = {"model": "step_000040", "prompt": "2+2", "response": "4", "reward": 1.0}
    episode = {**reply, "mode": "episode", "response": "Refunded.", "transcript": transcript(CHECKED)}
    (evaluate / "samples.jsonl").write_text(json.dumps(reply) + "\n" + json.dumps(episode) + "\n")
    # GRPO's rollout samples hold its episodes in the same form (training/grpo_logs.py episode_samples)
    rollout = {"step": 4, "kind": "best", "mode": "episode", "response": "Refunded.", "transcript": transcript(CHECKED)}
    (grpo / "rollout_samples.jsonl").write_text(json.dumps({**reply, "step": 4}) + "\n" + json.dumps(rollout) + "\n")
    tools = [
        {"name": "get_order", "sql": "SELECT * FROM orders WHERE id = :order_id"},
        {"name": "refund", "sql": "INSERT INTO refunds(order_id, amount) VALUES (:order_id, :amount)"},
        {"name": "note", "python": "shop.tools:note"},
    ]
    pl.DataFrame({"id": ["e1"], "verifier_params": [json.dumps({"tools": tools})]}).write_parquet(
        split / "episodes.parquet"
    )
    stages = {"grpo": {"dir": str(grpo)}, "evaluate": {"dir": str(evaluate)}, "split": {"dir": str(split)}}
    report = {"stages": stages, "evals": [{"name": "sft"}, {"name": "step_000040"}]}
    (run / "report.json").write_text(json.dumps(report))
    rec = load_records(run)
    assert [s["response"] for s in rec.samples] == ["4", "4"]
    assert [t["transcript"]["stop"] for t in rec.transcripts] == ["final_reply", "final_reply"]
    assert rec.read_only_tools == {"get_order"}
