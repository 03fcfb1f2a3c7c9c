"""Eval metrics on an engine whose outputs are known, scored by the real math verifier."""

import hashlib

import polars as pl
import pytest

from rlvrflow.engines import Completion
from rlvrflow.training.config import EvalConfig
from rlvrflow.training.eval import evaluate, evaluate_engine, select_eval_tasks


class ScriptedEngine:
    """Returns fixed texts: greedy (temperature 0) from `greedy`, sampled from `sampled`, per prompt."""

    def __init__(self, greedy: dict, sampled: dict):
        self.greedy, self.sampled, self.calls = greedy, sampled, []

    def generate(self, prompts, n, sampling, seed):
        self.calls.append((n, sampling.temperature))
        table = self.greedy if sampling.temperature == 0 else self.sampled
        out = []
        for p in prompts:
            texts = table[p] if isinstance(table[p], list) else [table[p]]
            assert len(texts) == n
            out.append([Completion(t, tuple(range(len(t))), (0.0,) * len(t), "stop") for t in texts])
        return out


def test_metrics_match_hand_counts(toy):
    rows = toy.copy_rows(3, 0).with_columns(
        pl.Series("prompt", ["Copy 1\n", "Copy 2\n", "Copy 3\n"]), pl.Series("reference", ["1", "2", "3"])
    )
    tasks = select_eval_tasks(rows, EvalConfig())
    refs = [t.reference for t in tasks]
    wrong = lambda r: str((int(r) + 1) % 10)  # noqa: E731
    greedy = {
        tasks[0].prompt: f"Answer: {refs[0]}",
        tasks[1].prompt: f"Answer: {wrong(refs[1])}",
        tasks[2].prompt: "no idea",
    }
    sampled = {
        tasks[0].prompt: [f"Answer: {refs[0]}"] * 4,
        tasks[1].prompt: [f"Answer: {refs[1]}", "hmm", f"Answer: {wrong(refs[1])}", "hmm"],
        tasks[2].prompt: ["hmm", "no idea", "hmm hmm", "no idea!"],
    }
    eng = ScriptedEngine(greedy, sampled)
    m = evaluate_engine(eng, tasks, EvalConfig(k=2, n_samples=4), seed=0, workers=1)
    assert eng.calls == [(1, 0.0), (4, 1.0)]
    assert m["pass_at_1_greedy"] == pytest.approx(1 / 3)
    assert m["pass_at_1_sampled"] == pytest.approx((1 + 0.25 + 0) / 3)
    # pass@2 with n=4: prompt 1 c=4 -> 1; prompt 2 c=1 -> 1 - C(3,2)/C(4,2) = 0.5; prompt 3 -> 0
    assert m["pass_at_k"] == pytest.approx((1 + 0.5 + 0) / 3)
    # parsed answers: greedy 2 of 3, sampled 4 + 2 + 0 of 12
    assert m["format_rate"] == pytest.approx((2 + 6) / 15)
    assert m["format_rate_greedy"] == pytest.approx(2 / 3)
    lengths = [9] * 4 + [9, 3, 9, 3] + [3, 7, 7, 8]  # token_ids = one per character here
    assert m["length_mean"] == pytest.approx(sum(lengths) / 12)
    assert m["length_p50"] == pytest.approx(8.5)  # sorted: 3 3 3 7 7 8 9 9 9 9 9 9
    # variance of per-prompt success: 0, 0.25*0.75, 0
    assert m["per_prompt_variance"] == pytest.approx(0.1875 / 3)
    assert m["per_category"]["copy"]["n"] == 3


