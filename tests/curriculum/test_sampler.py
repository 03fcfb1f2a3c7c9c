"""StratifiedSampler properties over many batches: quotas, dedup window, fallbacks, determinism, resume."""

import json
from collections import Counter

import polars as pl
import pytest

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.curriculum.sampler import StratifiedSampler, UniformSampler

RATE = {"too_hard": 0.0, "learnable": 0.5, "too_easy": 1.0}


def pool(spec: dict[tuple[str, str], int], eval_rows: int = 0) -> pl.DataFrame:
    """A tiered frame with `spec[(category, tier)]` train rows per cell (+ eval rows in category a)."""
    ids, cats, tiers, splits = [], [], [], []
    for (cat, tier), count in spec.items():
        for i in range(count):
            ids.append(f"{cat}-{tier}-{i}")
            cats.append(cat)
            tiers.append(tier)
            splits.append("train")
    for i in range(eval_rows):
        ids.append(f"eval-{i}")
        cats.append("a")
        tiers.append("learnable")
        splits.append("eval")
    return pl.DataFrame(
        {"id": ids, "category": cats, "tier": tiers, "split": splits, "pass_at_1": [RATE[t] for t in tiers]}
    )


BIG = pool(
    {
        ("a", "learnable"): 120,
        ("a", "too_hard"): 30,
        ("a", "too_easy"): 30,
        ("b", "learnable"): 60,
        ("b", "too_hard"): 15,
        ("b", "too_easy"): 15,
    },
    eval_rows=20,
)


def draw(sampler, batches: int) -> list[list[str]]:
    return [sampler.next_batch() for _ in range(batches)]


def cell_of(df: pl.DataFrame) -> dict[str, tuple[str, str]]:
    return {r["id"]: (r["category"], r["tier"]) for r in df.iter_rows(named=True)}


def test_quotas_match_the_weights_over_many_batches():
    cfg = CurriculumConfig(dedup_window=3)
    s = StratifiedSampler(BIG, cfg, seed=0, batch_size=10)
    drawn = [pid for b in draw(s, 300) for pid in b]
    counts = Counter(cell_of(BIG)[p] for p in drawn)
    total = len(drawn)
    assert total == 3000
    # Category shares follow pool size (180 : 90), tiers 0.8 / 0.1 / 0.1 inside each category.
    for (cat, tier), n in counts.items():
        want = (2 / 3 if cat == "a" else 1 / 3) * {"learnable": 0.8, "too_hard": 0.1, "too_easy": 0.1}[tier]
        assert abs(n - want * total) <= 1, (cat, tier, n, want * total)
    assert sum(s.fallback_counts.values()) == 0


def test_no_id_repeats_within_the_window_nor_within_a_batch():
    window = 4
    s = StratifiedSampler(BIG, CurriculumConfig(dedup_window=window), seed=1, batch_size=10)
    batches = draw(s, 200)
    for i, batch in enumerate(batches):
        assert len(batch) == len(set(batch)) == 10
        for prev in batches[max(0, i - window) : i]:
            assert not set(batch) & set(prev), f"batch {i} repeats an id from the last {window} batches"


def test_eval_rows_are_never_drawn():
    s = StratifiedSampler(BIG, CurriculumConfig(), seed=0, batch_size=10)
    assert not any(p.startswith("eval-") for b in draw(s, 100) for p in b)


def test_every_prompt_of_a_cell_is_drawn_once_per_epoch():
    small = pool({("a", "learnable"): 10})
    s = StratifiedSampler(small, CurriculumConfig(dedup_window=0), seed=0, batch_size=5)
    first, second = draw(s, 2)
    assert sorted(first + second) == sorted(small["id"].to_list())


def test_deterministic_given_the_seed():
    cfg = CurriculumConfig()
    a = draw(StratifiedSampler(BIG, cfg, seed=5, batch_size=8), 30)
    b = draw(StratifiedSampler(BIG, cfg, seed=5, batch_size=8), 30)
    c = draw(StratifiedSampler(BIG, cfg, seed=6, batch_size=8), 30)
    assert a == b
    assert a != c


def test_empty_cell_borrows_from_its_own_category_first():
    df = pool({("a", "learnable"): 50, ("a", "too_hard"): 50, ("b", "learnable"): 50, ("b", "too_hard"): 50})
    s = StratifiedSampler(df, CurriculumConfig(dedup_window=1), seed=0, batch_size=10)
    drawn = [p for b in draw(s, 50) for p in b]
    by_cat = Counter(cell_of(df)[p][0] for p in drawn)
    assert by_cat["a"] == by_cat["b"] == 250  # too_easy has no prompts: category shares still hold
    assert s.fallback_counts["cell_empty"] > 0
    event = next(e for e in s.fallback_log if e["reason"] == "cell_empty")
    cat = event["cell"].split("/")[0]
    assert all(src.startswith(cat + "/") for src in event["filled_from"])


