"""DPO by a spec switch, end to end on a tiny domain where an untrained model is sometimes right (an
answer must contain a vowel), so tiering's samples hold pairs:

- `rlvrflow export-dpo` runs prepare ... tier through the stage cache and writes pairs that
  `datasets.load_from_disk` reads with TRL's columns;
- `rlvrflow run --smoke --set training.algorithm=dpo` reuses those stages, trains DPO instead of GRPO,
  and ends with a report naming DPO's checkpoints, the eval matrix (with a regression and a robustness
  set), each model's samples file, the Prefect matrix and samples artifacts, and the doctor's findings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

LETTERS_SPEC = """\
domain: letters
description: answers that must contain a vowel, so an untrained model is sometimes right
sources:
  - name: qa
    path: raw/*.jsonl
    format: jsonl
    fields: {id: qid, question: q, reference: a, solution: s}
    defaults: {category: vowel}
validation:
  categories: [vowel]
verifiers:
  rules:
    - {category: vowel, verifier: regex}
  canaries: {enabled: false}   # garbage often holds a vowel: that is the point of this domain
curriculum:
  eval_fraction: 0.25
orchestration:
  chunk_rows: 16
  retry_delay_seconds: 0
eval:
  regression_sets: [{name: general, path: eval/general.jsonl, verifier: math}]
  robustness_set: eval/robustness.jsonl
"""
DPO_BUDGET = [
    "--set",
    "training.dpo.max_steps=2",
    "--set",
    "training.dpo.batch_size=4",
    "--set",
    "training.dpo.warmup_steps=1",
]


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def letters(tmp_path_factory):
    """(spec path, stage cache) of the vowel domain with its two eval sets."""
    folder = tmp_path_factory.mktemp("letters")
    (folder / "spec.yaml").write_text(LETTERS_SPEC)
    _jsonl(
        folder / "raw" / "part-0.jsonl",
        [
            {"qid": f"q{i:04d}", "q": f"Write a word with a vowel (case {i})", "a": "[aeiou]", "s": "banana"}
            for i in range(48)
        ],
    )
    _jsonl(
        folder / "eval" / "general.jsonl",
        [{"id": f"g{i}", "prompt": f"What is {i} plus 2?", "reference": str(i + 2)} for i in range(4)],
    )
    _jsonl(
        folder / "eval" / "robustness.jsonl",
        [
            {
                "id": f"r{i}",
                "category": "missing_price",
                "verifier": "refusal",
                "prompt": f"Refund {i} items, what do I get back?",
                "reference": "price|cost",
            }
            for i in range(4)
        ],
    )
    return folder / "spec.yaml", folder / "cache"


@pytest.mark.slow
def test_export_dpo_writes_a_dataset_load_from_disk_reads(letters, tmp_path, capsys):
    import datasets

    from rlvrflow.flows.cli import main

    spec, cache = letters
    out = tmp_path / "pairs"
    assert main(["export-dpo", str(spec), "--out", str(out), "--cache", str(cache), "--smoke"]) == 0
    text = capsys.readouterr().out
    stats = json.loads((out / "dpo_stats.json").read_text())
    assert stats["pairs"] > 0 and f"{stats['pairs']} pairs from {stats['rows_kept']} of 24 tiered prompts" in text
    assert "prompts without pairs: " in text and sum(stats["rejected_by_reason"].values()) == 24 - stats["rows_kept"]
    ds = datasets.load_from_disk(str(out / "dataset"))
    assert {"prompt", "chosen", "rejected"} <= set(ds.column_names) and len(ds) == stats["pairs"]
    for row in ds:
        assert row["chosen"] != row["rejected"] and row["chosen_status"] == "correct"
        assert row["rejected_status"] != "correct" and row["tier"] == "learnable"
    assert (cache / "stages" / "tier").is_dir()  # the stages live in the cache, the pairs in --out

    # no prompt of the chosen tiers has pairs: a data error (exit 1) naming the fix
    assert (
        main(
            [
                "export-dpo",
                str(spec),
                "--out",
                str(tmp_path / "none"),
                "--cache",
                str(cache),
                "--smoke",
                "--set",
                "training.dpo.tiers=[too_easy]",
            ]
        )
        == 1
    )
    assert "widen training.dpo.tiers" in capsys.readouterr().err


@pytest.mark.slow
def test_run_with_dpo_reports_dpo_checkpoints_the_eval_matrix_samples_and_doctor(
    prefect_harness, letters, capsys, read_artifact
):
    from rlvrflow.flows.cli import main

    spec, cache = letters
    assert main(["run", str(spec), "--out", str(cache), "--smoke", "--set", "training.algorithm=dpo", *DPO_BUDGET]) == 0
    text = capsys.readouterr().out
    latest = json.loads((cache / "latest.json").read_text())
    report = json.loads(Path(latest["report"]).read_text())

    assert report["algorithm"] == "dpo" and report["dpo_pairs"]["pairs"] > 0
    final = Path(report["checkpoint"])
    assert final.name == "step_000002" and final.parent.parent.name == "dpo" and final.is_dir()
    assert "(final of DPO)" in text and "  dpo       " in text and "  grpo " not in text
    names = [e["name"] for e in report["evals"]]
    assert names == ["sft", "step_000001", "step_000002"]
    assert all(Path(e["model"]).parent.parent.name == "dpo" for e in report["evals"][1:])

    matrix = report["eval_matrix"]
    assert [r["name"] for r in matrix] == [*names, "constant"] and report[
        "max_regression"
    ] == 2.0  # + the constant baseline
    assert all(
        set(r["regression"]) == {"general"} and r["robustness"] is not None for r in matrix if not r.get("is_constant")
    )
    assert report["best_model"] in names and f"best:       {report['best_model']}" in text
    assert "model" in text and "p@1 greedy" in text and "general" in text.split("p@1 greedy", 1)[1].split("\n")[0]
    assert "run doctor: " in text

    assert set(report["samples"]) == set(names)
    for name, path in report["samples"].items():
        rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
        assert rows and {r["mode"] for r in rows} == {"greedy", "sampled"}, name
    table = read_artifact("letters-eval-matrix")
    assert table is not None and table.type == "table"
    page = read_artifact("letters-samples-step-000002")
    assert page is not None and "sft vs step_000002" in page.data


@pytest.mark.slow
def test_run_with_async_rollouts_by_a_spec_switch(prefect_harness, letters, capsys):
    """`training.grpo.rollout_mode: async` through `rlvrflow run`: the GRPO stage trains from the generator
    process's queue (its counters in summary.json), and the run ends with the gain over SFT."""
    from rlvrflow.flows.cli import main

    spec, cache = letters
    assert main(["run", str(spec), "--out", str(cache), "--smoke", "--set", "training.grpo.rollout_mode=async"]) == 0
    text = capsys.readouterr().out
    report = json.loads(Path(json.loads((cache / "latest.json").read_text())["report"]).read_text())
    grpo_dir = Path(report["stages"]["grpo"]["dir"])
    summary = json.loads((grpo_dir / "summary.json").read_text())
    assert report["algorithm"] == "grpo" and summary["steps"] == 2
    assert summary["groups_seen"] >= summary["groups_trained"] > 0 and "groups_stale" in summary
    assert (grpo_dir / "rollout_queue").is_dir()  # the queue lives under the run folder
    assert text.rstrip().splitlines()[-1].startswith("GRPO over SFT, held-out greedy pass@1 gain:")
