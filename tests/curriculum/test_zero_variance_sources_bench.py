"""bench/zero_variance_sources.py: the draw log written through a real sampler's `report`, and the tables
read from it. If these drifted, the bench's account of where zero-variance groups come from would be wrong."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.curriculum.sampler import StratifiedSampler


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("zero_variance_sources")


def test_the_log_holds_each_group_with_the_tier_it_was_drawn_from(bench, tmp_path):
    df = pl.DataFrame(
        {
            "id": ["h1", "h2", "l1", "l2"],
            "category": ["a", "a", "a", "b"],
            "tier": ["too_hard", "too_hard", "learnable", "learnable"],
            "pass_at_1": [0.0, 0.0, 0.5, 0.5],
        }
    )
    cfg = CurriculumConfig(weights={"learnable": 1.0, "too_hard": 1.0, "too_easy": 0.0}, retier_window=1)
    sampler = StratifiedSampler(df, cfg, seed=0, batch_size=4)
    ids = sampler.next_batch()
    rates = {"h1": 0.5, "h2": 0.0, "l1": 1.0, "l2": 0.25}
    with bench.record_draws(tmp_path / "draws.jsonl") as path:
        moved = sampler.report(ids, [rates[i] for i in ids])
    lines = {d["id"]: d for d in map(json.loads, path.read_text().splitlines())}
    # the tier is the one the prompt was drawn from, not the one its group moved it to
    assert moved["h1"] == ("too_hard", "learnable") and lines["h1"]["tier"] == "too_hard"
    assert moved["l1"] == ("learnable", "too_easy") and lines["l1"]["tier"] == "learnable"
    assert {i: (d["category"], d["rate"], d["batch"]) for i, d in lines.items()} == {
        "h1": ("a", 0.5, 1),
        "h2": ("a", 0.0, 1),
        "l1": ("a", 1.0, 1),
        "l2": ("b", 0.25, 1),
    }
    # outside the block the sampler reports as before and nothing more is written
    sampler.report(["h2"], [0.0])
    assert len(path.read_text().splitlines()) == 4


def test_tables_split_groups_by_tier_draw_and_previous_group(bench):
    draws = [
        {"batch": 1, "id": "p", "category": "a", "tier": "learnable", "rate": 0.5},
        {"batch": 1, "id": "q", "category": "b", "tier": "too_hard", "rate": 0.0},
        {"batch": 5, "id": "p", "category": "a", "tier": "learnable", "rate": 1.0},
        {"batch": 6, "id": "q", "category": "b", "tier": "too_hard", "rate": 0.0},
        {"batch": 6, "id": "p", "category": "a", "tier": "learnable", "rate": 1.0},
    ]
    t = bench.tables(draws)
    assert t["tier"]["learnable"] == {"groups": 3, "all wrong": 0.0, "mixed": 0.333, "all right": 0.667}
    assert t["tier"]["too_hard"] == {"groups": 2, "all wrong": 1.0, "mixed": 0.0, "all right": 0.0}
    # draws are counted from 1; thirds of 0..6: batch 1 in the first, 5 and 6 in the last
    assert t["tier, draw, third"]["learnable, first, 1/3"]["groups"] == 1
    assert t["tier, draw, third"]["learnable, again, 3/3"] == {
        "groups": 2,
        "all wrong": 0.0,
        "mixed": 0.0,
        "all right": 1.0,
    }
    assert t["previous group"]["first draw"]["groups"] == 2
    assert t["previous group"]["mixed"] == {"groups": 1, "all wrong": 0.0, "mixed": 0.0, "all right": 1.0}
    assert t["previous group"]["all right"]["groups"] == 1
    assert t["previous group"]["all wrong"]["all wrong"] == 1.0
    assert t["category"]["b"]["groups"] == 2


def test_a_bad_draws_file_names_its_file_and_line(bench, tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        bench.main(["table", str(tmp_path / "missing.jsonl")])
    bad = tmp_path / "draws.jsonl"
    bad.write_text(
        json.dumps({"batch": 1, "id": "p", "category": "a", "tier": "learnable", "rate": 0.5})
        + "\n\n"
        + json.dumps({"batch": 2, "id": "q", "category": "a", "rate": 1.0})
        + "\n"
    )
    with pytest.raises(SystemExit, match=r"draws.jsonl:3: not a draw line .*'tier'"):
        bench.main(["table", str(bad)])


def test_the_offline_table_reads_the_tiers_of_the_run_beside_the_draws(bench, tmp_path):
    draws = [
        {"batch": 1, "id": "p", "category": "a", "tier": "learnable", "rate": 1.0},
        {"batch": 1, "id": "q", "category": "a", "tier": "too_hard", "rate": 0.0},
        {"batch": 4, "id": "p", "category": "a", "tier": "learnable", "rate": 0.5},
    ]
    (tmp_path / "draws.jsonl").write_text("".join(json.dumps(d) + "\n" for d in draws))
    assert bench.offline_counts(tmp_path / "draws.jsonl") is None  # no run here: the table is left out
    assert "offline k/n, draw" not in bench.tables(draws)

    tier_dir = tmp_path / "stages" / "tier" / "k1"
    tier_dir.mkdir(parents=True)
    pl.DataFrame(  # the eval row and the row without counts are not in the pool GRPO draws from
        {
            "id": ["p", "q", "e", "x"],
            "split": ["train", "train", "eval", "train"],
            "n_correct": [2, 0, 4, None],
            "n_samples": [4, 4, 4, None],
        }
    ).write_parquet(tier_dir / "tiers.parquet")
    report = tmp_path / "runs" / "r1" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"stages": {"tier": {"key": "k1", "dir": "elsewhere/k1"}}}))
    (tmp_path / "latest.json").write_text(json.dumps({"report": str(report)}))
    offline = bench.offline_counts(tmp_path / "draws.jsonl")
    assert offline == {"p": (2, 4), "q": (0, 4)}
    t = bench.tables(draws, offline)["offline k/n, draw"]
    assert t["2/4, first"] == {"groups": 1, "all wrong": 0.0, "mixed": 0.0, "all right": 1.0}
    assert t["2/4, again"]["mixed"] == 1.0 and t["0/4, first"]["all wrong"] == 1.0

    # with the group size, each row carries what a policy still equal to the tiered model would give:
    # the adaptive sampler's Beta-binomial predictive under the prior fitted to the pool's counts
    from rlvrflow.curriculum.adaptive import beta_from_counts, mixed_chance

    t = bench.tables(draws, offline, group_size=6)["offline k/n, draw"]
    a, b = beta_from_counts([(2, 4), (0, 4)])
    assert t["2/4, first"]["mixed if unchanged"] == round(mixed_chance(2, 4, a, b, 6), 3)
    assert t["2/4, first"]["mixed if unchanged"] > t["0/4, first"]["mixed if unchanged"]


def test_the_screen_replay_counts_every_subset_a_screen_could_have_drawn(bench, capsys, tmp_path):
    """Groups of 4: all wrong, all right, 2 right and 1 right, screened with m of their completions.
    The expected figures come from enumerating the screens, not from the bench's closed form."""
    from itertools import combinations

    draws = [
        {"batch": 1, "id": "p", "category": "a", "tier": "learnable", "rate": 0.0},
        {"batch": 1, "id": "q", "category": "a", "tier": "learnable", "rate": 1.0},
        {"batch": 2, "id": "r", "category": "a", "tier": "learnable", "rate": 0.5},
        {"batch": 2, "id": "s", "category": "a", "tier": "learnable", "rate": 0.25},
    ]
    replay = bench.screen_replay(draws, group_size=4)
    assert replay["no screen"] == {
        "groups": 4,
        "screened out": 0.0,
        "mixed lost": 0.0,
        "wasted rollouts": 0.5,
        "rollouts per group trained": 8.0,
    }
    assert set(replay) == {"no screen", "2 of 4", "3 of 4"}
    for m in (2, 3):
        flat = []  # each mixed group's chance that its screen is all right or all wrong
        for group in ([True, True, False, False], [True, False, False, False]):
            screens = list(combinations(group, m))
            flat.append(sum(len(set(s)) == 1 for s in screens) / len(screens))
        dropped = 2 + sum(flat)  # the two flat groups never pass
        kept = 4 - dropped
        rollouts = dropped * m + kept * 4  # a screened-out prompt costs its m, a kept one its whole group
        assert replay[f"{m} of 4"] == {
            "groups": 4,
            "screened out": round(dropped / 4, 3),
            "mixed lost": round(sum(flat) / 2, 3),
            "wasted rollouts": round(dropped * m / rollouts, 3),
            "rollouts per group trained": round(rollouts / kept, 2),
        }
    # by hand: pairs of the 1-right group are flat 3 times in 6, of the 2-right one 2 in 6; no triple of
    # the 2-right group is flat, 1 in 4 of the 1-right one
    assert replay["2 of 4"]["mixed lost"] == round((2 / 6 + 3 / 6) / 2, 3)
    assert replay["3 of 4"]["rollouts per group trained"] == round((2.25 * 3 + 1.75 * 4) / 1.75, 2)

    (tmp_path / "draws.jsonl").write_text("".join(json.dumps(d) + "\n" for d in draws))
    result = bench.print_tables(tmp_path / "draws.jsonl", draws, group_size=4)
    assert result["screen, replayed"] == replay
    assert "a screen of m completions" in capsys.readouterr().out
    assert "screen, replayed" not in bench.print_tables(tmp_path / "draws.jsonl", draws)
    # a group size the rates do not fit (1 of 4 right is no k of 6) is the user's mistake, named
    with pytest.raises(SystemExit, match="prompt s .*not k of 6.*num_generations"):
        bench.screen_replay(draws, group_size=6)
    # nothing mixed: no group is ever trained
    assert bench.screen_replay(draws[:2], group_size=4)["3 of 4"]["rollouts per group trained"] == float("inf")
