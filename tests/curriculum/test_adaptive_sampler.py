"""AdaptiveSampler: the Beta-binomial prior, learning from reported groups, retiring, exclusions, resume."""

import json
from collections import Counter

import numpy as np
import polars as pl
import pytest

from rlvrflow.curriculum import AdaptiveSampler, StratifiedSampler, make_sampler
from rlvrflow.curriculum.adaptive import beta_from_counts, mixed_chance
from rlvrflow.curriculum.config import CurriculumConfig

ADAPTIVE = {"sampler": "adaptive", "weights": {"learnable": 1.0, "too_hard": 1.0, "too_easy": 1.0}}


def pool(spec: dict[tuple[str, int], int], n: int = 8, eval_rows: int = 0) -> pl.DataFrame:
    """A tiered frame with `spec[(category, n_correct)]` train prompts of n tiering samples each."""
    rows = []
    for (cat, k), count in spec.items():
        tier = "too_hard" if k == 0 else "too_easy" if k == n else "learnable"
        rows += [
            {
                "id": f"{cat}-{k}-{i}",
                "category": cat,
                "tier": tier,
                "split": "train",
                "n_correct": k,
                "n_samples": n,
                "pass_at_1": k / n,
            }
            for i in range(count)
        ]
    rows += [
        {
            "id": f"eval-{i}",
            "category": "a",
            "tier": "learnable",
            "split": "eval",
            "n_correct": 4,
            "n_samples": n,
            "pass_at_1": 0.5,
        }
        for i in range(eval_rows)
    ]
    return pl.DataFrame(rows)


def cfg(**over) -> CurriculumConfig:
    return CurriculumConfig.model_validate({**ADAPTIVE, **over})


def arm_of(pid: str) -> tuple[str, int]:
    cat, k, _ = pid.split("-")
    return cat, int(k)


def test_the_prior_is_the_beta_binomial_chance_of_a_mixed_group():
    a, b = 0.3, 0.6
    rng = np.random.default_rng(0)
    for k in (0, 2, 4, 8):
        p = rng.beta(a + k, b + 8 - k, size=200_000)
        groups = rng.binomial(8, p)
        simulated = float(np.mean((groups > 0) & (groups < 8)))
        assert mixed_chance(k, 8, a, b, 8) == pytest.approx(simulated, abs=0.01), k
    # a bimodal pool (mostly 0 or n of n): mid counts are the likeliest to come back mixed
    a, b = beta_from_counts([(0, 8)] * 50 + [(8, 8)] * 30 + [(4, 8)] * 10 + [(2, 8), (6, 8)] * 5)
    chances = [mixed_chance(k, 8, a, b, 8) for k in range(9)]
    assert max(chances) == chances[4] and chances[0] < 0.2 and chances[8] < 0.3
    assert beta_from_counts([(4, 8)] * 10)[0] > 100  # no spread beyond the binomial's: a sharp prior


@pytest.mark.parametrize("a,b", [(0.3, 0.6), (2.0, 2.0), (0.5, 3.0)])
def test_the_prior_is_recovered_from_counts_with_their_binomial_noise(a, b):
    rng = np.random.default_rng(1)
    k = rng.binomial(8, rng.beta(a, b, size=100_000))
    fa, fb = beta_from_counts([(int(x), 8) for x in k])
    assert fa / (fa + fb) == pytest.approx(a / (a + b), abs=0.01)
    assert fa + fb == pytest.approx(a + b, rel=0.1)  # the concentration: not mistaken for a wider prior
    for kk in (0, 4, 8):
        assert mixed_chance(kk, 8, fa, fb, 8) == pytest.approx(mixed_chance(kk, 8, a, b, 8), abs=0.02)


def test_draws_follow_the_prior_towards_mid_counts():
    df = pool({("a", 0): 200, ("a", 4): 20, ("a", 8): 200})
    s = AdaptiveSampler(df, cfg(dedup_window=0, adaptive={"retire_solved": False}), seed=0, batch_size=8)
    drawn = Counter(arm_of(p)[1] for _ in range(50) for p in s.next_batch())
    assert drawn[4] > 0.8 * 400, drawn  # 20 prompts of 420, drawn over 80% of the time


def test_reported_zero_variance_moves_the_draws_to_the_arm_still_mixed():
    df = pool({("a", 4): 30, ("b", 4): 30})
    s = AdaptiveSampler(df, cfg(dedup_window=0, adaptive={"retire_solved": False, "step": 0.5}), seed=1, batch_size=6)
    for _ in range(20):
        ids = s.next_batch()
        # the policy has outgrown category a (all right) and b stays mixed
        s.report(ids, [1.0 if arm_of(p)[0] == "a" else 0.5 for p in ids])
    # a stops being drawn once its value is low, so its value stays where the last draws left it
    assert s.value[("a", 4, 8)] < 0.3 and s.value[("b", 4, 8)] > 0.9
    late = Counter(arm_of(p)[0] for _ in range(20) for p in s.next_batch())
    assert late["b"] >= 0.95 * 120, late


