"""The prompt row: the columns and dtypes a row has after each row stage, from clean to tier.

One table (docs/DESIGN.md "The row" says what each column means); the stage runner checks every
row stage's kept rows against it before it writes the manifest, so a library change that drops or
retypes a column fails at the stage that did it, not three stages later. Extra columns (a library
adding `samples` to the tiered rows, say) are allowed and carried through.

    prepare  id domain category question reference solution prompt source      (all String)
    attach   + verifier verifier_params                                           (String)
    split    + split                                                              (String: train | eval)
    tier     + n_samples n_correct (Int64), pass_at_1 pass_at_k (Float64), tier (String)

A rejects table holds a stage's input columns plus `stage`, `reason` (a slug) and `detail`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROW_COLUMNS", "REJECT_COLUMNS", "columns_after", "check_rows", "RowSchemaError"]

_STRING = "String"
ROW_COLUMNS: dict[str, dict[str, str]] = {
    "prepare": {
        c: _STRING for c in ("id", "domain", "category", "question", "reference", "solution", "prompt", "source")
    },
    "attach": {"verifier": _STRING, "verifier_params": _STRING},
    "split": {"split": _STRING},
    "tier": {
        "n_samples": "Int64",
        "n_correct": "Int64",
        "pass_at_1": "Float64",
        "pass_at_k": "Float64",
        "tier": _STRING,
    },
}
REJECT_COLUMNS = ("stage", "reason", "detail")
_ORDER = list(ROW_COLUMNS)


class RowSchemaError(AssertionError):
    """A stage wrote rows without a column (or dtype) the row type promises: a bug in that stage."""


def columns_after(stage: str) -> dict[str, str]:
    """Every column (name -> polars dtype name) a row has once `stage` has run."""
    if stage not in ROW_COLUMNS:
        raise KeyError(f"{stage!r} is not a row stage; row stages: {', '.join(_ORDER)}")
    out: dict[str, str] = {}
    for name in _ORDER[: _ORDER.index(stage) + 1]:
        out.update(ROW_COLUMNS[name])
    return out


def check_rows(schema: Any, stage: str, where: str = "") -> None:
    """Raise RowSchemaError unless `schema` (a polars Schema or {name: dtype}) has the row type's
    columns after `stage` with their dtypes; an all-null column (an empty table) passes as any dtype."""
    have = {name: str(dtype) for name, dtype in dict(schema).items()}
    problems = []
    for name, dtype in columns_after(stage).items():
        if name not in have:
            problems.append(f"missing {name} ({dtype})")
        elif have[name] not in (dtype, "Null"):
            problems.append(f"{name} is {have[name]}, not {dtype}")
    if problems:
        raise RowSchemaError(
            f"{stage} rows{' in ' + where if where else ''}: {'; '.join(problems)} (the row type is in flows/rows.py)"
        )
