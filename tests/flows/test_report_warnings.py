"""report.json's `warnings` carry every warning the run logged, collected from the stages' records
(stats and eval results), not from log text: SFT skipped, prompts cut, GRPO steps without an update,
the final checkpoint's answers collapsed to one string, and the trainer's own warnings."""

from __future__ import annotations

from pathlib import Path

from rlvrflow.flows.cache import Manifest
from rlvrflow.flows.report import run_warnings, warnings_text


def manifest(stage: str, **stats) -> Manifest:
    return Manifest(stage=stage, key="k", dir=Path("/nowhere") / stage, stats=stats)


def answers(values: list[str]) -> dict:
    """Greedy answers against golds that are all distinct from them: every answer wrong."""
    return {
        "by_prompt": {
            "ids": [f"p{i}" for i in range(len(values))],
            "greedy": [0] * len(values),
            "answers": values,
            "categories": ["gcd" if i % 2 else "lcm" for i in range(len(values))],
        }
    }


COLLAPSED = ["2"] * 150 + [str(i) for i in range(10, 60)]  # 150 of 200 alike
SPREAD = [str(i) for i in range(200)]


def failed_run() -> dict[str, Manifest]:
    from rlvrflow.training.sft import cut_warnings, no_worked_rows_message

    cut = {"prompts_truncated": 4, "solutions_truncated": 0, "longest_prompt_tokens": 716, "longest_pair_tokens": 730}
    return {
        "prepare": manifest("prepare", rows_in=2000),
        "sft": manifest(
            "sft",
            rows_used=0,
            warnings=[
                {"kind": "sft_skipped", "message": no_worked_rows_message(1682)},
                *cut_warnings(cut, 1682, 420, 512),
            ],
        ),
        "grpo": manifest(
            "grpo", steps=180, steps_without_update=124, warnings=["REWARD HACKING SIGNAL: training reward rose ..."]
        ),  # the trainer's strings
        "evaluate": manifest("evaluate"),
    }


def test_every_logged_warning_reaches_the_report():
    notices = [{"kind": "no_worked_rows", "message": "none of the 2000 rows has a worked solution"}]  # flows/preflight
    warned = run_warnings(
        failed_run(), {"sft": answers(SPREAD), "step_000180": answers(COLLAPSED)}, "step_000180", notices
    )
    assert [(w["stage"], w["kind"]) for w in warned] == [
        ("preflight", "no_worked_rows"),
        ("sft", "sft_skipped"),
        ("sft", "prompts_truncated"),
        ("grpo", "grpo_warning"),
        ("grpo", "steps_without_update"),
        ("evaluate", "answer_collapse"),
    ]
    by_kind = {w["kind"]: w["message"] for w in warned}
    assert "none of the 1682 train rows has a worked solution" in by_kind["sft_skipped"]
    assert "cut the start of 4 of 1682 prompts" in by_kind["prompts_truncated"]
    assert by_kind["steps_without_update"].startswith("GRPO: 124 of 180 steps updated nothing")
    assert by_kind["answer_collapse"].startswith("step_000180 answers '2' on 150 of 200 held-out prompts (0 right)")
    text = warnings_text(warned)
    assert text.startswith("warnings (6, also in report.json):") and "[evaluate: answer_collapse]" in text


def test_a_healthy_run_warns_of_nothing():
    m = {
        "sft": manifest("sft", rows_used=220, warnings=[]),
        "grpo": manifest("grpo", steps=180, steps_without_update=3),
        "evaluate": manifest("evaluate"),
    }
    assert run_warnings(m, {"sft": answers(SPREAD), "step_000180": answers(SPREAD)}, "step_000180") == []
    assert warnings_text([]) == ""
    # a final "checkpoint" that is SFT itself (no GRPO checkpoint evaluated) is not judged for collapse here
    assert run_warnings(m, {"sft": answers(COLLAPSED)}, "sft") == []
    # a cached GRPO stage from before steps_without_update was recorded: nothing to say, no error
    old = {**m, "grpo": manifest("grpo", steps=180)}
    assert run_warnings(old, {"step_000180": answers(SPREAD)}, "step_000180") == []
