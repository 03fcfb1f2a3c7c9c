"""Validation with Great Expectations (an ephemeral context: nothing is written to disk by GX).

The suite: required columns non-null, unique ids, question/prompt/reference length bounds,
categories in the allowed set, non-empty references, and a minimum row count. Each row-level
expectation has a reason slug; the rows it flags (found through GX's `unexpected_index_list` on a
`_row` column) are rejected with that slug (for duplicate ids, every occurrence after the first).
The run stops, raising `ValidationFailed`, when a table-level expectation fails, when an
expectation itself errors, or when more than `max_rejected_fraction` of the rows were rejected.
The JSON report (GX's own `to_json_dict()`, with our verdict as `success`, GX's as `gx_success`,
and `failures`: what failed on which rows) is returned for `validation.json`.

GX costs ~5-7 s to import, so it is imported inside `validate` only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import polars as pl

from .config import ValidationConfig
from .stage import StageResult, make_stats, reject_frame

__all__ = ["validate", "check_rows", "streamed_report", "ValidationFailed", "REQUIRED_COLUMNS", "detail_of"]

REQUIRED_COLUMNS = ("id", "domain", "category", "question", "reference", "prompt", "source")
SHOW_ROWS = 20


class ValidationFailed(RuntimeError):
    """The validation suite failed; `report` (a dict, also in validation.json) says what and where."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        super().__init__(format_report(report))


def format_report(report: dict[str, Any]) -> str:
    lines = [f"validation failed: {report['reason']}"]
    for f in report["failures"]:
        rows = ", ".join(f"{r.get('id') or '?'} ({r.get('source') or '?'})" for r in f["rows"])
        more = f" and {f['unexpected_count'] - len(f['rows'])} more" if f["unexpected_count"] > len(f["rows"]) else ""
        where = f" on rows: {rows}{more}" if rows else ""
        lines.append(
            f"  - {f['expectation']}({f['column'] or 'table'}) -> {f['reason']}: "
            f"{f['unexpected_count']} unexpected{where}{'; ' + f['note'] if f['note'] else ''}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class _Check:
    reason: str
    expectation: Any
    column: str | None

    def __post_init__(self) -> None:
        # GX returns results in its own order: each expectation carries its reason in `meta`.
        self.expectation.meta = {**(self.expectation.meta or {}), "rlvrflow_reason": self.reason}


def _checks(cfg: ValidationConfig, columns: list[str], whole_table: bool = True) -> list[_Check]:
    """The suite; without `whole_table`, only the checks that look at one row at a time (the
    streaming path checks unique ids and the row count on running counts instead)."""
    import great_expectations.expectations as gxe

    checks = [_Check(f"null:{c}", gxe.ExpectColumnValuesToNotBeNull(column=c), c) for c in REQUIRED_COLUMNS]
    checks += [
        _Check(
            "empty_reference", gxe.ExpectColumnValueLengthsToBeBetween(column="reference", min_value=1), "reference"
        ),
        _Check(
            "reference_too_long",
            gxe.ExpectColumnValueLengthsToBeBetween(column="reference", max_value=cfg.max_reference_chars),
            "reference",
        ),
        _Check(
            "question_too_short",
            gxe.ExpectColumnValueLengthsToBeBetween(column="question", min_value=cfg.min_question_chars),
            "question",
        ),
        _Check(
            "question_too_long",
            gxe.ExpectColumnValueLengthsToBeBetween(column="question", max_value=cfg.max_question_chars),
            "question",
        ),
        _Check(
            "prompt_too_long",
            gxe.ExpectColumnValueLengthsToBeBetween(column="prompt", max_value=cfg.max_prompt_chars),
            "prompt",
        ),
    ]
    if cfg.categories:
        checks.append(
            _Check(
                "bad_category",
                gxe.ExpectColumnValuesToBeInSet(column="category", value_set=list(cfg.categories)),
                "category",
            )
        )
    if whole_table:
        checks.append(_Check("duplicate_id", gxe.ExpectColumnValuesToBeUnique(column="id"), "id"))
        checks.append(_Check("too_few_rows", gxe.ExpectTableRowCountToBeBetween(min_value=cfg.min_rows), None))
    return checks


def check_rows(
    df: pl.DataFrame, cfg: ValidationConfig
) -> tuple[list[str | None], dict[str, Any], list[dict], list[str]]:
    """The row-at-a-time checks on one chunk: (first failing reason per row or None, GX's trimmed
    result, failures, reasons that stop the run). `df` needs no `_row` column."""
    work = df.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))
    checks = _checks(cfg, df.columns, whole_table=False)
    gx_result = _run_suite(work, checks)
    reason_of, failures, stop = _failures(gx_result, checks, work, cfg)
    return [reason_of.get(r) for r in range(work.height)], _trimmed(gx_result), failures, stop


