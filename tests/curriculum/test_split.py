"""assign_split: deterministic by (seed, id), per-category eval share, every category of 2+ rows held out."""

import polars as pl
import pytest

from rlvrflow.curriculum.split import assign_split, eval_count


def rows(sizes: dict[str, int]) -> pl.DataFrame:
    ids, cats = [], []
    for cat, size in sizes.items():
        ids += [f"{cat}-{i}" for i in range(size)]
        cats += [cat] * size
    return pl.DataFrame({"id": ids, "category": cats, "question": [f"q {i}" for i in ids]})


def test_deterministic_and_order_preserving():
    df = rows({"a": 40, "b": 7, "c": 1})
    one, two = assign_split(df, 0.15, seed=3), assign_split(df, 0.15, seed=3)
    assert one.equals(two)
    assert one["id"].to_list() == df["id"].to_list()
    assert one.columns == df.columns + ["split"]
    assert set(one["split"].to_list()) == {"train", "eval"}


def test_other_seed_moves_rows():
    df = rows({"a": 200})
    assert assign_split(df, 0.2, 0)["split"].to_list() != assign_split(df, 0.2, 1)["split"].to_list()


def test_per_category_counts():
    df = rows({"a": 40, "b": 7, "c": 2, "d": 1})
    out = assign_split(df, 0.15, seed=0)
    held = dict(out.filter(pl.col("split") == "eval").group_by("category").len().iter_rows())
    assert held == {"a": 6, "b": 1, "c": 1}
    assert "d" not in held  # a single row stays in train


def test_zero_fraction_keeps_everything_in_train():
    assert set(assign_split(rows({"a": 10}), 0.0, 0)["split"].to_list()) == {"train"}


def test_adding_rows_keeps_most_assignments():
    small = assign_split(rows({"a": 100}), 0.2, 0)
    big = assign_split(rows({"a": 110}), 0.2, 0).head(100)
    same = sum(x == y for x, y in zip(small["split"].to_list(), big["split"].to_list()))
    assert same >= 90


@pytest.mark.parametrize("size, frac, want", [(1, 0.5, 0), (2, 0.01, 1), (2, 0.9, 1), (10, 0.15, 2), (100, 0.15, 15)])
def test_eval_count(size, frac, want):
    assert eval_count(size, frac) == want


def test_duplicate_ids_are_refused_with_the_id():
    df = pl.DataFrame({"id": ["x", "x"], "category": ["a", "a"]})
    with pytest.raises(ValueError, match="'x' appears more than once"):
        assign_split(df, 0.5, 0)


def test_bad_fraction_and_missing_column():
    with pytest.raises(ValueError, match="eval_fraction"):
        assign_split(rows({"a": 3}), 1.0, 0)
    with pytest.raises(ValueError, match="'category'"):
        assign_split(pl.DataFrame({"id": ["1"]}), 0.1, 0)
