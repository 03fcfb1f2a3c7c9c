"""The evaluate stage's wiring without a model: the regression and robustness set files (flows/eval_sets.py),
the eval matrix and the best model that evaluate_finish writes, what the report and the console say about
the best model, the artifact builders (matrix table, samples side by side), and `rlvrflow doctor`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvrflow.flows import artifacts, stage_calls
from rlvrflow.flows.common import with_overrides
from rlvrflow.flows.errors import DataError
from rlvrflow.flows.eval_sets import load_sets, set_digests
from rlvrflow.flows.report import best_line
from rlvrflow.flows.runner import Job
from rlvrflow.flows.spec import load_spec, spec_data

SETS = {
    "eval.regression_sets": [
        {"name": "general", "path": "eval/general.jsonl", "verifier": "sql", "params": {"database": "shop.db"}}
    ],
    "eval.robustness_set": "eval/robustness.jsonl",
}


def _jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


def _spec_with_sets(toy_spec: Path):
    folder = toy_spec.parent
    (folder / "shop.db").write_bytes(b"")
    _jsonl(
        folder / "eval" / "general.jsonl",
        [{"id": "g1", "prompt": "count orders", "reference": "SELECT 1", "verifier": "math", "verifier_params": "{}"}],
    )
    _jsonl(
        folder / "eval" / "robustness.jsonl",
        [{"id": "r1", "category": "missing_price", "prompt": "refund?", "reference": "price", "verifier": "refusal"}],
    )
    return with_overrides(load_spec(toy_spec), SETS)


def test_sets_take_the_set_verifier_with_params_resolved_and_rows_keep_their_own(toy_spec):
    spec = _spec_with_sets(toy_spec)
    sets = load_sets(spec)
    general = sets.regression["general"].row(0, named=True)
    assert general["verifier"] == "sql"  # the set's verifier wins over the row's
    assert json.loads(general["verifier_params"]) == {"database": str((toy_spec.parent / "shop.db").resolve())}
    assert sets.robustness.row(0, named=True)["verifier"] == "refusal"
    digests = set_digests(spec)
    assert set(digests) == {
        str(toy_spec.parent / "eval" / "general.jsonl"),
        str(toy_spec.parent / "eval" / "robustness.jsonl"),
    }
    _jsonl(toy_spec.parent / "eval" / "general.jsonl", [{"id": "g1", "prompt": "other", "reference": "SELECT 2"}])
    assert set_digests(spec) != digests  # a changed set file changes the evaluate stage's key


def test_missing_and_bad_set_files_name_the_field_the_line_and_the_fix(toy_spec):
    spec = _spec_with_sets(toy_spec)
    folder = toy_spec.parent
    (folder / "eval" / "robustness.jsonl").unlink()
    with pytest.raises(
        DataError, match=r"eval.robustness_set: .*robustness.jsonl does not exist; write it .*eval_sets.py"
    ):
        set_digests(spec)
    with pytest.raises(DataError, match="eval.robustness_set"):
        load_sets(spec)
    bad_rows = {
        r"robustness.jsonl:2 lacks \[\'verifier\'\]": [
            {"id": "a", "prompt": "p", "reference": "x", "verifier": "refusal"},
            {"id": "b", "prompt": "p", "reference": "x"},
        ],
        r"robustness.jsonl:2: id 'a' appears twice": [
            {"id": "a", "prompt": "p", "reference": "x", "verifier": "refusal"},
            {"id": "a", "prompt": "q", "reference": "x", "verifier": "refusal"},
        ],
        r"robustness.jsonl:1: .*no_such_verifier": [
            {"id": "a", "prompt": "p", "reference": "x", "verifier": "no_such_verifier"}
        ],
        r"robustness.jsonl:1 is not JSON": ["{not json"],
        r"robustness.jsonl holds no rows": [""],
    }
    for message, rows in bad_rows.items():
        _jsonl(folder / "eval" / "robustness.jsonl", rows)
        with pytest.raises(DataError, match=message):
            load_sets(spec)


def _result(name: str, greedy: float) -> dict:
    return {
        "name": name,
        "model": f"/models/{name}",
        "pass_at_1_greedy": greedy,
        "pass_at_1_sampled": greedy,
        "pass_at_k": greedy,
        "k": 1,
        "format_rate": 1.0,
        "length_mean": 8.0,
        "length_p50": 8.0,
        "length_p90": 8.0,
        "per_prompt_variance": 0.1,
        "zero_variance_prompts": 0.5,
        "n_prompts": 4,
    }


def _evaluated(tmp_path: Path, spec, scores: dict[str, tuple[float, float, float]]) -> Job:
    """An evaluate stage folder with each model's results (main, general, robustness greedy) on disk."""
    sft, policy, out = tmp_path / "sft", tmp_path / "policy", tmp_path / "evaluate"
    for d in (sft, policy, out):
        d.mkdir()
    for name, (main, general, robust) in scores.items():
        if name != "sft":
            (policy / name).mkdir()
            (policy / name / "state.pt").write_bytes(b"")
            (policy / name / "meta.json").write_text("{}")
        (out / f"{name}.json").write_text(json.dumps(_result(name, main)))
        (out / f"{name}.sets.json").write_text(
            json.dumps({"regression": {"general": _result(name, general)}, "robustness": _result(name, robust)})
        )
    split = _split(tmp_path, train_golds=["2", "2", "2", "3"], eval_golds=["2", "5", "7", "9"])
    inputs = {
        "sft": {"model": str(sft), "dir": str(sft)},
        "policy": {"dir": str(policy), "summary": ""},
        "split": split,
    }
    return Job("evaluate", json.dumps(spec_data(spec)), str(spec.base_dir), str(tmp_path), str(out), inputs)


