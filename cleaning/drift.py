"""New rows against the rows the champion was trained on: what changed, and whether it drifted.

    reference = profile(champion_rows, files)          # kept with the champion in the registry
    report = check_drift(tonight_rows, files, reference, DriftConfig())
    report["failed"]                                   # the checks beyond the spec's bounds

The profile holds what a later night is measured against: rows per category and source file, the
share of rows with a worked solution, each category's reference formats (integer, decimal,
fraction, percent, text, ...), the range of its numeric references and of the question lengths.
`check_drift` turns the profile into a Great Expectations suite run on tonight's rows (the bounds
come from the profile widened by the `drift:` section) and lists, beside the verdicts, what changed:
files added, removed or changed, and rows per category and source, then and now.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from rlvrflow.cleaning.config import DriftConfig

PROFILE_VERSION = 1
_KINDS = (
    ("integer", re.compile(r"-?\d[\d,]*")),
    ("decimal", re.compile(r"-?\d[\d,]*\.\d+")),
    ("fraction", re.compile(r"-?\d+\s*/\s*\d+")),
    ("percent", re.compile(r"-?\d+(?:\.\d+)?\s*%")),
    ("json", re.compile(r"[\[{].*[\]}]", re.S)),
)


def reference_kind(reference: str | None) -> str:
    """The format of a gold answer: integer, decimal, fraction, percent, json, text or empty."""
    text = (reference or "").strip()
    if not text:
        return "empty"
    return next((name for name, rx in _KINDS if rx.fullmatch(text)), "text")


def reference_value(reference: str | None) -> float | None:
    """A numeric gold's value (integer, decimal, percent without its sign), else None."""
    kind = reference_kind(reference)
    if kind not in ("integer", "decimal", "percent"):
        return None
    return float((reference or "").strip().rstrip("%").replace(",", "").strip())


def _with_derived(rows: pl.DataFrame) -> pl.DataFrame:
    solution = pl.col("solution") if "solution" in rows.columns else pl.lit(None, dtype=pl.String)
    return rows.select(
        pl.col("category").cast(pl.String),
        pl.col("question").cast(pl.String),
        pl.col("reference").map_elements(reference_kind, return_dtype=pl.String).alias("reference_kind"),
        pl.col("reference").map_elements(reference_value, return_dtype=pl.Float64).alias("reference_value"),
        (solution.fill_null("").str.strip_chars() != "").alias("has_solution"),
    )


def _quantiles(values: pl.Series) -> list[float] | None:
    values = values.drop_nulls()
    if values.is_empty():
        return None
    return [float(values.quantile(0.01, "nearest")), float(values.quantile(0.99, "nearest"))]


def profile(
    rows: pl.DataFrame, files: dict[str, dict] | None = None, rejects: dict[str, int] | None = None
) -> dict[str, Any]:
    """The numbers a later night's rows are checked against. `files`: {path: {rows, rejected, sha256}}
    (ingest's kept and quarantined rows per file); the profile adds `kept`, the rows that reached here."""
    work = _with_derived(rows)
    kept = kept_per_file(rows, files or {}) or {}
    by_source = {}
    owner = {path: f.get("source") for path, f in (files or {}).items() if f.get("source")}
    if owner and "source" in rows.columns:  # each spec source's own mix: a new day is one source's file
        of_row = source_file(rows).replace_strict(owner, default=None, return_dtype=pl.String)
        for name in sorted(set(owner.values())):
            part = work.filter(of_row == name)
            if part.height:
                by_source[name] = {"rows": part.height, "categories": _categories(part)}
    return {
        "version": PROFILE_VERSION,
        "rows": work.height,
        "solution_share": float(work["has_solution"].mean() or 0.0) if work.height else 0.0,
        "question_length": _quantiles(work["question"].str.len_chars()),
        "categories": _categories(work),
        "sources": by_source,
        "files": {path: {**f, "kept": kept.get(path)} for path, f in (files or {}).items()},
        "rejects": dict(sorted((rejects or {}).items())),
    }


def _categories(work: pl.DataFrame) -> dict[str, Any]:
    """Rows, share, reference formats and numeric range per category of `work` (_with_derived rows)."""
    n, categories = max(work.height, 1), {}
    for (category,), part in sorted(work.group_by("category"), key=lambda kv: str(kv[0][0])):
        kinds = part["reference_kind"].value_counts()
        categories[str(category)] = {
            "rows": part.height,
            "share": part.height / n,
            "reference_kinds": {k: c / part.height for k, c in zip(kinds["reference_kind"], kinds["count"])},
            "reference_range": _quantiles(part["reference_value"]),
        }
    return categories


def _widen(bounds: list[float], margin: float) -> tuple[float, float]:
    low, high = bounds
    pad = margin * max(high - low, abs(high), abs(low), 1.0)
    return low - pad, high + pad