def _run_suite(df: pl.DataFrame, checks: list[_Check]) -> dict[str, Any]:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = ctx.data_sources.add_pandas("rows").add_dataframe_asset("rows").add_batch_definition_whole_dataframe("all")
    suite = ctx.suites.add(gx.ExpectationSuite(name="rows", expectations=[c.expectation for c in checks]))
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name="rows", data=batch, suite=suite))
    result = vd.run(
        batch_parameters={"dataframe": df.to_pandas()},
        result_format={"result_format": "COMPLETE", "unexpected_index_column_names": ["_row"]},
    )
    return result.to_json_dict()


def _reason_of(result: dict[str, Any]) -> str:
    return (result["expectation_config"].get("meta") or {})["rlvrflow_reason"]


def detail_of(reason: str, cfg: ValidationConfig) -> str:
    fixed = {
        "duplicate_id": "id already used by an earlier row; ids must be unique",
        "empty_reference": "reference is empty",
        "reference_too_long": f"reference longer than max_reference_chars={cfg.max_reference_chars}",
        "question_too_short": f"question shorter than min_question_chars={cfg.min_question_chars}",
        "question_too_long": f"question longer than max_question_chars={cfg.max_question_chars}",
        "prompt_too_long": f"prompt longer than max_prompt_chars={cfg.max_prompt_chars}",
        "bad_category": f"category not in validation.categories {list(cfg.categories)}",
    }
    return fixed.get(reason, f"{reason.split(':', 1)[-1]} is null")


def _flagged(check: _Check, result: dict[str, Any], rejected: dict[int, str], ids: list[str]) -> list[int]:
    """The rows an expectation flags. GX flags every copy of a duplicated id: keep the first copy
    that no other check rejected (duplicate_id runs after the other row checks)."""
    rows = [int(r["_row"]) for r in result["result"].get("unexpected_index_list") or []]
    if check.reason != "duplicate_id":
        return rows
    seen: set[str] = set()
    repeats = []
    for r in sorted(rows):
        if r in rejected:
            continue
        if ids[r] in seen:
            repeats.append(r)
        seen.add(ids[r])
    return repeats


def _failures(
    gx_result: dict[str, Any], checks: list[_Check], work: pl.DataFrame, cfg: ValidationConfig
) -> tuple[dict[int, str], list[dict[str, Any]], list[str]]:
    """(row -> first reason that flags it, one entry per failed expectation, reasons that stop the run)."""
    reason_of: dict[int, str] = {}
    failures, stop = [], []
    ids, sources = work["id"].to_list(), work["source"].to_list()
    order = [c.reason for c in checks]
    by_reason = {c.reason: c for c in checks}
    for res in sorted(gx_result["results"], key=lambda r: order.index(_reason_of(r))):
        check = by_reason[_reason_of(res)]
        if res["success"]:
            continue
        errored = bool((res.get("exception_info") or {}).get("raised_exception"))
        rows = [] if errored or check.column is None else _flagged(check, res, reason_of, ids)
        for r in rows:
            reason_of.setdefault(r, check.reason)
        note = ""
        if errored:
            note = "the expectation raised: " + str(res["exception_info"].get("exception_message"))[:300]
            stop.append(check.reason)
        elif check.column is None:
            note = f"observed {res['result'].get('observed_value')}, need at least {cfg.min_rows}"
            stop.append(check.reason)
        failures.append(
            {
                "expectation": res["expectation_config"]["type"],
                "column": check.column,
                "reason": check.reason,
                "unexpected_count": len(rows) if rows else int(res["result"].get("unexpected_count") or 0),
                "rows": [{"id": ids[r], "source": sources[r]} for r in rows[:SHOW_ROWS]],
                "note": note,
            }
        )
    return reason_of, failures, stop