def _split(folder: Path, train_golds: list[str], eval_golds: list[str]) -> dict[str, str]:
    """Train and held-out parquet files of math rows with these golds (the constant baseline reads both)."""
    import polars as pl

    paths = {}
    for part, golds in (("train", train_golds), ("eval", eval_golds)):
        rows = [
            {
                "id": f"{part}-{i}",
                "category": "gcd",
                "prompt": f"gcd question {i}?",
                "reference": g,
                "verifier": "math",
                "verifier_params": "{}",
            }
            for i, g in enumerate(golds)
        ]
        paths[part] = str(folder / f"{part}.parquet")
        pl.DataFrame(rows).write_parquet(paths[part])
    return paths


def test_a_checkpoint_that_regressed_is_never_best_and_the_console_says_why(toy_spec, tmp_path):
    spec = _spec_with_sets(toy_spec)
    job = _evaluated(
        tmp_path, spec, {"sft": (0.30, 0.80, 0.2), "step_000001": (0.35, 0.79, 0.3), "step_000002": (0.50, 0.70, 0.4)}
    )
    result = stage_calls.evaluate_finish(job, {})
    matrix = json.loads((tmp_path / "evaluate" / "eval_matrix.json").read_text())
    assert result.stats == {
        "models": 3,
        "reused": 0,
        "best": "step_000001",
        "regressed": {"step_000002": ["general"]},
        "constant_pass_at_1_greedy": 0.25,
        "episode_prompts": 0,
        "no_gain": False,
        "warnings": [],
    }
    assert [r["name"] for r in matrix["rows"]] == ["sft", "step_000001", "step_000002", "constant"]
    assert matrix["rows"][3]["constants"] == {"gcd": "Answer: 2"}  # the training golds' most frequent
    assert matrix["best"] == "step_000001" and matrix["best_model"] == "/models/step_000001"
    assert matrix["rows"][2]["regression_delta"]["general"] == pytest.approx(-10.0)
    assert matrix["rows"][1]["robustness"] == pytest.approx(0.3) and matrix["max_regression"] == 2.0
    assert best_line(matrix) == "best:       step_000001 (/models/step_000001)"
    table = artifacts.matrix_rows(matrix)
    assert [r["best"] for r in table] == [False, True, False, False] and table[3]["length mean"] is None
    assert table[2]["general change"] == pytest.approx(-10.0) and table[2]["regressed on"] == "general"

    (tmp_path / "b").mkdir()
    stage_calls.evaluate_finish(
        _evaluated(tmp_path / "b", spec, {"sft": (0.30, 0.80, 0.2), "step_000001": (0.50, 0.70, 0.4)}), {}
    )
    matrix = json.loads((tmp_path / "b" / "evaluate" / "eval_matrix.json").read_text())
    assert matrix["best"] == "sft"
    line = best_line(matrix)
    assert line.startswith("best:       sft: no checkpoint beat the SFT baseline") and "step_000001 lost more" in line