def _expectations(reference: dict, cfg: DriftConfig) -> list[tuple[str, Any]]:
    """(check name, GX expectation) for every bound the reference profile implies."""
    import great_expectations.expectations as gxe

    known = sorted(reference["categories"])
    seen = sorted(set(known) | set(reference.get("seen_categories", ())))  # in any source of the champion's
    checks: list[tuple[str, Any]] = [
        (
            f"every category of the champion's rows is there ({', '.join(known)})",
            gxe.ExpectColumnDistinctValuesToContainSet(column="category", value_set=known),
        ),
        (
            f"categories the champion never saw are at most {cfg.max_share_shift:.0%} of the rows",
            gxe.ExpectColumnValuesToBeInSet(column="category", value_set=seen, mostly=1 - cfg.max_share_shift),
        ),
    ]
    for category, old in reference["categories"].items():
        only = {"row_condition": f'category=="{category}"', "condition_parser": "pandas"}
        low, high = old["share"] - cfg.max_share_shift, old["share"] + cfg.max_share_shift
        checks.append(
            (
                f"category {category}: share at least {max(low, 0):.0%} (was {old['share']:.0%})",
                gxe.ExpectColumnValuesToBeInSet(column="category", value_set=[category], mostly=max(low, 0.0)),
            )
        )
        if high < 1:
            checks.append(
                (
                    f"category {category}: share at most {high:.0%} (was {old['share']:.0%})",
                    gxe.ExpectColumnValuesToNotBeInSet(column="category", value_set=[category], mostly=1 - high),
                )
            )
        kinds = [k for k, share in old["reference_kinds"].items() if share >= 0.01]
        kept = sum(old["reference_kinds"][k] for k in kinds)
        checks.append(
            (
                f"category {category}: reference formats stay {'/'.join(sorted(kinds))}",
                gxe.ExpectColumnValuesToBeInSet(
                    column="reference_kind", value_set=kinds, mostly=max(kept - cfg.max_format_shift, 0.0), **only
                ),
            )
        )
        for kind in kinds:  # and each in about its share: 93% integers turning into fractions is a change
            share = old["reference_kinds"][kind]
            if share - cfg.max_format_shift > 0:
                checks.append(
                    (
                        f"category {category}: {kind} references at least {share - cfg.max_format_shift:.0%} "
                        f"(was {share:.0%})",
                        gxe.ExpectColumnValuesToBeInSet(
                            column="reference_kind", value_set=[kind], mostly=share - cfg.max_format_shift, **only
                        ),
                    )
                )
        if old.get("reference_range"):
            low, high = _widen(old["reference_range"], cfg.range_margin)
            checks.append(
                (
                    f"category {category}: numeric references within {low:g} .. {high:g}",
                    gxe.ExpectColumnValuesToBeBetween(
                        column="reference_value", min_value=low, max_value=high, mostly=1 - cfg.max_out_of_range, **only
                    ),
                )
            )
    if reference.get("question_length"):
        low, high = _widen(reference["question_length"], cfg.range_margin)
        checks.append(
            (
                f"question length within {max(low, 0):.0f} .. {high:.0f} characters",
                gxe.ExpectColumnValueLengthsToBeBetween(
                    column="question", min_value=max(int(low), 0), max_value=int(high), mostly=1 - cfg.max_out_of_range
                ),
            )
        )
    floor = reference["solution_share"] - cfg.max_solution_drop
    if floor > 0:
        checks.append(
            (
                f"rows with a worked solution at least {floor:.0%} (was {reference['solution_share']:.0%})",
                gxe.ExpectColumnValuesToBeInSet(column="has_solution", value_set=[True], mostly=floor),
            )
        )
    return checks


def _run(frame: pl.DataFrame, checks: list[tuple[str, Any]]) -> list[dict]:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = ctx.data_sources.add_pandas("drift").add_dataframe_asset("rows").add_batch_definition_whole_dataframe("all")
    for i, (name, expectation) in enumerate(checks):
        expectation.meta = {"rlvrflow_check": i}
    suite = ctx.suites.add(gx.ExpectationSuite(name="drift", expectations=[e for _, e in checks]))
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name="drift", data=batch, suite=suite))
    result = vd.run(batch_parameters={"dataframe": frame.to_pandas()}).to_json_dict()
    out = []
    for r in result["results"]:
        i = r["expectation_config"]["meta"]["rlvrflow_check"]
        res = r.get("result") or {}
        seen = res.get("element_count") or 0
        share = 1 - (res.get("unexpected_percent") or 0.0) / 100 if seen else None
        out.append(
            (
                i,
                {
                    "check": checks[i][0],
                    "ok": bool(r["success"]),
                    "expectation": r["expectation_config"]["type"],
                    "rows": seen,
                    "share_expected": None if share is None else round(share, 4),
                },
            )
        )
    return [check for _, check in sorted(out, key=lambda pair: pair[0])]  # the suite's order, not GX's


def source_file(rows: pl.DataFrame) -> pl.Series:
    """Each row's file, from its provenance (`source`: `file:line`, `file:row N`, `dir[split]:row N`)."""
    return rows["source"].cast(pl.String).fill_null("").str.replace(r"(\[[^\]]*\])?:(row )?\d+$", "")


