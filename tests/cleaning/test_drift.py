"""Tonight's rows against the champion's (cleaning/drift.py): a night like the others passes; a
vanished category, answers in another unit, another answer format or lost worked solutions fail,
each check named."""

import random

import polars as pl
import pytest

from rlvrflow.cleaning.config import DriftConfig
from rlvrflow.cleaning.drift import check_drift, profile, reference_kind, reference_value


def night(
    seed: int,
    n: int = 300,
    scale: float = 1.0,
    drop: str | None = None,
    fraction_share: float = 0.0,
    solved: float = 0.8,
    file: str = "raw/day1.jsonl",
    new_category: float = 0.0,
) -> pl.DataFrame:
    """Retail-like rows from one log file: refunds in yuan, unit conversions, choice questions."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        category = rng.choice(["refund", "unit_conversion", "policy_choice"])
        if category == drop:
            category = "refund"
        if rng.random() < new_category:
            category = "gift_cards"
        if category == "refund":
            ref = str(round(rng.randint(5, 400) * scale))
        elif category == "unit_conversion":
            ref = (
                f"{rng.randint(1, 9)}/{rng.randint(10, 19)}"
                if rng.random() < fraction_share
                else str(rng.randint(100, 5000))
            )
        else:
            ref = rng.choice("ABCD")
        rows.append(
            {
                "id": f"{seed}-{i}",
                "category": category,
                "question": "How much is " + "x" * rng.randint(20, 80),
                "reference": ref,
                "solution": "worked" if rng.random() < solved else "",
                "source": f"{file}:{i + 1}",
            }
        )
    return pl.DataFrame(rows)


FILES = {"raw/day1.jsonl": {"rows": 300, "rejected": 0, "sha256": "aa"}}
DAY2 = {**FILES, "raw/day2.jsonl": {"rows": 280, "rejected": 0, "sha256": "bb"}}


def tonight(**day2) -> pl.DataFrame:
    """The champion's day and a new day's file beside it, as the glob reads them."""
    return pl.concat([night(0), night(1, n=280, file="raw/day2.jsonl", **day2)])


@pytest.fixture(scope="module")
def champion():
    return profile(night(0), FILES)


def test_reference_kinds_and_values():
    assert [reference_kind(x) for x in ("42", "-3.50", "3/4", "15%", '{"a": 1}', "B", " ", None)] == [
        "integer",
        "decimal",
        "fraction",
        "percent",
        "json",
        "text",
        "empty",
        "empty",
    ]
    assert reference_value("1,299") == 1299.0 and reference_value("15%") == 15.0 and reference_value("3/4") is None


def test_the_profile(champion):
    assert champion["rows"] == 300 and set(champion["categories"]) == {"refund", "unit_conversion", "policy_choice"}
    refund = champion["categories"]["refund"]
    assert (
        refund["reference_kinds"] == {"integer": 1.0}
        and 5 <= refund["reference_range"][0] < refund["reference_range"][1] <= 400
    )
    assert champion["categories"]["policy_choice"]["reference_range"] is None
    assert 0.7 < champion["solution_share"] < 0.9
    assert champion["files"] == {"raw/day1.jsonl": {**FILES["raw/day1.jsonl"], "kept": 300}}


def test_a_night_like_the_others_passes_and_says_what_is_new(champion):
    report = check_drift(tonight(), DAY2, champion, DriftConfig())
    assert report["failed"] == [] and len(report["checks"]) >= 12
    assert report["scope"] == "280 rows from 1 new or changed file(s)"
    changes = report["changes"]
    assert changes["files_added"] == ["raw/day2.jsonl"] and changes["files_changed"] == []
    assert changes["rows"] == {"then": 300, "now": 580}
    assert changes["rows_per_category"]["refund"]["then"] == champion["categories"]["refund"]["rows"]


@pytest.mark.parametrize(
    "day2, expected",
    [
        (dict(scale=100.0), "category refund: numeric references within"),  # fen instead of yuan
        (dict(drop="policy_choice"), "every category of the champion's rows is there"),  # a category vanished
        (dict(new_category=0.5), "categories the champion never saw are at most 15%"),
        (dict(fraction_share=0.5), "category unit_conversion: reference formats stay integer"),
        (dict(fraction_share=1.0), "category unit_conversion: integer references at least"),
        (dict(solved=0.3), "rows with a worked solution at least"),
    ],
)
def test_a_drifted_day_fails_the_check_that_names_it_however_many_good_days_surround_it(champion, day2, expected):
    rows = pl.concat(
        [night(0), night(5, n=3000, file="raw/older.jsonl"), night(2, n=280, file="raw/day2.jsonl", **day2)]
    )
    files = {**DAY2, "raw/older.jsonl": {"rows": 3000, "rejected": 0, "sha256": "cc"}}
    older = profile(
        pl.concat([night(0), night(5, n=3000, file="raw/older.jsonl")]),
        {k: v for k, v in files.items() if k != "raw/day2.jsonl"},
    )
    report = check_drift(rows, files, older, DriftConfig())
    assert report["scope"] == "280 rows from 1 new or changed file(s)"
    assert any(f.startswith(expected) for f in report["failed"]), report["failed"]
    assert all(not c["ok"] for c in report["checks"] if c["check"] in report["failed"])


def test_rejects_by_reason_then_and_now():
    champion = profile(night(0), FILES, {"duplicate": 4, "null:reference": 1})
    report = check_drift(tonight(), DAY2, champion, DriftConfig(), {"duplicate": 9, "bad_category": 2})
    assert report["changes"]["rejects_by_reason"] == {
        "bad_category": {"then": 0, "now": 2},
        "duplicate": {"then": 4, "now": 9},
        "null:reference": {"then": 1, "now": 0},
    }


def test_a_broken_source_file_fails(champion):
    rows = pl.concat([night(0), night(1, n=10, file="raw/day2.csv")])
    files = {**FILES, "raw/day2.csv": {"rows": 150, "rejected": 50, "sha256": "cc"}}  # kept and quarantined at ingest
    report = check_drift(rows, files, champion, DriftConfig())
    assert "file raw/day2.csv: at most 50% of its rows lost before training (190 of 200)" in report["failed"]
    # logs that always lose many rows (dedup) are held to their own usual loss plus 10 points
    lossy = profile(night(0), {"raw/day1.jsonl": {"rows": 900, "rejected": 0, "sha256": "aa"}})  # 1 in 3 kept
    files = {
        "raw/day1.jsonl": {"rows": 900, "rejected": 0, "sha256": "aa"},
        "raw/day2.jsonl": {"rows": 840, "rejected": 0, "sha256": "bb"},
    }
    ok = check_drift(pl.concat([night(0), night(1, n=280, file="raw/day2.jsonl")]), files, lossy, DriftConfig())
    assert not [f for f in ok["failed"] if f.startswith("file ")], ok["failed"]


def test_the_bounds_come_from_the_section(champion):
    shifted = tonight(scale=100.0)
    assert check_drift(shifted, DAY2, champion, DriftConfig(max_out_of_range=1.0))["failed"] == []
    nothing = check_drift(night(0).clear(), FILES, champion, DriftConfig())
    assert nothing["failed"] == ["no rows tonight"]
    with pytest.raises(ValueError, match="version"):
        check_drift(tonight(), DAY2, {**champion, "version": 0}, DriftConfig())


def test_a_new_day_of_one_source_is_measured_against_that_sources_rows():
    """The champion read two sources: ticket logs (refunds, unit conversions, choices) and an agent
    console export holding a fourth category. A new day of tickets holds no console rows, which is no
    drift: its rows are checked against the champion's ticket rows. A day without one of the ticket
    categories still fails."""
    console = pl.DataFrame(
        [
            {
                "id": f"c{i}",
                "category": "multi_step",
                "question": "Refund the damaged line " + "y" * 30,
                "reference": "[]",
                "solution": "",
                "source": f"raw/console.jsonl:{i + 1}",
            }
            for i in range(200)
        ]
    )
    files = {
        "raw/day1.jsonl": {"rows": 300, "rejected": 0, "sha256": "aa", "source": "tickets"},
        "raw/console.jsonl": {"rows": 200, "rejected": 0, "sha256": "cc", "source": "console"},
    }
    champion = profile(pl.concat([night(0), console]), files)
    assert set(champion["sources"]) == {"tickets", "console"}
    assert set(champion["sources"]["tickets"]["categories"]) == {"refund", "unit_conversion", "policy_choice"}
    day2 = {**files, "raw/day2.jsonl": {"rows": 280, "rejected": 0, "sha256": "bb", "source": "tickets"}}
    report = check_drift(
        pl.concat([night(0), console, night(1, n=280, file="raw/day2.jsonl")]), day2, champion, DriftConfig()
    )
    assert report["failed"] == [], report["failed"]
    assert report["scope"].endswith("against the champion's rows of source tickets")
    some = night(1, n=280, file="raw/day2.jsonl").with_columns(  # a few console-kind tickets: seen, not new
        category=pl.when(pl.col("id").str.ends_with("7")).then(pl.lit("multi_step")).otherwise(pl.col("category"))
    )
    mixed = check_drift(pl.concat([night(0), console, some]), day2, champion, DriftConfig())
    assert mixed["failed"] == [], mixed["failed"]
    without_global = {k: v for k, v in champion.items() if k != "sources"}  # a profile from before sources
    old = check_drift(
        pl.concat([night(0), console, night(1, n=280, file="raw/day2.jsonl")]), day2, without_global, DriftConfig()
    )
    assert any(c.startswith("every category of the champion's rows is there") for c in old["failed"])
    gone = check_drift(
        pl.concat([night(0), console, night(1, n=280, file="raw/day2.jsonl", drop="policy_choice")]),
        day2,
        champion,
        DriftConfig(),
    )
    assert any(c.startswith("every category of the champion's rows is there") for c in gone["failed"])