def test_tier_first_borrows_the_same_tier_elsewhere():
    df = pool({("a", "learnable"): 40, ("b", "learnable"): 40, ("b", "too_hard"): 40})
    cfg = CurriculumConfig(
        fallback="tier_first", dedup_window=1, weights={"learnable": 0.5, "too_hard": 0.5, "too_easy": 0.0}
    )
    s = StratifiedSampler(df, cfg, seed=0, batch_size=10)
    draw(s, 20)
    events = [e for e in s.fallback_log if e["cell"] == "a/too_hard"]
    assert events and all(e["reason"] == "cell_empty" for e in events)
    assert all(set(e["filled_from"]) == {"b/too_hard"} for e in events)


def test_small_cell_runs_dry_inside_the_window_and_is_logged():
    df = pool({("a", "learnable"): 100, ("a", "too_hard"): 2})
    cfg = CurriculumConfig(dedup_window=3, weights={"learnable": 0.5, "too_hard": 0.5, "too_easy": 0.0})
    s = StratifiedSampler(df, cfg, seed=0, batch_size=4)
    batches = draw(s, 10)
    assert s.fallback_counts["cell_in_window"] > 0
    assert all(len(b) == 4 for b in batches)


def test_exhausted_pool_relaxes_the_window_least_recent_first():
    df = pool({("a", "learnable"): 12})
    s = StratifiedSampler(df, CurriculumConfig(dedup_window=5), seed=0, batch_size=4)
    batches = draw(s, 4)
    assert all(len(b) == 4 for b in batches)
    assert s.fallback_counts["dedup_window_relaxed"] == 1
    assert set(batches[3]) == set(batches[0])  # the least recently drawn ids come back first


def test_exhausted_pool_can_return_short_batches():
    df = pool({("a", "learnable"): 12})
    s = StratifiedSampler(df, CurriculumConfig(dedup_window=5, when_exhausted="short_batch"), seed=0, batch_size=4)
    batches = draw(s, 4)
    assert [len(b) for b in batches] == [4, 4, 4, 0]
    assert s.fallback_counts["short_batch"] == 1


def test_mastered_pool_falls_back_to_zero_weight_tiers_of_weighted_categories():
    """Re-tiering can empty every weighted cell (all learnable prompts solved): keep drawing, say why."""
    df = pool({("a", "learnable"): 6, ("b", "learnable"): 6})
    cfg = CurriculumConfig(
        dedup_window=0,
        retier_window=1,
        category_weights={"a": 1.0},
        weights={"learnable": 1, "too_hard": 0, "too_easy": 0},
    )
    s = StratifiedSampler(df, cfg, seed=0, batch_size=3)
    for _ in range(2):
        ids = s.next_batch()
        s.report(ids, [1.0] * len(ids))  # solved: each moves to too_easy
    assert s.tier_counts()["learnable"] == 6  # category b's six, never drawn (weight 0)
    later = draw(s, 3)
    assert all(len(b) == 3 for b in later)
    assert all(p.startswith("a-") for b in later for p in b)  # b stays excluded
    assert s.fallback_counts["weighted_tiers_empty"] == 3


def test_spare_tiers_keep_the_category_shares():
    df = pool({("a", "too_easy"): 40, ("b", "too_easy"): 20})  # every prompt mastered; weights 1 / 0 / 0
    cfg = CurriculumConfig(dedup_window=0, weights={"learnable": 1, "too_hard": 0, "too_easy": 0})
    s = StratifiedSampler(df, cfg, seed=0, batch_size=6)
    by_cat = Counter(p[0] for b in draw(s, 10) for p in b)
    assert by_cat == {"a": 40, "b": 20}


def test_category_weights_override_sizes_and_zero_excludes():
    df = pool({("a", "learnable"): 90, ("b", "learnable"): 30, ("c", "learnable"): 30})
    cfg = CurriculumConfig(
        category_weights={"a": 1.0, "b": 1.0}, weights={"learnable": 1, "too_hard": 0, "too_easy": 0}
    )
    s = StratifiedSampler(df, cfg, seed=0, batch_size=6)
    by_cat = Counter(cell_of(df)[p][0] for b in draw(s, 40) for p in b)
    assert by_cat == {"a": 120, "b": 120}