def test_max_prompts_is_a_fixed_function_of_the_ids(toy):
    rows = toy.copy_rows(10, 0)
    tasks = select_eval_tasks(rows.reverse(), EvalConfig(max_prompts=3))
    chosen = {t.id for t in tasks}
    assert len(tasks) == 3 and [t.id for t in tasks] == sorted(chosen)
    assert select_eval_tasks(rows, EvalConfig(max_prompts=3)) == tasks  # row order does not matter
    assert chosen != {"train-0000", "train-0001", "train-0002"}  # not the lowest ids
    # one order over all ids (within a category): in a larger pool, the rows of these 10 that are
    # picked are the first of them in that order, so a pick of 3 from 40 keeps none the 10 passed over
    bigger = toy.copy_rows(40, 0)
    ten = set(rows["id"].to_list())
    assert ten < set(bigger["id"].to_list())
    picked = {t.id for t in select_eval_tasks(bigger, EvalConfig(max_prompts=3))}
    assert picked & ten <= chosen
    ranked = sorted(ten, key=lambda i: hashlib.sha256(i.encode()).digest())
    for n in (12, 20, 30):
        kept = {t.id for t in select_eval_tasks(bigger, EvalConfig(max_prompts=n))} & ten
        assert kept == set(ranked[: len(kept)]), n


def test_max_prompts_samples_each_category_across_its_sources(toy):
    """A category logged by two sources (ids prefixed by source) is sampled from both, about evenly:
    the lowest ids would all be the first source's."""
    erp = toy.copy_rows(60, 0).with_columns(pl.lit("discount").alias("category"), ("ERP" + pl.col("id")).alias("id"))
    tix = toy.copy_rows(60, 1).with_columns(pl.lit("discount").alias("category"), ("T26-" + pl.col("id")).alias("id"))
    tasks = select_eval_tasks(pl.concat([tix, erp]), EvalConfig(max_prompts=40))
    from_erp = sum(t.id.startswith("ERP") for t in tasks)
    assert len(tasks) == 40 and 12 <= from_erp <= 28, from_erp  # binomial-ish around 20, never 40 or 0


def test_max_prompts_keeps_each_categorys_share(toy):
    """Ids sorted by source prefix must not crowd out the later categories."""
    a = toy.copy_rows(60, 0).with_columns(pl.lit("a").alias("category"), ("a-" + pl.col("id")).alias("id"))
    b = toy.copy_rows(30, 1).with_columns(pl.lit("b").alias("category"), ("b-" + pl.col("id")).alias("id"))
    c = toy.copy_rows(10, 2).with_columns(pl.lit("c").alias("category"), ("c-" + pl.col("id")).alias("id"))
    rows = pl.concat([c, a, b])
    tasks = select_eval_tasks(rows, EvalConfig(max_prompts=20))
    counts = {k: sum(t.category == k for t in tasks) for k in "abc"}
    assert counts == {"a": 12, "b": 6, "c": 2}
    assert [t.id for t in tasks] == sorted(t.id for t in tasks)
    odd = select_eval_tasks(rows, EvalConfig(max_prompts=7))  # 4.2 / 2.1 / 0.7: the remainder goes to c
    assert len(odd) == 7 and {k: sum(t.category == k for t in odd) for k in "abc"} == {"a": 4, "b": 2, "c": 1}
    assert select_eval_tasks(rows, EvalConfig(max_prompts=20)) == tasks


def test_evaluate_a_saved_model_is_deterministic(sft_model, toy):
    rows = toy.copy_rows(12, 3, split="eval")
    cfg = EvalConfig(k=2, n_samples=3, max_new_tokens=12)
    a = evaluate(sft_model, rows, cfg, seed=5, device="cpu")
    b = evaluate(sft_model, rows, cfg, seed=5, device="cpu")
    assert a == b
    assert 0.0 <= a["pass_at_1_greedy"] <= 1.0 and a["format_rate"] > 0.5  # SFT taught the format


def test_a_loop_eval_is_read_back_as_the_record_of_its_model(sft_model, toy, tmp_path):
    """What GRPO and DPO keep of an in-loop eval equals a fresh `evaluate` of the same weights, and is
    given back by the name the evaluate stage uses (sft: step_000000); nothing for a name not kept."""
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.eval import evaluate_live, read_loop_eval, write_loop_eval
    from rlvrflow.training.modeling import load_model_and_tokenizer

    rows = toy.copy_rows(12, 3, split="eval")
    cfg = EvalConfig(k=2, n_samples=3, max_new_tokens=12)
    model, tok = load_model_and_tokenizer(sft_model, "cpu", trainable=False)
    run = tmp_path / "run"
    kept = evaluate_live(
        model,
        tok,
        rows,
        cfg,
        5,
        run / "samples" / "step_000000.jsonl",
        device="cpu",
        prompt_format=PromptFormat.for_model_dir(sft_model, tok),
    )
    path = write_loop_eval(run, "step_000000", kept)
    fresh = evaluate(sft_model, rows, cfg, seed=5, device="cpu", samples_path=tmp_path / "fresh.jsonl")
    got = read_loop_eval(run, "sft")
    assert got is not None and got["path"] == path == run / "evals" / "step_000000.json"
    assert {"model": str(sft_model), **got["result"]} == fresh
    assert list(got["result"]) == [k for k in fresh if k != "model"]  # the result's own key order
    assert got["samples"] == (tmp_path / "fresh.jsonl").read_text(encoding="utf-8")
    assert read_loop_eval(run, "step_000002") is None  # nothing kept under that name


