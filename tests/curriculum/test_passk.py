"""pass@k: the stable product form against brute-force enumeration of k-subsets and exact binomials."""

import itertools
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from rlvrflow.curriculum.passk import pass_at_k, pass_at_k_array, pass_at_k_by_category


def brute_force(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (the first c correct) that hold a correct sample."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


CASES = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize("n, c, k", CASES)
def test_matches_enumeration(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_array_matches_scalar_on_every_case():
    for k in range(1, 9):
        rows = [(n, c) for n, c, kk in CASES if kk == k]
        n, c = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        want = [pass_at_k(a, b, k) for a, b in rows]
        assert np.allclose(pass_at_k_array(n, c, k), want, atol=1e-12)


@pytest.mark.parametrize("n, c, k", [(1000, 3, 100), (2000, 1, 1000), (500, 250, 50), (300, 0, 299)])
def test_stable_for_large_n_against_exact_binomials(n, c, k):
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9, abs=1e-12)
    assert pass_at_k_array(np.array([n]), np.array([c]), k)[0] == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


def test_pass_at_1_is_the_success_rate():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


@pytest.mark.parametrize("n, c, k", [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k"):
        pass_at_k(n, c, k)


def test_by_category_averages_prompt_estimates():
    df = pl.DataFrame({"category": ["a", "a", "b"], "n_samples": [4, 4, 4], "n_correct": [0, 4, 1]})
    out = pass_at_k_by_category(df, 2)
    assert out["category"].to_list() == ["a", "b"]
    assert out["prompts"].to_list() == [2, 1]
    assert out["pass_at_1"].to_list() == pytest.approx([0.5, 0.25])
    assert out["pass_at_k"].to_list() == pytest.approx([0.5, pass_at_k(4, 1, 2)])