def test_report_moves_prompts_between_tiers():
    df = pool({("a", "learnable"): 20, ("a", "too_hard"): 20, ("a", "too_easy"): 20})
    s = StratifiedSampler(df, CurriculumConfig(retier_window=3), seed=0, batch_size=6)
    easy_soon, hard_one = "a-learnable-0", "a-too_hard-0"
    assert s.report([easy_soon], [1.0]) == {}  # (0.5 + 1) / 2 is still learnable
    assert s.report([easy_soon], [1.0]) == {}
    assert s.report([easy_soon], [1.0]) == {easy_soon: ("learnable", "too_easy")}  # window now 1, 1, 1
    assert s.report([hard_one], [0.25]) == {hard_one: ("too_hard", "learnable")}
    assert s.tier_counts() == {"learnable": 20, "too_hard": 19, "too_easy": 21}
    assert s.tier[easy_soon] == "too_easy"
    drawn_easy = [p for b in draw(s, 40) for p in b if s.tier[p] == "too_easy"]
    assert easy_soon in drawn_easy


def test_retiering_is_summed_up_every_n_batches_at_info(caplog):
    from rlvrflow.curriculum.sampler import RETIER_SUMMARY_EVERY

    df = pool({("a", "learnable"): 30, ("a", "too_hard"): 30, ("a", "too_easy"): 30})
    s = StratifiedSampler(df, CurriculumConfig(retier_window=1), seed=0, batch_size=6)
    caplog.set_level("DEBUG", logger="rlvrflow.curriculum")
    for step in range(2 * RETIER_SUMMARY_EVERY):
        batch = s.next_batch()
        s.report(batch, [float((step + i) % 2) for i in range(len(batch))])  # every prompt flips tier
    per_batch = [r for r in caplog.records if "re-tiering after batch" in r.getMessage()]
    summaries = [r for r in caplog.records if r.getMessage().startswith("re-tiering:")]
    assert per_batch and all(r.levelname == "DEBUG" for r in per_batch)
    assert [r.levelname for r in summaries] == ["INFO", "INFO"]
    assert f"in the last {RETIER_SUMMARY_EVERY} batches" in summaries[0].getMessage()
    assert f"({s.moves} in all)" in summaries[1].getMessage()
    # a resumed sampler sums up from where the saved one had summed up, not from the checkpoint
    for step in range(7):
        batch = s.next_batch()
        s.report(batch, [float((step + i) % 2) for i in range(len(batch))])
    resumed = StratifiedSampler(df, CurriculumConfig(retier_window=1), seed=0, batch_size=6)
    resumed.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert resumed._moves_summarized == s._moves_summarized < s.moves


