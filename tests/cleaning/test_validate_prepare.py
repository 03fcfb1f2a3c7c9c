"""Validation (Great Expectations) and `prepare` end to end, on small files and the sample domain."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rlvrflow.cleaning import (
    CleaningConfig,
    SourceSpec,
    ValidationConfig,
    ValidationFailed,
    clean_frame,
    clean_stage,
    prepare,
    validate,
)
from rlvrflow.cleaning.template import build_prompts

COLUMNS = ["id", "domain", "category", "question", "reference", "solution", "prompt", "source"]


def frame(n: int, **overrides) -> pl.DataFrame:
    data = {
        "id": [f"r{i}" for i in range(n)],
        "domain": ["d"] * n,
        "category": ["arithmetic"] * n,
        "question": [f"What is {i} + 1?" for i in range(n)],
        "reference": [str(i + 1) for i in range(n)],
        "solution": [""] * n,
        "prompt": [f"What is {i} + 1?\nAnswer:" for i in range(n)],
        "source": [f"f.jsonl:{i + 1}" for i in range(n)],
    }
    for col, values in overrides.items():
        data[col] = values + data[col][len(values) :]
    return pl.DataFrame(data)


def test_row_checks_reject_with_slugs_and_keep_the_rest():
    df = frame(
        20,
        category=["bogus"],
        id=["r0", "r0"],
        question=["What is 0 + 1?", "Ok?", "x"],
        reference=["1", "2", "3", ""],
        prompt=["p"] * 4 + ["p" * 500],
    )
    result, report = validate(
        df, ValidationConfig(categories=["arithmetic"], max_prompt_chars=100, max_rejected_fraction=0.5)
    )
    got = dict(zip(result.rejects["source"].to_list(), result.rejects["reason"].to_list()))
    # row 2 repeats row 1's id, but row 1 is rejected (bad category), so row 2 is the one kept
    assert got == {
        "f.jsonl:1": "bad_category",
        "f.jsonl:3": "question_too_short",
        "f.jsonl:4": "empty_reference",
        "f.jsonl:5": "prompt_too_long",
    }
    assert "not in validation.categories" in result.rejects["detail"][0]
    assert report["success"] and not report["gx_success"] and report["rows_rejected"] == 4
    assert json.dumps(report)  # plain JSON
    assert result.stats["rows_in"] == 20 == result.kept.height + result.rejects.height
    assert result.kept["id"].n_unique() == result.kept.height == 16


def test_duplicate_ids_keep_the_first_copy():
    df = frame(12, id=["a", "b", "a", "a"])
    result, _ = validate(df, ValidationConfig())
    assert result.rejects["source"].to_list() == ["f.jsonl:3", "f.jsonl:4"]
    assert result.rejects["reason"].to_list() == ["duplicate_id"] * 2 and "earlier row" in result.rejects["detail"][0]


def test_too_many_bad_rows_stop_the_run_with_a_readable_report():
    df = frame(10, category=["bogus"] * 5)
    with pytest.raises(ValidationFailed) as info:
        validate(df, ValidationConfig(categories=["arithmetic"], max_rejected_fraction=0.2))
    text = str(info.value)
    assert "5 of 10 rows" in text and "bad_category" in text and "r0 (f.jsonl:1)" in text
    assert info.value.report["success"] is False and info.value.report["failures"][0]["rows"]


def test_too_few_rows_stop_the_run():
    with pytest.raises(ValidationFailed, match="too_few_rows"):
        validate(frame(3), ValidationConfig(min_rows=10))


def test_prepare_on_small_files_reconciles_and_writes_every_output(tmp_path, write):
    rec = lambda i, **kw: json.dumps({"q": f"<s>What is {i} + {i}?</s>", "a": str(2 * i), **kw})  # noqa: E731
    write("raw/a.jsonl", "\n".join([rec(1), rec(2), rec(1), "{oops", rec(3, a="<pad>"), rec(4, type="other")]) + "\n")
    src = SourceSpec(
        name="a",
        path="raw/*.jsonl",
        format="jsonl",
        fields={"question": "q", "reference": "a", "category": "type"},
        defaults={"category": "arithmetic"},
    )
    out = tmp_path / "out"
    result = prepare(
        [src],
        CleaningConfig(),
        ValidationConfig(categories=["arithmetic"], max_rejected_fraction=0.5),
        "toy",
        tmp_path,
        out,
    )
    st = json.loads((out / "stats.json").read_text())
    assert st["rows_in"] == 6 == st["rows_kept"] + st["rows_rejected"]
    assert st["rejected_by_reason"] == {
        "bad_category": 1,
        "duplicate_exact": 1,
        "empty_reference": 1,
        "malformed_json": 1,
    }
    assert [st["stages"][s]["rows_in"] for s in ("ingest", "clean", "dedup", "validate")] == [6, 5, 4, 3]
    clean = pl.read_parquet(out / "clean.parquet")
    assert clean.columns == COLUMNS and clean["question"].to_list() == ["What is 1 + 1?", "What is 2 + 2?"]
    assert clean["id"].str.len_chars().to_list() == [16, 16] and clean["prompt"][0].startswith("What is 1 + 1?")
    rej = pl.read_parquet(out / "rejects.parquet")
    assert {"stage", "reason", "detail", "source"} <= set(rej.columns) and rej.height == 2 + 2
    assert (out / "validation.json").exists() and (out / "stages" / "dedup_rejects.parquet").exists()
    assert result.kept.equals(clean)


def test_prepare_writes_validation_json_when_it_fails(tmp_path, write):
    write("a.jsonl", json.dumps({"question": "What is 1 + 1?", "reference": "2", "category": "x"}) + "\n")
    src = SourceSpec(name="a", path="a.jsonl", format="jsonl")
    with pytest.raises(ValidationFailed):
        prepare([src], CleaningConfig(), ValidationConfig(categories=["y"]), "toy", tmp_path, tmp_path / "o")
    assert json.loads((tmp_path / "o" / "validation.json").read_text())["success"] is False
    assert not (tmp_path / "o" / "clean.parquet").exists()


@pytest.fixture(scope="module")
def retail_run(retail_domain, tmp_path_factory):
    spec, folder, manifest = retail_domain
    cleaning = CleaningConfig.model_validate(spec["cleaning"])
    out = tmp_path_factory.mktemp("retail_out")
    result = prepare(
        [SourceSpec.model_validate(s) for s in spec["sources"]],
        cleaning,
        ValidationConfig.model_validate(spec["validation"]),
        spec["domain"],
        folder,
        out,
    )
    return result, cleaning, manifest, out


def test_sample_domain_reconciles_with_its_manifest(retail_run):
    result, _, manifest, out = retail_run
    st = json.loads((out / "stats.json").read_text())
    multi_step = manifest["multi_step"]["rows"]  # the agent console's tickets, counted apart and all clean
    assert st["rows_in"] == manifest["records_total"] + multi_step == st["rows_kept"] + st["rows_rejected"]
    for name, stage in st["stages"].items():
        assert stage["rows_in"] == stage["rows_kept"] + stage["rows_rejected"], name
    got = {
        s.rsplit("/", 1)[-1]: r for s, r in zip(result.rejects["source"].to_list(), result.rejects["reason"].to_list())
    }
    for expected in manifest["rejects"]:  # every injected problem is caught, with its slug
        reason = got.get(expected["source"])
        assert reason is not None, expected
        assert reason in expected["reasons"], (expected, reason)
    # Beyond the manifest, dedup may only find a few more near-duplicates of its own (the generator
    # can draw the same policy case twice with another customer name: same facts, same answer).
    extra = {s: r for s, r in got.items() if s not in {e["source"] for e in manifest["rejects"]}}
    assert set(extra.values()) <= {"duplicate_near"} and len(extra) <= 0.005 * manifest["records_total"]
    assert st["rows_kept"] == manifest["clean_rows"] + multi_step - len(extra)


def test_sample_domain_noise_is_gone_and_prose_punctuation_stays(retail_run):
    result, *_ = retail_run
    text = pl.concat([result.kept["question"], result.kept["reference"]])
    for noise in ["<|im_end|>", "<s>", "\u200b", "\ufeff", "Ã©", "â€", "\\dfrac", "\r"]:
        assert not text.str.contains(noise, literal=True).any(), noise
    assert result.kept["question"].str.contains("，", literal=True).any()


def test_cleaning_clean_output_changes_nothing(retail_run):
    result, cleaning, _, out = retail_run
    clean = pl.read_parquet(out / "clean.parquet")
    assert build_prompts(clean_frame(clean, cleaning), cleaning.template).equals(clean)
    again = clean_stage(clean, cleaning, clean["domain"][0])
    assert again.kept.equals(clean) and again.rejects.height == 0
