"""The three-part prompt: the question, the domain's requirements, and a format example.

`build_prompts(df, template)` fills the `prompt` column with `template.layout`, taking the
requirements and format example from `template.by_category` (or `template.default`). Vectorized:
the layout is split into literal pieces and placeholders once, then joined with `concat_str`.

    layout "{question}\\n\\nRequirements: {requirements}\\n\\nFormat example:\\n{format_example}"
"""

from __future__ import annotations

import string

import polars as pl

from .config import TemplateConfig

__all__ = ["build_prompts", "render_prompt"]


def render_prompt(question: str, category: str, template: TemplateConfig) -> str:
    """One prompt, in plain Python (the reference for `build_prompts`)."""
    part = template.part(category)
    return template.layout.format(question=question, requirements=part.requirements, format_example=part.format_example)


def build_prompts(df: pl.DataFrame, template: TemplateConfig) -> pl.DataFrame:
    """`df` with its `prompt` column (re)built from `question` and `category`."""
    cats = df["category"].unique().to_list()
    parts = {c: template.part(c) for c in cats}
    columns = {
        "question": pl.col("question"),
        "requirements": pl.col("category").replace_strict(
            {c: p.requirements for c, p in parts.items()}, default=template.default.requirements, return_dtype=pl.String
        ),
        "format_example": pl.col("category").replace_strict(
            {c: p.format_example for c, p in parts.items()},
            default=template.default.format_example,
            return_dtype=pl.String,
        ),
    }
    pieces: list[pl.Expr] = []
    for literal, name, _, _ in string.Formatter().parse(template.layout):
        if literal:
            pieces.append(pl.lit(literal, dtype=pl.String))
        if name is not None:
            pieces.append(columns[name])
    return df.with_columns(pl.concat_str(pieces).alias("prompt"))
