"""generate.py --day N (examples/retail/days.py): one more day's ticket log beside the sample, as a nightly
retraining run finds it; new ids and questions, the sample's categories and fields, the same bytes for
the same seed and day; a broken field mapping and shifted answers on request."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import RETAIL

MATH = {"arithmetic", "discount", "order_total", "unit_conversion"}


def _rows(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return [r for r in rows if isinstance(r, dict)]


def _key(question: str) -> str:
    return re.sub(r"\W+", "", question.lower())


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    """A 200-row sample with days 1 and 2 beside it (60 rows each), and the same again in a second folder."""
    from .conftest import run_generate

    folders = []
    for name in ("a", "b"):
        out = tmp_path_factory.mktemp(f"days_{name}")
        run_generate(out, 0, 200)
        for day in (1, 2):
            run_generate(out, 0, 200, args=("--day", str(day), "--day-rows", "60"))
        folders.append(out)
    return folders


def test_each_day_adds_new_ids_and_new_questions_in_every_category(week):
    out = week[0]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    sample = [r for f in sorted(out.glob("tickets_2026-0[123].jsonl")) for r in _rows(f)]
    day1, day2 = _rows(out / "tickets_2026-04-01.jsonl"), _rows(out / "tickets_2026-04-02.jsonl")
    assert manifest["days"]["1"]["rows"] == len(day1) == 60 + 2  # tool calls on top, as in the sample
    assert {r["ticket_id"][:8] for r in day1} == {"T260401-"} and {r["ticket_id"][:8] for r in day2} == {"T260402-"}
    new_ids = [r["ticket_id"] for r in day1 + day2]
    assert len(set(new_ids)) == len(new_ids) and not set(new_ids) & {r.get("ticket_id") for r in sample}
    seen = {_key(r["body"]) for r in sample if isinstance(r.get("body"), str)}
    assert not seen & {_key(r["body"]) for r in day1}
    assert not (seen | {_key(r["body"]) for r in day1}) & {_key(r["body"]) for r in day2}
    assert {r["type"] for r in day1} == set(manifest["clean_by_category"]) == set(manifest["days"]["1"]["by_category"])
    assert {k for r in day1 for k in r} <= {k for r in sample for k in r}  # the export's own fields
    assert all(r["created_at"].startswith("2026-04-01T") for r in day1)


def test_same_seed_and_days_same_bytes_other_seed_other_bytes(week, tmp_path):
    a, b = week
    for name in ("tickets_2026-04-01.jsonl", "tickets_2026-04-02.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    from .conftest import run_generate

    run_generate(tmp_path, 1, 200)
    run_generate(tmp_path, 1, 200, args=("--day", "1", "--day-rows", "60"))
    assert (tmp_path / "tickets_2026-04-01.jsonl").read_bytes() != (a / "tickets_2026-04-01.jsonl").read_bytes()


def test_a_broken_mapping_and_shifted_answers(tmp_path):
    from .conftest import run_generate

    for name in ("plain", "broken", "shifted"):
        run_generate(tmp_path / name, 0, 200)
    run_generate(tmp_path / "plain", 0, 200, args=("--day", "3", "--day-rows", "60"))
    run_generate(
        tmp_path / "broken", 0, 200, args=("--day", "3", "--day-rows", "60", "--rename-field", "answer=resolution")
    )
    run_generate(tmp_path / "shifted", 0, 200, args=("--day", "3", "--day-rows", "60", "--shift-answers", "100"))
    plain, broken, shifted = (_rows(tmp_path / n / "tickets_2026-04-03.jsonl") for n in ("plain", "broken", "shifted"))
    assert not any("answer" in r for r in broken) and [r["resolution"] for r in broken] == [r["answer"] for r in plain]
    moved = 0
    for before, after in zip(plain, shifted):
        assert after["body"] == before["body"]
        if before["type"] in MATH and re.fullmatch(r"-?\d+(\.\d+)?", before["answer"]):
            assert float(after["answer"]) == pytest.approx(100 * float(before["answer"]))
            moved += 1
        else:
            assert after["answer"] == before["answer"]
    assert moved > 40
    entry = json.loads((tmp_path / "shifted" / "manifest.json").read_text(encoding="utf-8"))["days"]["3"]
    assert entry["shifted_answers"] == 100 and entry["renamed_field"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (("--day", "1"), "manifest.json: generate the sample there first"),
        (("--shift-answers", "100"), "add --day N"),
    ],
)
def test_bad_day_options_say_what_to_do(tmp_path, args, message):
    done = subprocess.run(
        [sys.executable, str(RETAIL / "generate.py"), "--out", str(tmp_path), "--db", str(tmp_path / "shop.db"), *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and message in done.stderr


def test_a_rename_must_name_a_ticket_field(tmp_path):
    from .conftest import run_generate

    run_generate(tmp_path, 0, 200)
    with pytest.raises(subprocess.CalledProcessError) as caught:
        run_generate(tmp_path, 0, 200, args=("--day", "1", "--rename-field", "answr=x"))
    assert "'answr' is not a ticket field" in caught.value.stderr