def test_a_gain_a_constant_answer_explains_is_never_best_and_says_so(toy_spec, tmp_path):
    # SFT skipped (the base scores 0); the checkpoint answers `2` to everything: right on the one held-out
    # prompt whose gold is 2, exactly what the constant baseline (picked on the training golds) gets
    spec = _spec_with_sets(toy_spec)
    job = _evaluated(tmp_path, spec, {"sft": (0.0, 0.8, 0.2), "step_000001": (0.25, 0.8, 0.2)})
    result = stage_calls.evaluate_finish(job, {})
    matrix = json.loads((tmp_path / "evaluate" / "eval_matrix.json").read_text())
    assert result.stats["best"] == "sft" and result.stats["no_gain"] is True
    assert matrix["decision"]["beats_sft"] == ["step_000001"] and matrix["decision"]["beats_constant"] == []
    [warning] = result.stats["warnings"]
    assert "step_000001 gains +25.0 points over sft" in warning and "'Answer: 2'" in warning
    assert "constant baseline" in best_line(matrix)
    from rlvrflow.training.eval_matrix import format_matrix

    assert format_matrix(matrix["rows"]).splitlines()[3].startswith("constant")  # beside the regression set's column


def test_a_vllm_eval_engine_never_reads_back_the_training_loops_evals():
    class VLLMLike:  # any engine but the HF one the loops evaluated with
        def generate(self, prompts, n, sampling, seed):
            raise AssertionError("not called")

    assert stage_calls.loop_eval(None, VLLMLike()) is None


def test_samples_pages_put_each_checkpoint_beside_sft(tmp_path):
    def write(name: str, response: str) -> str:
        path = tmp_path / f"{name}.samples.jsonl"
        _jsonl(
            path,
            [
                {
                    "id": "q1",
                    "category": "arithmetic",
                    "prompt": "2+2?",
                    "mode": "greedy",
                    "response": response,
                    "status": "correct" if response == "4" else "wrong",
                    "score": 1.0,
                    "reward": 1.0,
                    "n_tokens": 1,
                }
            ],
        )
        return str(path)

    pages = artifacts.samples_pages({"sft": write("sft", "5"), "step_000002": write("step_000002", "4")})
    assert list(pages) == ["step_000002"]
    assert "sft vs step_000002" in pages["step_000002"] and "| 2+2? | greedy | 5<br>*wrong" in pages["step_000002"]
    assert artifacts.samples_pages({"step_000002": write("x", "4")}) == {}  # nothing to compare against


def test_pair_rows_count_prompts_with_pairs_and_drops_by_reason():
    rows = artifacts.pair_rows({"rows_kept": 3, "pairs": 7, "rejected_by_reason": {"no_correct_sample": 2}})
    assert rows == [
        {"prompts": "gave pairs", "rows": 3, "pairs": 7},
        {"prompts": "no_correct_sample", "rows": 2, "pairs": 0},
    ]


def _doctor_run(tmp_path):
    """An output folder holding one run whose GRPO metrics show the completions growing."""
    out = tmp_path / "out"
    grpo, evaluate, run = out / "stages" / "grpo" / "k1", out / "stages" / "evaluate" / "k2", out / "runs" / "r1"
    for d in (grpo, evaluate, run):
        d.mkdir(parents=True)
    steps = range(1, 41)
    (grpo / "metrics.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": s,
                    "reward_mean": 0.5,
                    "correct_rate": 0.45,
                    "completion_tokens_mean": 15.0 + s,
                    "kl": 0.0,
                    "grad_norm": 1.0,
                    "loss": 0.01,
                    "zero_variance_fraction": 0.3,
                }
            )
            + "\n"
            for s in steps
        )
    )
    evals = [_result("sft", 0.34), _result("step_000040", 0.34)]
    for e in evals:
        (evaluate / f"{e['name']}.json").write_text(json.dumps(e))
    (run / "report.json").write_text(
        json.dumps(
            {
                "stages": {"grpo": {"dir": str(grpo)}, "evaluate": {"dir": str(evaluate)}},
                "evals": [{"name": e["name"]} for e in evals],
                "max_regression": 2.0,
            }
        )
    )
    (out / "latest.json").write_text(json.dumps({"run_dir": str(run)}))
    return out, run


def test_doctor_command_reads_a_run_folder(tmp_path, capsys):
    from rlvrflow.flows.cli import main

    out, run = _doctor_run(tmp_path)
    assert main(["doctor", str(run)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("run doctor: ") and "(length_grows)" in text and "try: " in text
    assert main(["doctor", str(out), "--json"]) == 0  # the output folder: its newest run
    found = json.loads(capsys.readouterr().out)
    assert "length_grows" in {f["name"] for f in found}
    assert main(["doctor", str(tmp_path / "nowhere")]) == 2 and "is not a folder" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """`rlvrflow doctor RUN | head`: the reader is gone before the doctor writes; no traceback, no 'bug'."""
    import os
    import subprocess
    import sys

    _, run = _doctor_run(tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first line
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rlvrflow.flows.cli", "doctor", str(run)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "bug" not in done.stderr and "BrokenPipe" not in done.stderr
