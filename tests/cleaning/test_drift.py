"""Tonight's rows against the champion's (cleaning/drift.py): a night like the others passes; a
vanished category, answers in another unit, another answer format or lost worked solutions fail,
each check named."""
import random

import polars as pl
import pytest

from rlvrflow.cleaning.config import DriftConfig
from rlvrflow.cleaning.drift import check_drift, profile, reference_kind, reference_value


def night(seed: int, n: int = 300, scale: float = 1.0, drop: str | None = None, fraction_share: float = 0.0,
          solved: float = 0.8) -> pl.DataFrame:
    """Retail-like rows: refunds in yuan, unit conversions, choice questions."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        category = rng.choice(["refund", "unit_conversion", "policy_choice"])
        if category == drop:
            category = "refund"
        if category == "refund":
            ref = str(round(rng.randint(5, 400) * scale))
        elif category == "unit_conversion":
            ref = f"{rng.randint(1, 9)}/{rng.randint(10, 19)}" if rng.random() < fraction_share else \
                str(rng.randint(100, 5000))
        else:
            ref = rng.choice("ABCD")
        rows.append({"id": f"{seed}-{i}", "category": category, "question": "How much is " + "x" * rng.randint(20, 80),
                     "reference": ref, "solution": "worked" if rng.random() < solved else ""})
    return pl.DataFrame(rows)


FILES = {"raw/day1.jsonl": {"rows": 300, "rejected": 0, "sha256": "aa"}}


@pytest.fixture(scope="module")
def champion():
    return profile(night(0), FILES)


def test_reference_kinds_and_values():
    assert [reference_kind(x) for x in ("42", "-3.50", "3/4", "15%", '{"a": 1}', "B", " ", None)] == \
        ["integer", "decimal", "fraction", "percent", "json", "text", "empty", "empty"]
    assert reference_value("1,299") == 1299.0 and reference_value("15%") == 15.0 and reference_value("3/4") is None


def test_the_profile(champion):
    assert champion["rows"] == 300 and set(champion["categories"]) == {"refund", "unit_conversion", "policy_choice"}
    refund = champion["categories"]["refund"]
    assert refund["reference_kinds"] == {"integer": 1.0} and 5 <= refund["reference_range"][0] < refund["reference_range"][1] <= 400
    assert champion["categories"]["policy_choice"]["reference_range"] is None
    assert 0.7 < champion["solution_share"] < 0.9 and champion["files"] == FILES


def test_a_night_like_the_others_passes_and_says_what_is_new(champion):
    files = {**FILES, "raw/day2.jsonl": {"rows": 280, "rejected": 2, "sha256": "bb"}}
    report = check_drift(night(1, n=280), files, champion, DriftConfig())
    assert report["failed"] == [] and len(report["checks"]) >= 9
    changes = report["changes"]
    assert changes["files_added"] == ["raw/day2.jsonl"] and changes["files_changed"] == []
    assert changes["rows"] == {"then": 300, "now": 280}
    assert changes["rows_per_category"]["refund"]["then"] == champion["categories"]["refund"]["rows"]


@pytest.mark.parametrize("tonight, expected", [
    (dict(scale=100.0), "category refund: numeric references within"),          # fen instead of yuan
    (dict(drop="policy_choice"), "category policy_choice: share at least"),     # a source's category vanished
    (dict(fraction_share=0.5), "category unit_conversion: reference formats stay integer"),
    (dict(solved=0.3), "rows with a worked solution at least"),
])
def test_a_drifted_night_fails_the_check_that_names_it(champion, tonight, expected):
    report = check_drift(night(2, **tonight), FILES, champion, DriftConfig())
    assert any(f.startswith(expected) for f in report["failed"]), report["failed"]
    assert all(not c["ok"] for c in report["checks"] if c["check"] in report["failed"])


def test_a_broken_source_file_fails(champion):
    rows = night(1, n=310).with_columns(
        pl.Series("source", [f"raw/day1.jsonl:{i + 1}" for i in range(300)] + [f"raw/day2.csv:{i}" for i in range(10)]))
    files = {**FILES, "raw/day2.csv": {"rows": 150, "rejected": 50, "sha256": "cc"}}  # kept and quarantined at ingest
    report = check_drift(rows, files, champion, DriftConfig())
    assert report["failed"] == ["file raw/day2.csv: at most 50% of its rows lost before training (190 of 200)"]


def test_the_bounds_come_from_the_section(champion):
    shifted = night(3, scale=100.0)
    assert check_drift(shifted, FILES, champion, DriftConfig(max_out_of_range=1.0))["failed"] == []
    assert check_drift(pl.DataFrame(schema=night(0).schema), FILES, champion, DriftConfig())["failed"] == \
        ["no rows tonight"]
    with pytest.raises(ValueError, match="version"):
        check_drift(night(1), FILES, {**champion, "version": 0}, DriftConfig())