def _trimmed(gx_result: dict[str, Any]) -> dict[str, Any]:
    """GX's result with the per-row lists cut to SHOW_ROWS entries (COMPLETE lists every row)."""
    out = dict(gx_result)
    out["results"] = []
    for res in gx_result["results"]:
        result = dict(res.get("result") or {})
        for key in ("unexpected_list", "unexpected_index_list"):
            if len(result.get(key) or []) > SHOW_ROWS:
                result[key] = result[key][:SHOW_ROWS]
                result["lists_truncated_to"] = SHOW_ROWS
        result.pop("unexpected_index_query", None)
        out["results"].append({**res, "result": result})
    return out


def validate(df: pl.DataFrame, cfg: ValidationConfig) -> tuple[StageResult, dict[str, Any]]:
    """Run the suite; returns (kept/rejected rows, JSON report) or raises ValidationFailed."""
    start = time.perf_counter()
    work = df.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))
    checks = _checks(cfg, df.columns)
    gx_result = _run_suite(work, checks)
    reason_of, failures, stop = _failures(gx_result, checks, work, cfg)
    bad = sorted(reason_of)
    mask = pl.repeat(False, work.height, dtype=pl.Boolean, eager=True).scatter(bad, True)
    reasons = pl.Series([reason_of[r] for r in bad], dtype=pl.String)
    details = pl.Series([detail_of(reason_of[r], cfg) for r in bad], dtype=pl.String)
    rejected = reject_frame(work.filter(mask), "validate", reasons, details).drop("_row")
    kept = work.filter(~mask).drop("_row")
    share = len(bad) / work.height if work.height else 0.0
    # GX's own result at the top level (statistics, results), with our decision as `success`:
    # failing rows were rejected, so GX's `success` (kept as gx_success) is not the run's verdict.
    report = {
        **_trimmed(gx_result),
        "gx_success": gx_result["success"],
        "success": not stop and share <= cfg.max_rejected_fraction,
        "rows_checked": work.height,
        "rows_rejected": len(bad),
        "rejected_fraction": round(share, 4),
        "max_rejected_fraction": cfg.max_rejected_fraction,
        "failures": failures,
        "reason": "",
    }
    if stop:
        report["reason"] = "checks that reject the whole table failed: " + ", ".join(stop)
    elif share > cfg.max_rejected_fraction:
        report["reason"] = (
            f"{len(bad)} of {work.height} rows ({share:.1%}) failed row checks, more than "
            f"max_rejected_fraction={cfg.max_rejected_fraction}"
        )
    if not report["success"]:
        raise ValidationFailed(report)
    stats = make_stats(df.height, kept, rejected, time.perf_counter() - start)
    return StageResult(kept, rejected, stats), report


_ORDER = [f"null:{c}" for c in REQUIRED_COLUMNS] + [
    "empty_reference",
    "reference_too_long",
    "question_too_short",
    "question_too_long",
    "prompt_too_long",
    "bad_category",
    "duplicate_id",
    "too_few_rows",
]