def kept_per_file(rows: pl.DataFrame, files: dict[str, dict]) -> dict[str, int] | None:
    """Verified rows per source file (`source_file`); None for rows without provenance."""
    if "source" not in rows.columns:
        return None
    origin = source_file(rows)
    counts = dict(zip(*origin.value_counts().to_dict(as_series=False).values()))
    return {path: counts.get(path, 0) for path in files}


def changes(
    rows: pl.DataFrame, files: dict[str, dict], reference: dict, rejects: dict[str, int] | None = None
) -> dict[str, Any]:
    """What is new since the reference: files added, removed or changed; rows per file and category and
    rejected rows per reason, then and now."""
    old_files, new_files = reference.get("files", {}), files or {}
    now = rows.group_by("category").len() if rows.height else pl.DataFrame({"category": [], "len": []})
    counts_now = {str(c): n for c, n in zip(now["category"], now["len"])}
    counts_then = {c: v["rows"] for c, v in reference["categories"].items()}
    return {
        "files_added": sorted(set(new_files) - set(old_files)),
        "files_removed": sorted(set(old_files) - set(new_files)),
        "files_changed": sorted(
            p for p in set(old_files) & set(new_files) if old_files[p].get("sha256") != new_files[p].get("sha256")
        ),
        "rows": {"then": reference["rows"], "now": rows.height},
        "rows_per_file": {
            p: {"then": old_files.get(p, {}).get("rows"), "now": new_files.get(p, {}).get("rows")}
            for p in sorted(set(old_files) | set(new_files))
        },
        "rows_per_category": {
            c: {"then": counts_then.get(c, 0), "now": counts_now.get(c, 0)}
            for c in sorted(set(counts_then) | set(counts_now))
        },
        "rejects_by_reason": {
            r: {"then": reference.get("rejects", {}).get(r, 0), "now": (rejects or {}).get(r, 0)}
            for r in sorted(set(reference.get("rejects", {})) | set(rejects or {}))
        },
    }


def _lost_share(files: dict[str, dict]) -> float:
    """Share of the rows read from these files (ingest's kept and quarantined) that did not reach training."""
    read = sum((f.get("rows") or 0) + (f.get("rejected") or 0) for f in files.values())
    kept = sum(f.get("kept") or 0 for f in files.values())
    return 1 - kept / read if read and all(f.get("kept") is not None for f in files.values()) else 0.0


def check_drift(
    rows: pl.DataFrame, files: dict[str, dict], reference: dict, cfg: DriftConfig, rejects: dict[str, int] | None = None
) -> dict[str, Any]:
    """{changes, checks, failed, scope, profile}: tonight's new rows against the reference profile.

    The suite runs on the rows from files added or changed since the reference (a bad day is not
    diluted by weeks of good ones); with no new file, on all rows. Each new or changed file may lose
    at most `max_rejected_share` of its rows before training, or the reference's own loss plus 10
    points where that was higher (logs that always lose many rows to dedup)."""
    if reference.get("version") != PROFILE_VERSION:
        raise ValueError(
            f"the champion's data profile has version {reference.get('version')!r}, this rlvrflow "
            f"reads {PROFILE_VERSION}; register a model trained with this version"
        )
    what = changes(rows, files, reference, rejects)
    new_files = set(what["files_added"]) | set(what["files_changed"])
    kept = kept_per_file(rows, files)
    scope, checked = "all rows (no new or changed file)", rows
    if new_files and kept is not None:
        checked = rows.filter(source_file(rows).is_in(sorted(new_files)))
        scope = f"{checked.height} rows from {len(new_files)} new or changed file(s)"
    # new files of one spec source are measured against the champion's rows of that source: a new day
    # of ticket logs holds the ticket categories, not the ones another source (a CSV export) brings
    sources = {files[p].get("source") for p in new_files if p in files}
    own = reference.get("sources", {}).get(next(iter(sources))) if len(sources) == 1 else None
    if own and checked is not rows:
        reference = {**reference, "categories": own["categories"], "seen_categories": sorted(reference["categories"])}
        scope += f", against the champion's rows of source {next(iter(sources))}"
    checks = _run(_with_derived(checked), _expectations(reference, cfg)) if checked.height else []
    limit = max(cfg.max_rejected_share, _lost_share(reference.get("files", {})) + 0.1)
    for path in sorted(new_files) if kept is not None else ():  # a source that broke loses most of its rows
        f = files[path]
        read = (f.get("rows") or 0) + (f.get("rejected") or 0)  # ingest's kept and quarantined rows
        lost = read - kept.get(path, 0)
        share = lost / read if read else 0.0
        checks.append(
            {
                "check": f"file {path}: at most {limit:.0%} of its rows lost before training ({lost} of {read})",
                "ok": share <= limit,
                "expectation": "max_rejected_share",
                "rows": read,
                "share_expected": round(1 - share, 4),
            }
        )
    failed = [c["check"] for c in checks if not c["ok"]]
    if not checked.height:
        failed.append("no rows from tonight's new files reached training" if new_files else "no rows tonight")
    return {
        "changes": what,
        "scope": scope,
        "checks": checks,
        "failed": failed,
        "profile": profile(rows, files, rejects),
    }
