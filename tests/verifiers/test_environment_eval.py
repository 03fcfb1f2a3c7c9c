"""The evaluate stage scores the held-out rows of an environment's category: attach, split and evaluate
on a spec with the refunds environment (test_environment.py's shop) and an arithmetic category, a tiny
untrained model as SFT and as a checkpoint. It fails the episodes, and the category still has its row,
its count, its interval, and transcripts in the samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from rlvrflow.verifiers.attaching import attach

from .test_environment import TASKS, _row, _spec, agent
from .test_environment_spec import shop_db


def _spec_data(db: Path) -> dict:
    env = {**_spec(db), "database": db.name}
    return {
        "domain": "desk",
        "sources": [
            {
                "name": "t",
                "path": "raw/*.jsonl",
                "format": "jsonl",
                "fields": {"id": "id", "question": "q", "reference": "a"},
            }
        ],
        "verifiers": {
            "workers": 1,
            "rules": [{"category": "refunds", "environment": env}, {"category": "arithmetic", "verifier": "math"}],
        },
        "curriculum": {"eval_fraction": 0.5},
        "generation": {"max_new_tokens": 6},
        "eval": {"n_samples": 1, "k": 1, "samples_per_category": 2},
        "training": {"device": "cpu", "torch_threads": 1},
    }


def _rows() -> pl.DataFrame:
    refunds = [{"id": f"r{k:02d}", "category": "refunds", **_row(*TASKS[k % 2]), "solution": ""} for k in range(16)]
    math = [
        {"id": f"n{k:02d}", "category": "arithmetic", "prompt": f"{k}+1?", "reference": str(k + 1), "solution": ""}
        for k in range(16)
    ]
    return pl.DataFrame(refunds + math)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """(spec, evaluate folder, held-out episode rows, finish result) after attach, split, evaluate and
    its finish (once for the module: the tiny models take seconds to run)."""
    from rlvrflow.flows import promotion
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data, spec_from_dict
    from rlvrflow.flows.stage_calls import evaluate, evaluate_finish, evaluate_plan, split
    from rlvrflow.training.config import TinyModelConfig
    from rlvrflow.training.tiny_model import build_tiny_model

    tmp_path = tmp_path_factory.mktemp("evaluated")
    db = shop_db(tmp_path)
    spec = spec_from_dict(_spec_data(db), base_dir=db.parent)
    rows = _rows()
    kept, _, _ = attach(rows, spec.verifiers, db.parent, workers=0)
    kept.write_parquet(tmp_path / "attach.parquet")

    def job(name: str, inputs: dict, item=None) -> Job:
        out = tmp_path / name
        out.mkdir(exist_ok=True)
        return Job(name, json.dumps(spec_data(spec)), str(db.parent), str(tmp_path), str(out), inputs, item)

    split_job = job("split", {"attach": {"rows": str(tmp_path / "attach.parquet")}})
    files = split(split_job).files
    corpus = rows["prompt"].to_list() + ["agent: user: tool: <tool_call>{}</tool_call> 0123456789"]
    dims = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=1, intermediate_size=16)
    sft = build_tiny_model(corpus, tmp_path / "sft", seed=0, dims=dims)
    ckpt = tmp_path / "policy" / "step_000001"
    shutil.copytree(build_tiny_model(corpus, tmp_path / "other", seed=1, dims=dims), ckpt)
    (ckpt / "state.pt").write_bytes(b"")
    (ckpt / "meta.json").write_text("{}")
    inputs = {
        "split": {k: str(tmp_path / "split" / v) for k, v in files.items()},
        "sft": {"model": str(sft)},
        "policy": {"dir": str(tmp_path / "policy"), "summary": ""},
    }
    for item in evaluate_plan(job("evaluate", inputs)):
        evaluate(job("evaluate", inputs, item))
    finish = evaluate_finish(job("evaluate", inputs), {})
    episodes = pl.read_parquet(tmp_path / "split" / files["episodes"]).filter(pl.col("split") == "eval")
    compare_inputs = {
        "split": inputs["split"],
        "evaluate": {"matrix": str(tmp_path / "evaluate" / "eval_matrix.json")},
        "champion": {"model": str(ckpt)},
    }
    promotion.compare(job("compare", compare_inputs))
    return spec, tmp_path / "evaluate", episodes, finish


def test_every_model_is_scored_on_the_held_out_episodes_with_a_category_row_and_an_interval(evaluated):
    _, out, episodes, finish = evaluated
    n = episodes.height
    assert n >= 3  # the test needs held-out episodes: 16 refund rows at eval_fraction 0.5
    for name in ("sft", "step_000001"):
        result = json.loads((out / f"{name}.json").read_text())
        ep = result["episodes"]
        assert ep["n_prompts"] == n and ep["per_category"]["refunds"]["n"] == n
        assert sorted(ep["by_prompt"]["ids"]) == sorted(episodes["id"].to_list())
        assert ep["by_prompt"]["categories"] == ["refunds"] * n
        assert 0.0 <= ep["pass_at_1_greedy"] <= 1.0 and ep["turns_mean"] >= 1
        assert "refunds" not in result["per_category"]  # the single-reply headline holds no episode
    matrix = json.loads((out / "eval_matrix.json").read_text())
    rows = {(r["kind"], r["category"]): r for r in matrix["categories"]}
    assert set(rows) == {("reply", "arithmetic"), ("episode", "refunds")}
    refunds = rows[("episode", "refunds")]
    assert refunds["n"] == n and set(refunds["pass_at_1_greedy"]) == {"sft", "step_000001"}
    gain = refunds["gain_vs_sft"]["step_000001"]
    assert gain["prompts"] == n and gain["low"] <= gain["points"] <= gain["high"]
    assert matrix["headline_scope"].startswith("apart")
    table = json.loads((out / "eval_table.json").read_text())
    assert all(row["episode_success"] is not None for row in table)
    assert finish.stats["episode_prompts"] == n


def test_episode_samples_hold_whole_transcripts_and_read_as_markdown(evaluated):
    from rlvrflow.flows import artifacts
    from rlvrflow.training.eval import read_samples, samples_markdown

    _, out, episodes, _ = evaluated
    records = [r for r in read_samples(out / "sft.samples.jsonl") if r["mode"] == "episode"]
    assert len(records) == 2 and {r["category"] for r in records} == {"refunds"}
    for r in records:
        roles = [m["role"] for m in r["transcript"]["messages"]]
        assert roles[:2] == ["system", "user"] and "assistant" in roles
        assert r["transcript"]["verdict"]["status"] == r["status"] and r["turns"] == roles.count("assistant")
    page = samples_markdown(read_samples(out / "sft.samples.jsonl"), read_samples(out / "step_000001.samples.jsonl"))
    assert "## refunds (episodes)" in page and "**user**" in page and "end state" in page
    pages = artifacts.samples_pages({n: str(out / f"{n}.samples.jsonl") for n in ("sft", "step_000001")})
    assert "## refunds (episodes)" in pages["step_000001"]  # the Prefect page of that checkpoint
    table = artifacts.category_rows(json.loads((out / "eval_matrix.json").read_text()))
    refunds = next(r for r in table if r["category"] == "refunds")
    assert refunds["kind"] == "episode" and refunds["prompts"] == episodes.height
    assert refunds["step_000001 vs sft"].startswith("+0.0 [")


def test_the_run_report_counts_episodes_apart_with_their_gain(evaluated):
    from rlvrflow.flows.report import episode_report, episodes_gain_line
    from rlvrflow.training.eval_categories import format_categories

    _, out, episodes, _ = evaluated
    matrix = json.loads((out / "eval_matrix.json").read_text())
    results = {n: json.loads((out / f"{n}.json").read_text()) for n in ("sft", "step_000001")}
    part = episode_report(matrix, results, "step_000001")
    assert part["headline_scope"] == matrix["headline_scope"]
    assert part["per_category"]["refunds"]["kind"] == "episode"
    assert part["per_category"]["refunds"]["gain"]["prompts"] == episodes.height
    assert part["episodes"]["gain"]["prompts"] == episodes.height
    assert "by_prompt" not in part["episodes"]["final"]
    line = episodes_gain_line(part["episodes"]["gain"], "grpo")
    assert line.startswith("GRPO over SFT, held-out episodes") and f"over {episodes.height} prompts" in line
    table = format_categories(matrix["categories"], ["sft", "step_000001"], "step_000001").splitlines()
    assert table[0].split()[-3:] == ["step_000001", "vs", "sft"]
    assert next(r for r in table if r.startswith("refunds (episodes)")).split()[2:4] == [str(episodes.height), "0.0"]
    assert "vs sft" not in format_categories(matrix["categories"], ["sft"], "sft")  # SFT alone: no gain column


class ScriptedEngine:
    """A RolloutEngine that reads the plain-format conversation back and answers as test_environment's
    `agent` (the right episode) on the rows whose id is in `solves`, else with a final reply at once;
    its messages are written on one line, as the plain format needs."""

    TAGS = {"system: ": "system", "user: ": "user", "agent: ": "assistant", "tool: ": "tool"}

    def __init__(self, solves: set[str], prompts: dict[str, str]):
        self.solves, self.prompts = solves, prompts
        self.calls = 0

    def _messages(self, text: str) -> list[dict]:
        out = []
        for line in text.split("\n")[:-1]:
            tag = next(t for t in self.TAGS if line.startswith(t))
            out.append({"role": self.TAGS[tag], "content": line[len(tag) :]})
        return out

    def generate(self, prompts, n, sampling, seed):
        from rlvrflow.engines.hf_engine import Completion

        self.calls += 1
        replies = []
        for text in prompts:
            messages = self._messages(text)
            ticket = next(m["content"] for m in messages if m["role"] == "user")
            reply = agent(messages) if self.prompts[ticket] in self.solves else "Done."
            replies.append([Completion(reply.replace("\n", " "), (), (), "stop")])
        return replies


def test_episode_eval_counts_successes_per_prompt_and_a_gain_has_its_interval(tmp_path):
    from rlvrflow.training.eval_categories import category_rows
    from rlvrflow.training.eval_episodes import evaluate_episode_rows
    from rlvrflow.verifiers.environment import Environment

    db = shop_db(tmp_path)
    params = Environment.model_validate(_spec(db)).model_dump_json()
    rows = [
        {
            "id": f"r{k:02d}",
            "category": "refunds",
            **_row(*TASKS[k % 2]),
            "verifier": "episode",
            "verifier_params": params,
        }
        for k in range(2)
    ]
    by_prompt = {r["prompt"]: r["id"] for r in rows}
    engine = ScriptedEngine({"r00"}, by_prompt)
    result, samples = evaluate_episode_rows(engine, rows, max_new_tokens=64, seed=0, per_category=2)
    assert result["by_prompt"]["greedy"] == [1, 0] and result["pass_at_1_greedy"] == 0.5
    assert result["by_prompt"]["turns"] == [3, 1] and result["tool_calls"] == {"get_order_items": 1, "issue_refund": 1}
    assert engine.calls == 3  # one generate call per turn for every open conversation
    solved = next(s for s in samples if s["id"] == "r00")
    assert solved["status"] == "correct" and solved["stop"] == "final_reply"
    assert [m["role"] for m in solved["transcript"]["messages"]].count("tool") == 2

    failing, _ = evaluate_episode_rows(ScriptedEngine(set(), by_prompt), rows, 64, 0, 2)
    reply = {
        "pass_at_1_greedy": 1.0,
        "per_category": {"math": {"n": 1, "pass_at_1_greedy": 1.0}},
        "by_prompt": {"ids": ["m"], "greedy": [1], "categories": ["math"]},
    }
    cats = category_rows({"sft": {**reply, "episodes": failing}, "step_000002": {**reply, "episodes": result}})
    refunds = next(r for r in cats if r["kind"] == "episode")
    assert refunds["pass_at_1_greedy"] == {"sft": 0.0, "step_000002": 0.5}
    gain = refunds["gain_vs_sft"]["step_000002"]
    assert gain["points"] == 50.0 and gain["prompts"] == 2 and gain["low"] <= 50.0 <= gain["high"]
    assert not evaluate_episode_rows(engine, [], 64, 0, 2)[0]  # no episode rows: nothing to report


def test_compare_measures_the_champion_on_the_held_out_episodes_too(evaluated):
    _, out, episodes, _ = evaluated
    compared = out.parent / "compare"
    champion = json.loads((compared / "champion.json").read_text())
    assert champion["episodes"]["n_prompts"] == episodes.height
    record = json.loads((compared / "compare.json").read_text())
    assert record["episode_gain"]["prompts"] == episodes.height


def test_eval_max_prompts_caps_the_held_out_episodes_too(evaluated):
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data
    from rlvrflow.flows.stage_calls import held_out_episodes

    spec, out, episodes, _ = evaluated
    data = spec_data(spec)
    split = {"episodes": str(out.parent / "split" / "episodes.parquet")}

    def held(max_prompts):
        data["eval"]["max_prompts"] = max_prompts
        job = Job("evaluate", json.dumps(data), str(spec.base_dir), str(out.parent), str(out), {"split": split})
        return held_out_episodes(job)

    assert sorted(r["id"] for r in held(None)) == sorted(episodes["id"].to_list())
    capped = held(3)
    assert len(capped) == 3 and {r["split"] for r in capped} == {"eval"} and capped == held(3)


def test_training_episodes_false_leaves_the_held_out_episodes_unplayed_and_the_report_says_so(evaluated):
    """A run that does not train on episodes (e.g. a model too short to hold one) does not spend its
    evaluation on them either; the matrix and report.json count what was left out."""
    from rlvrflow.flows.report import episode_report
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data
    from rlvrflow.flows.stage_calls import episodes_skipped, held_out_episodes

    spec, folder, episodes, _ = evaluated

    def job(episodes_on: bool) -> Job:
        data = spec_data(spec)
        data["training"]["episodes"] = episodes_on
        split = {"episodes": str(folder.parent / "split" / "episodes.parquet")}
        return Job("evaluate", json.dumps(data), str(spec.base_dir), str(folder.parent), str(folder), {"split": split})

    assert held_out_episodes(job(True)) and episodes_skipped(job(True)) is None
    assert held_out_episodes(job(False)) == []
    why = episodes_skipped(job(False))
    assert why.startswith(f"{episodes.height} held-out episode rows not played: training.episodes is false")
    report = episode_report({"categories": [], "episodes_skipped": why}, {"sft": {}}, "sft")
    assert report["episodes"] == {"skipped": why}