def _merge_results(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GX's per-expectation results summed over the chunks (success only when every chunk passed)."""
    merged: dict[str, dict[str, Any]] = {}
    for c in chunks:
        for res in (c["gx"] or {}).get("results", []):
            reason = _reason_of(res)
            if reason not in merged:
                merged[reason] = {**res, "result": dict(res.get("result") or {})}
                continue
            acc = merged[reason]
            acc["success"] = acc["success"] and res["success"]
            for key in ("element_count", "unexpected_count", "missing_count"):
                if isinstance((res.get("result") or {}).get(key), int):
                    acc["result"][key] = int(acc["result"].get(key) or 0) + res["result"][key]
    return [merged[r] for r in sorted(merged, key=_ORDER.index)]


def _merge_failures(chunks: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    failures: dict[str, dict[str, Any]] = {}
    stop: list[str] = []
    for c in chunks:
        stop += [r for r in c["stop"] if r not in stop]
        for f in c["failures"]:
            acc = failures.setdefault(f["reason"], {**f, "unexpected_count": 0, "rows": []})
            acc["unexpected_count"] += f["unexpected_count"]
            acc["rows"] = (acc["rows"] + f["rows"])[:SHOW_ROWS]
            acc["note"] = acc["note"] or f["note"]
    return failures, stop


def streamed_report(
    chunks: list[dict[str, Any]],
    repeats: list[dict[str, str]],
    rows_checked: int,
    rows_rejected: int,
    cfg: ValidationConfig,
) -> dict[str, Any]:
    """validation.json for the streaming path: the chunks' row checks merged, unique ids and the row
    count decided on running counts (`repeats`: the rows rejected as duplicate_id, in order)."""
    failures, stop = _merge_failures(chunks)
    results = _merge_results(chunks)
    if repeats:
        failures["duplicate_id"] = {
            "expectation": "expect_column_values_to_be_unique",
            "column": "id",
            "reason": "duplicate_id",
            "unexpected_count": len(repeats),
            "rows": repeats[:SHOW_ROWS],
            "note": "",
        }
    if rows_checked < cfg.min_rows:
        stop.append("too_few_rows")
        failures["too_few_rows"] = {
            "expectation": "expect_table_row_count_to_be_between",
            "column": None,
            "reason": "too_few_rows",
            "unexpected_count": 0,
            "rows": [],
            "note": f"observed {rows_checked}, need at least {cfg.min_rows}",
        }
    for reason, kind, column, ok in (
        ("duplicate_id", "expect_column_values_to_be_unique", "id", not repeats),
        ("too_few_rows", "expect_table_row_count_to_be_between", None, rows_checked >= cfg.min_rows),
    ):
        results.append(
            {
                "success": ok,
                "expectation_config": {
                    "type": kind,
                    "kwargs": {"column": column} if column else {"min_value": cfg.min_rows},
                    "meta": {"rlvrflow_reason": reason},
                },
                "result": {"unexpected_count": len(repeats)} if column else {"observed_value": rows_checked},
            }
        )
    share = rows_rejected / rows_checked if rows_checked else 0.0
    report = {
        "suite_name": "rows",
        "results": results,
        "chunks": len(chunks),
        "statistics": {
            "evaluated_expectations": len(results),
            "successful_expectations": sum(bool(r["success"]) for r in results),
            "unsuccessful_expectations": sum(not r["success"] for r in results),
        },
        "gx_success": all(r["success"] for r in results),
        "success": not stop and share <= cfg.max_rejected_fraction,
        "rows_checked": rows_checked,
        "rows_rejected": rows_rejected,
        "rejected_fraction": round(share, 4),
        "max_rejected_fraction": cfg.max_rejected_fraction,
        "failures": [failures[r] for r in sorted(failures, key=_ORDER.index)],
        "reason": "",
    }
    if stop:
        report["reason"] = "checks that reject the whole table failed: " + ", ".join(stop)
    elif share > cfg.max_rejected_fraction:
        report["reason"] = (
            f"{rows_rejected} of {rows_checked} rows ({share:.1%}) failed row checks, more than "
            f"max_rejected_fraction={cfg.max_rejected_fraction}"
        )
    return report