def test_samples_and_run_logs_survive_line_separators_inside_a_response(tmp_path):
    """JSON keeps U+2028, U+2029 and U+0085 unescaped: a reader must split lines on newlines only."""
    from rlvrflow.training.eval import read_samples, write_samples
    from rlvrflow.io import append_jsonl, read_jsonl

    text = "a\u2028b\u2029c\x85d"
    write_samples(tmp_path / "s.jsonl", [{"response": text}, {"response": "e"}])
    assert [r["response"] for r in read_samples(tmp_path / "s.jsonl")] == [text, "e"]
    append_jsonl(tmp_path / "m.jsonl", {"text": text})
    assert read_jsonl(tmp_path / "m.jsonl") == [{"text": text}]


def _two_category_rows(toy):
    a = toy.copy_rows(6, 0).with_columns(pl.lit("a").alias("category"), ("a-" + pl.col("id")).alias("id"))
    b = toy.copy_rows(4, 1).with_columns(pl.lit("b").alias("category"), ("b-" + pl.col("id")).alias("id"))
    return pl.concat([a, b]).with_columns(
        pl.Series("prompt", [f"Copy {i % 10}\n" for i in range(10)]),
        pl.Series("reference", [str(i % 10) for i in range(10)]),
    )


def _answers(tasks, greedy_right: bool):
    greedy = {t.prompt: f"Answer: {t.reference if greedy_right else 'x'}" for t in tasks}
    sampled = {t.prompt: [f"Answer: {t.reference}", "no idea"] for t in tasks}
    return ScriptedEngine(greedy, sampled)


def test_samples_file_holds_the_same_prompts_per_category_at_every_eval(toy, tmp_path):
    from rlvrflow.training.eval import SAMPLE_FIELDS, read_samples

    rows = _two_category_rows(toy)
    tasks = select_eval_tasks(rows, EvalConfig())
    cfg = EvalConfig(k=1, n_samples=2, samples_per_category=2)
    evaluate_engine(_answers(tasks, False), tasks, cfg, seed=3, workers=1, samples_path=tmp_path / "sft.jsonl")
    evaluate_engine(_answers(tasks, True), tasks, cfg, seed=3, workers=1, samples_path=tmp_path / "ckpt.jsonl")
    before, after = read_samples(tmp_path / "sft.jsonl"), read_samples(tmp_path / "ckpt.jsonl")
    assert all(tuple(sorted(r)) == tuple(sorted(SAMPLE_FIELDS)) for r in before)
    assert [(r["id"], r["mode"]) for r in before] == [(r["id"], r["mode"]) for r in after]
    assert [r["category"] for r in before] == ["a"] * 4 + ["b"] * 4  # 2 prompts x greedy + sampled each
    assert [r["mode"] for r in before[:2]] == ["greedy", "sampled"]
    assert {r["status"] for r in before if r["mode"] == "greedy"} == {"wrong"}
    assert {r["status"] for r in after if r["mode"] == "greedy"} == {"correct"}
    assert all(r["status"] == "correct" and r["score"] == 1.0 for r in before if r["mode"] == "sampled")
    ok = next(r for r in after if r["mode"] == "greedy")
    assert ok["reward"] > next(r for r in before if r["mode"] == "greedy")["reward"]
    # the choice is a function of (seed, id): another seed picks other prompts, row order does not matter
    other = select_eval_tasks(rows.reverse(), EvalConfig())
    evaluate_engine(_answers(other, True), other, cfg, seed=3, workers=1, samples_path=tmp_path / "rev.jsonl")
    assert [r["id"] for r in read_samples(tmp_path / "rev.jsonl")] == [r["id"] for r in after]
    evaluate_engine(_answers(tasks, True), tasks, cfg, seed=4, workers=1, samples_path=tmp_path / "s4.jsonl")
    assert {r["id"] for r in read_samples(tmp_path / "s4.jsonl")} != {r["id"] for r in after}


