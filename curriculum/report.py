"""The tier report written beside tiers.parquet: a table, a markdown summary and a histogram per category.

tier_report(tiered, out_dir, k=4)
  -> tier_table.csv      one row per (category, tier) plus an `(all)` category: prompts, share,
                         mean pass@1, mean pass@k
  -> tier_report.md      the same as markdown, plus the learnable share per category
  -> tier_histogram.png  per category, prompts by success rate c/n, coloured by tier
"""

from __future__ import annotations

from pathlib import Path

from rlvrflow.curriculum.config import TIERS

ALL = "(all)"
_COLOURS = {"too_hard": "#c0392b", "learnable": "#27ae60", "too_easy": "#2980b9"}


def tier_table(df):
    """Polars frame: category, tier, prompts, share (of the category), pass_at_1, pass_at_k (means)."""
    import polars as pl

    both = pl.concat([df, df.with_columns(pl.lit(ALL).alias("category"))], how="vertical_relaxed")
    counts = both.group_by("category", "tier").agg(
        pl.len().alias("prompts"),
        pl.col("pass_at_1").mean().alias("pass_at_1"),
        pl.col("pass_at_k").mean().alias("pass_at_k"),
    )
    cats = sorted(set(df["category"].to_list())) + [ALL]
    grid = pl.DataFrame({"category": [c for c in cats for _ in TIERS], "tier": [t for _ in cats for t in TIERS]})
    table = grid.join(counts, on=["category", "tier"], how="left").with_columns(pl.col("prompts").fill_null(0))
    return table.with_columns(
        (pl.col("prompts") / pl.col("prompts").sum().over("category")).fill_nan(0.0).alias("share")
    ).select("category", "tier", "prompts", "share", "pass_at_1", "pass_at_k")


def _markdown(table, k: int | None) -> str:
    k_label = f"pass@{k}" if k else "pass@k"
    lines = [
        "# Tier report",
        "",
        "Tiers by the SFT model's success rate c/n per prompt (too_hard: never solved, too_easy: always).",
        "",
        f"| category | tier | prompts | share | mean pass@1 | mean {k_label} |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in table.iter_rows(named=True):
        p1 = "" if r["pass_at_1"] is None else f"{r['pass_at_1']:.3f}"
        pk = "" if r["pass_at_k"] is None else f"{r['pass_at_k']:.3f}"
        lines.append(f"| {r['category']} | {r['tier']} | {r['prompts']} | {r['share']:.1%} | {p1} | {pk} |")
    learn = table.filter(table["tier"] == "learnable")
    lines += [
        "",
        "Learnable share per category: "
        + ", ".join(f"{r['category']} {r['share']:.0%}" for r in learn.iter_rows(named=True)),
        "",
    ]
    return "\n".join(lines)


def _histogram(df, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = sorted(set(df["category"].to_list()))
    fig, axes = plt.subplots(len(cats), 1, figsize=(6, 1.8 * len(cats) + 0.6), squeeze=False)
    for ax, cat in zip(axes[:, 0], cats):
        sub = df.filter(df["category"] == cat)
        for tier in TIERS:
            rates = sub.filter(sub["tier"] == tier)["pass_at_1"].to_list()
            if rates:
                values, counts = _count(rates)
                ax.bar(values, counts, width=0.04, color=_COLOURS[tier], label=tier)
        ax.set_title(f"{cat} ({sub.height} prompts)", fontsize=9)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylabel("prompts", fontsize=8)
        ax.legend(fontsize=7, loc="upper center")
    axes[-1, 0].set_xlabel("success rate c/n of the SFT model")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _count(rates: list[float]) -> tuple[list[float], list[int]]:
    values = sorted(set(rates))
    return values, [rates.count(v) for v in values]


def tier_report(df, out_dir: str | Path, k: int | None = None) -> dict[str, Path]:
    """Write the table (CSV), markdown and histogram PNG for a tiered frame; returns their paths."""
    needed = [c for c in ("category", "tier", "pass_at_1", "pass_at_k") if c not in df.columns]
    if needed:
        raise ValueError(f"tier_report: the frame lacks {needed}; pass the output of tier_rows")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = tier_table(df)
    paths = {
        "table": out / "tier_table.csv",
        "markdown": out / "tier_report.md",
        "histogram": out / "tier_histogram.png",
    }
    table.write_csv(paths["table"])
    paths["markdown"].write_text(_markdown(table, k))
    if df.height:
        _histogram(df, paths["histogram"])
    else:
        del paths["histogram"]
    return paths
