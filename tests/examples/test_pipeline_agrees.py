"""The cleaning package, run on the generated logs with spec.yaml's settings, rejects exactly the
rows the manifest says were injected, for the reason it names, and keeps `clean_rows` rows.

This is the check the manifest exists for. It runs ingest -> clean -> dedup (validation is the
Great Expectations suite, tested in tests/cleaning) on the 400-row fixture with the real spec, and
attach on the tool-call rows: each one's reference passes its own verifier's self-check."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from types import SimpleNamespace

import pytest


def test_cleaning_rejects_exactly_the_injected_rows(generated, retail, tmp_path):
    from rlvrflow import cleaning
    import rlvrflow.flows.spec as flows_spec

    spec_file = tmp_path / "spec.yaml"  # the real spec, next to this run's raw/ and shop.db
    shutil.copy(retail.generate.HERE / "spec.yaml", spec_file)
    shutil.copytree(generated.out, tmp_path / "raw")
    spec = flows_spec.load_spec(spec_file)

    ingested = cleaning.ingest(list(spec.sources), spec.domain, spec.base_dir)
    cleaned = cleaning.clean_stage(ingested.kept, spec.cleaning, spec.domain)
    deduped = cleaning.dedup(cleaned.kept, spec.cleaning.dedup)

    got = {}
    for stage in (ingested, cleaned, deduped):
        got.update(zip(stage.rejects["source"].to_list(), stage.rejects["reason"].to_list()))
    expected = {"raw/" + e["source"]: e for e in generated.manifest["rejects"]}
    wrong = {
        src: (expected[src]["kind"] if src in expected else "clean row", reason)
        for src, reason in got.items()
        if reason not in expected.get(src, {}).get("reasons", [])
    }
    missed = Counter(e["kind"] for src, e in expected.items() if src not in got)
    assert not wrong, f"rejected for another reason than the manifest's: {wrong}"
    assert not missed, f"injected rows the cleaner kept: {missed}"
    # the agent console's multi-step tickets come on top of the manifest's clean rows, all kept
    assert deduped.kept.height == generated.manifest["clean_rows"] + generated.manifest["multi_step"]["rows"]


def test_pii_is_scrubbed_where_the_manifest_put_it_and_near_misses_survive(generated, retail, tmp_path):
    """spec.yaml switches `cleaning.pii` on: every injected phone, e-mail, ID, card and IP is gone
    from its field, the clean stage's counts by kind equal the manifest's, and every near miss
    (order numbers, amounts, IDs and cards failing their checksums) is still there verbatim."""
    from rlvrflow import cleaning
    import rlvrflow.flows.spec as flows_spec

    spec_file = tmp_path / "spec.yaml"
    shutil.copy(retail.generate.HERE / "spec.yaml", spec_file)
    shutil.copytree(generated.out, tmp_path / "raw")
    spec = flows_spec.load_spec(spec_file)
    assert spec.cleaning.pii.enabled

    ingested = cleaning.ingest(list(spec.sources), spec.domain, spec.base_dir)
    cleaned = cleaning.clean_stage(ingested.kept, spec.cleaning, spec.domain)
    m = generated.manifest
    assert cleaned.stats["pii"] == m["pii_by_kind"] and sum(m["pii_by_kind"].values()) > 0
    rows = {r["source"]: r for r in cleaned.kept.iter_rows(named=True)}
    placeholders = {
        "phone": "<PHONE>",
        "email": "<EMAIL>",
        "id_number": "<ID_NUMBER>",
        "bank_card": "<BANK_CARD>",
        "ip_address": "<IP_ADDRESS>",
    }
    seen = set()
    for entry in m["noisy_rows"]:
        row = rows["raw/" + entry["source"]]
        for found in entry.get("pii", []):
            seen.add("pii")
            assert found["text"] not in row[found["field"]], (found, row[found["field"]])
            assert placeholders[found["kind"]] in row[found["field"]]
        for kept in entry.get("kept", []):
            seen.add("kept")
            assert kept["text"] in row[kept["field"]], (kept, row[kept["field"]])
    assert seen == {"pii", "kept"}


@pytest.mark.parametrize("response", ["Answer: 3/4", "Answer: \\frac{3}{4}", "答案: \\dfrac{3}{4}", "Answer: 0.75"])
def test_a_fraction_reference_has_one_form_and_the_math_verifier_takes_both(retail, response):
    """The generator's latex noise writes fraction answers as \\dfrac / \\frac / $\\tfrac..$; the
    clean stage writes them all as a/b, which the math verifier matches in either notation."""
    import random

    from rlvrflow import cleaning
    from rlvrflow import verifiers

    rng = random.Random(0)
    forms = {retail.noise.latex("0.75", rng) for _ in range(60)} - {
        "$0.75$",
        "\\boxed{0.75}",
        "\\(0.75\\)",
        "$\\boxed{0.75}$",
    }
    assert len(forms) >= 4  # \dfrac, \frac, \tfrac, with and without $...$
    cfg = cleaning.CleaningConfig()
    assert {cleaning.clean_value(f, "reference", "unit_conversion", cfg) for f in forms} == {"3/4"}
    verdict = verifiers.verify("math", response, "3/4", {})
    assert verdict.status == "correct", verdict


def test_attach_keeps_every_tool_call_row(retail, generator_cli, tmp_path):
    """The tool-call rows, in both reference forms, survive attach's reference self-check with the
    spec's tools; a row whose log has no reply stays outcome-only (no reply made up for SFT). A third
    of the rows are worked here: at the default 6%, 400 rows give about one worked tool call."""
    from rlvrflow.cleaning import clean_stage, dedup, ingest
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.verifiers import attach

    generator_cli(tmp_path / "raw", args=("--worked-fraction", "0.33"))
    generated = SimpleNamespace(manifest=json.loads((tmp_path / "raw" / "manifest.json").read_text(encoding="utf-8")))
    spec_file = tmp_path / "spec.yaml"
    shutil.copy(retail.generate.HERE / "spec.yaml", spec_file)
    spec = load_spec(spec_file)
    ingested = ingest(list(spec.sources), spec.domain, spec.base_dir)
    cleaned = dedup(clean_stage(ingested.kept, spec.cleaning, spec.domain).kept, spec.cleaning.dedup).kept
    rows = cleaned.filter(cleaned["category"] == "tool_call")
    assert rows.height == generated.manifest["clean_by_category"]["tool_call"]
    unsolved = (rows["solution"].fill_null("") == "").sum()
    assert 0 < unsolved < rows.height  # some logs have the agent's reply, some do not
    kept, rejects, stats = attach(rows, spec.verifiers, spec.base_dir, workers=1)
    assert rejects.height == 0, rejects.select("reference", "detail").to_dicts()
    assert kept.height == rows.height
    # a logged reply is kept as logged; a row without one stays outcome-only (verifiers.answer_only_targets off)
    assert all(s.startswith("<tool_call>\n{") for s in kept["solution"] if s)
    assert (kept["solution"] == "").sum() == unsolved
    assert kept["reference"].str.starts_with("{").sum() == generated.manifest["tool_call"]["reference_forms"]["json"]