def test_samples_markdown_puts_two_evals_side_by_side():
    from rlvrflow.training.eval import samples_markdown

    def rec(i, mode, response, status, reward, category="copy"):
        return {
            "id": i,
            "category": category,
            "prompt": f"Copy {i}\n| x",
            "mode": mode,
            "response": response,
            "status": status,
            "score": float(status == "correct"),
            "reward": reward,
            "n_tokens": 3,
        }

    before = [rec("1", "greedy", "Answer: 2", "wrong", 0.2), rec("1", "sampled", "<b>hi</b>", "unparsed", 0.0)]
    after = [rec("1", "greedy", "Answer: 1", "correct", 1.2), rec("2", "greedy", "A\nB", "wrong", 0.1, "z")]
    md = samples_markdown(before, after, "sft", "step_000010")
    assert md.startswith("# Samples: sft vs step_000010")
    assert "| prompt | mode | sft | step_000010 |" in md
    assert (
        "| Copy 1<br>\\| x | greedy | Answer: 2<br>*wrong, reward 0.20* | Answer: 1<br>*correct, reward 1.20* |" in md
    )
    assert "&lt;b&gt;hi&lt;/b&gt;<br>*unparsed, reward 0.00* | (not evaluated) |" in md
    assert "## z" in md and "| (not evaluated) | A<br>B<br>*wrong, reward 0.10* |" in md
    assert md.index("## copy") < md.index("## z")


def test_demo_bench_scores_every_held_out_prompt(sft_model, toy, tmp_path, load_bench):
    """bench/demo_target.py's whole-split check: every held-out row, greedy, beyond eval.max_prompts,
    and the same numbers as an eval of the whole split; a model scored against itself gains 0."""
    from rlvrflow.flows.spec import load_spec

    spec = load_spec("examples/retail/spec.yaml")
    spec = spec.model_copy(
        update={"eval": spec.eval.model_copy(update={"max_prompts": 5, "max_new_tokens": 12}), "training": toy.cfg()}
    )
    rows = toy.copy_rows(12, 3, split="eval")
    rows.write_parquet(tmp_path / "eval.parquet")
    whole = load_bench("demo_target").whole_split({"a": sft_model, "b": sft_model}, spec, 0, tmp_path)
    assert whole["a"]["n_prompts"] == 12 and len(whole["a"]["by_prompt"]["ids"]) == 12
    direct = evaluate(sft_model, rows, EvalConfig(max_new_tokens=12, n_samples=1, k=1), seed=0, device="cpu")
    assert whole["a"]["pass_at_1_greedy"] == direct["pass_at_1_greedy"]
    assert whole["a"]["by_prompt"]["greedy"] == whole["b"]["by_prompt"]["greedy"]


def test_demo_bench_counts_how_grpo_spent_its_rollouts(tmp_path, load_bench):
    """bench/demo_target.py's rollout use: the GRPO stage's run totals from summary.json (not metrics.jsonl,
    which holds only every `logging_steps`-th step), the flat groups split into all right and all wrong,
    rollouts = groups x group size."""
    import json

    summary = {"groups_seen": 20, "groups_zero_variance": 10, "groups_zero_solved": 6, "groups_trained": 10}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    # a sparse step log (logging_steps 5) that would undercount: not read
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 5, "groups_seen": 4, "groups_zero_variance": 1}))
    use = load_bench("demo_target").rollout_use(tmp_path, 8)
    assert use == {
        "groups": 20,
        "zero_variance": 0.5,
        "zero_variance_all_right": 6,
        "zero_variance_all_wrong": 4,
        "rollouts": 160,
    }