def test_a_solved_prompt_is_retired_unless_told_otherwise():
    df = pool({("a", 4): 12})
    for retire in (True, False):
        s = AdaptiveSampler(df, cfg(dedup_window=0, adaptive={"retire_solved": retire}), seed=2, batch_size=4)
        first = s.next_batch()
        s.report(first, [1.0, 1.0, 0.5, 0.0])
        later = {p for _ in range(30) for p in s.next_batch()}
        solved = set(first[:2])
        if retire:
            assert s.retired == solved and not later & solved
        else:
            assert not s.retired and solved <= later


def test_a_retired_prompt_drawn_again_and_not_solved_comes_back():
    df = pool({("a", 4): 3})
    s = AdaptiveSampler(df, cfg(dedup_window=0), seed=0, batch_size=3)
    ids = s.next_batch()
    s.report(ids, [1.0, 1.0, 0.5])
    assert s.retired == set(ids[:2])
    again = s.next_batch()  # one eligible prompt: the retired ones fill the rest, after it
    assert again[0] == ids[2] and set(again[1:]) == set(ids[:2])
    assert s.fallback_log[-1]["filled_from"] == {"recent": 0, "retired": 2}
    s.report(again, [0.5, 1.0, 0.25])
    assert s.retired == {again[1]}


def test_no_repeat_within_the_dedup_window_and_exhaustion_is_counted():
    df = pool({("a", 4): 10})
    s = AdaptiveSampler(df, cfg(dedup_window=2), seed=3, batch_size=4)
    batches = [s.next_batch() for _ in range(2)]
    assert len(set(batches[0]) | set(batches[1])) == 8
    third = s.next_batch()  # 2 eligible left: the window is relaxed for the other 2
    assert len(third) == 4 and s.fallback_counts["dedup_window_relaxed"] == 1
    short = AdaptiveSampler(df, cfg(dedup_window=2, when_exhausted="short_batch"), seed=3, batch_size=4)
    assert [len(short.next_batch()) for _ in range(3)] == [4, 4, 2]
    assert short.fallback_counts["short_batch"] == 1


def test_zero_weights_exclude_a_category_or_a_tier():
    df = pool({("a", 4): 10, ("b", 4): 10, ("b", 0): 10})
    s = AdaptiveSampler(
        df,
        cfg(
            category_weights={"a": 0.0, "b": 1.0},
            dedup_window=0,
            weights={"learnable": 1.0, "too_hard": 0.0, "too_easy": 0.0},
        ),
        seed=4,
        batch_size=5,
    )
    drawn = {p for _ in range(40) for p in s.next_batch()}
    assert drawn and all(p.startswith("b-4-") for p in drawn)
    with pytest.raises(ValueError, match="every train prompt has weight 0"):
        AdaptiveSampler(df, cfg(category_weights={"c": 1.0}), seed=0)


def test_eval_rows_are_never_drawn_and_bad_reports_name_the_fix():
    df = pool({("a", 4): 10}, eval_rows=5)
    s = AdaptiveSampler(df, cfg(), seed=0, batch_size=4)
    assert not any(p.startswith("eval") for _ in range(10) for p in s.next_batch())
    with pytest.raises(KeyError, match="not in the sampler's train pool"):
        s.report(["eval-0"], [0.5])
    with pytest.raises(ValueError, match="must be in"):
        s.report(["a-4-0"], [1.5])
    with pytest.raises(ValueError, match="n_correct"):
        AdaptiveSampler(df.drop("n_correct"), cfg(), seed=0)
    with pytest.raises(ValueError, match="n_correct=9 of n_samples=8"):
        AdaptiveSampler(df.with_columns(pl.lit(9).alias("n_correct")), cfg(), seed=0)
    with pytest.raises(ValueError, match="less than or equal to 16"):
        cfg(adaptive={"sharpness": 100})
    untiered = AdaptiveSampler(
        df.with_columns(pl.lit(None).alias("n_samples"), pl.lit(None).alias("n_correct")), cfg(), seed=0
    )  # no counts: every prompt on the prior alone, still drawable
    assert len(untiered.next_batch()) == 8  # the default batch_size


def test_resume_continues_exactly_and_refuses_a_quota_state():
    df = pool({("a", 2): 30, ("a", 4): 30, ("b", 6): 30})

    def play(s, steps, start=0):
        out = []
        for i in range(start, start + steps):
            ids = s.next_batch()
            s.report(ids, [(i + j) % 3 / 2 for j in range(len(ids))])
            out.append(ids)
        return out

    c = cfg(dedup_window=3)
    whole = play(AdaptiveSampler(df, c, seed=5, batch_size=6), 12)
    first = AdaptiveSampler(df, c, seed=5, batch_size=6)
    head = play(first, 5)
    resumed = AdaptiveSampler(df, c, seed=5, batch_size=6)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert head + play(resumed, 7, start=5) == whole
    quota = StratifiedSampler(df, CurriculumConfig(), seed=5, batch_size=6)
    with pytest.raises(ValueError, match="not an adaptive sampler's"):
        resumed.load_state_dict(quota.state_dict())
    with pytest.raises(ValueError, match="not a quota sampler's"):
        quota.load_state_dict(first.state_dict())


def test_make_sampler_builds_what_the_config_names():
    df = pool({("a", 4): 10})
    assert isinstance(make_sampler(df, cfg(), seed=0, batch_size=4, group_size=8), AdaptiveSampler)
    assert isinstance(make_sampler(df, CurriculumConfig(), seed=0, batch_size=4), StratifiedSampler)