def test_report_rejects_unknown_ids_and_bad_rates():
    s = StratifiedSampler(BIG, CurriculumConfig(), seed=0, batch_size=4)
    with pytest.raises(KeyError, match="nope"):
        s.report(["nope"], [0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        s.report(["a-learnable-0"], [1.5])
    with pytest.raises(ValueError, match="one rate per id"):
        s.report(["a-learnable-0"], [])


def run(sampler, start: int, steps: int) -> list[list[str]]:
    """Draw and report a deterministic, step-dependent success pattern (so tiers move)."""
    out = []
    for step in range(start, start + steps):
        batch = sampler.next_batch(None if step % 3 else 5)  # refill-sized draws in between
        rates = [((step * 7 + len(pid)) % 5) / 4 for pid in batch]
        sampler.report(batch, rates)
        out.append(batch)
    return out


def test_resume_from_a_json_checkpoint_equals_an_uninterrupted_run():
    cfg = CurriculumConfig(dedup_window=3, retier_window=2)
    straight = StratifiedSampler(BIG, cfg, seed=9, batch_size=12)
    want = run(straight, 0, 40)

    first = StratifiedSampler(BIG, cfg, seed=9, batch_size=12)
    got = run(first, 0, 17)
    state = json.loads(json.dumps(first.state_dict()))
    resumed = StratifiedSampler(BIG, cfg, seed=9, batch_size=12)
    resumed.load_state_dict(state)
    got += run(resumed, 17, 23)
    assert got == want
    assert resumed.tier == straight.tier
    assert resumed.moves == straight.moves > 0


def test_state_from_another_pool_is_refused():
    s = StratifiedSampler(BIG, CurriculumConfig(), seed=0, batch_size=4)
    other = StratifiedSampler(pool({("a", "learnable"): 10}), CurriculumConfig(), seed=0, batch_size=4)
    with pytest.raises(ValueError, match="same tiers.parquet"):
        other.load_state_dict(s.state_dict())


def test_missing_tier_column_says_what_to_pass():
    with pytest.raises(ValueError, match="tier_rows"):
        StratifiedSampler(pl.DataFrame({"id": ["1"], "category": ["a"]}), CurriculumConfig(), seed=0)


def test_uniform_sampler_covers_the_pool_each_epoch_and_resumes():
    u = UniformSampler(BIG, seed=0, batch_size=10)
    epoch = [p for b in draw(u, 27) for p in b]
    assert sorted(epoch) == sorted(BIG.filter(pl.col("split") == "train")["id"].to_list())
    state = json.loads(json.dumps(u.state_dict()))
    after = draw(u, 5)
    v = UniformSampler(BIG, seed=0, batch_size=10)
    v.load_state_dict(state)
    assert draw(v, 5) == after


def test_sampler_uniform_ignores_tiers_and_weights():
    from rlvrflow.curriculum import make_sampler

    cfg = CurriculumConfig(sampler="uniform", weights={"learnable": 1.0, "too_hard": 0.0, "too_easy": 0.0})
    u = make_sampler(BIG, cfg, seed=0, batch_size=10)
    assert isinstance(u, UniformSampler)
    drawn = Counter(cell_of(BIG)[p][1] for b in draw(u, 27) for p in b)
    # one epoch: every train prompt once, the zero-weight tiers included (a quota sampler draws none of them)
    assert drawn == Counter(BIG.filter(pl.col("split") == "train")["tier"].to_list())
    assert u.report(["a-learnable-0"], [1.0]) == {} and u.tier["a-learnable-0"] == "learnable"
    assert u.batches == 27  # draws, as the other samplers count them (refills included; reports are not draws)
    with pytest.raises(ValueError, match="1 ids but 2 success rates"):
        u.report(["a-learnable-0"], [1.0, 0.0])
    with pytest.raises(ValueError, match="n=0"):
        u.next_batch(0)


@pytest.mark.parametrize("seed", range(40))
def test_uniform_epochs_draw_every_prompt_once_across_batch_boundaries(seed):
    """10 prompts in batches of 4: batches straddle epochs; an id already in the batch is deferred, not lost."""
    ten = pool({("a", "learnable"): 10})
    u = UniformSampler(ten, seed=seed, batch_size=4)
    batches = draw(u, 10)  # 40 draws: exactly 4 epochs
    assert all(len(set(b)) == 4 for b in batches)
    assert set(Counter(p for b in batches for p in b).values()) == {4}


def test_a_sampler_state_resumes_only_the_sampler_and_pool_it_came_from():
    quota = StratifiedSampler(BIG, CurriculumConfig(), seed=0, batch_size=8)
    uniform = UniformSampler(BIG, seed=0, batch_size=8)
    with pytest.raises(ValueError, match="not a uniform sampler's"):
        UniformSampler(BIG, seed=0, batch_size=8).load_state_dict(quota.state_dict())
    with pytest.raises(ValueError, match="not a quota sampler's"):
        StratifiedSampler(BIG, CurriculumConfig(), seed=0, batch_size=8).load_state_dict(uniform.state_dict())
    smaller = BIG.filter(pl.col("id") != "a-learnable-0")
    with pytest.raises(ValueError, match="another train pool"):
        UniformSampler(smaller, seed=0, batch_size=8).load_state_dict(uniform.state_dict())


def test_uniform_sampler_rejects_an_empty_pool_and_duplicate_ids():
    with pytest.raises(ValueError, match="no train rows"):
        UniformSampler(BIG.filter(pl.col("split") == "none"), seed=0)
    with pytest.raises(ValueError, match="duplicate ids"):
        UniformSampler(pl.concat([BIG, BIG.head(1)]), seed=0)


def test_variable_batch_sizes_keep_the_quotas():
    s = StratifiedSampler(BIG, CurriculumConfig(dedup_window=2), seed=0, batch_size=8)
    sizes = [8, 3, 1, 8, 5] * 60
    batches = [s.next_batch(n) for n in sizes]
    assert [len(b) for b in batches] == sizes
    drawn = [p for b in batches for p in b]
    learnable = sum(cell_of(BIG)[p][1] == "learnable" for p in drawn)
    assert abs(learnable - 0.8 * len(drawn)) <= 2
    with pytest.raises(ValueError, match="n=0"):
        s.next_batch(0)
