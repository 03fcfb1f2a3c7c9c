"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

With n samples of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k): the chance that k samples
drawn without replacement from the n contain at least one correct one. The binomials overflow for
large n, so it is computed in the product form used by openai/human-eval:

    pass@k = 1 - prod_{i=n-c+1}^{n} (1 - k / i),   and 1 when n - c < k.

`pass_at_k` is the scalar; `pass_at_k_array` the same over numpy arrays; `pass_at_k_by_category`
averages per-prompt values over each category of a tiered frame.
"""

from __future__ import annotations

import numpy as np


def _check(n: int, c: int, k: int) -> None:
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs n >= 1, 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with c correct out of n samples."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_array(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Vectorized `pass_at_k` over prompts; `n` and `c` are integer arrays of one shape (P,)."""
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    if n.shape != c.shape:
        raise ValueError(f"pass_at_k_array: n has shape {n.shape} but c has {c.shape}")
    if n.size == 0:
        return np.zeros(0)
    if (n < 1).any() or (c < 0).any() or (c > n).any() or k < 1 or (k > n).any():
        raise ValueError(f"pass_at_k_array needs n >= 1, 0 <= c <= n and 1 <= k <= n for every prompt (k={k})")
    i = np.arange(1, int(n.max()) + 1)[None, :]  # (1, N)
    in_range = (i > (n - c)[:, None]) & (i <= n[:, None])  # (P, N)
    # Rows with n - c < k are set to 1 below; in the others i > n - c >= k, so every factor is > 0.
    factor = np.where(in_range, 1.0 - k / i, 1.0)  # (P, N)
    out = 1.0 - np.prod(factor, axis=1)
    return np.where(n - c < k, 1.0, out)


def pass_at_k_by_category(df, k: int):
    """Per category: prompts, mean pass@1 and mean pass@k (per-prompt estimates averaged).

    `df` is a polars frame with `category`, `n_samples`, `n_correct`; returns a polars frame sorted
    by category with columns `category, prompts, pass_at_1, pass_at_k`.
    """
    import polars as pl

    pk = pass_at_k_array(df["n_samples"].to_numpy(), df["n_correct"].to_numpy(), k)
    tmp = df.select("category", "n_samples", "n_correct").with_columns(_pk=pl.Series(pk))
    return (
        tmp.group_by("category")
        .agg(
            pl.len().alias("prompts"),
            (pl.col("n_correct") / pl.col("n_samples")).mean().alias("pass_at_1"),
            pl.col("_pk").mean().alias("pass_at_k"),
        )
        .sort("category")
    )
