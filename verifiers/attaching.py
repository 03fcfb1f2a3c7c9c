"""Attach a verifier to every row and reject rows whose reference fails its own verifier.

For each row: the rule for its `category` gives `verifier` and `verifier_params` (a JSON string;
relative paths resolved against the spec's folder: the keys `database`, `path`, `*_path`, `*_file`
always, any other string value when such a file exists). With `answer_only_targets` on, an empty
`solution` is filled from the reference where the verifier module can build one
(`solution_from_reference`): math writes `\\boxed{gold}` when the row's prompt asks for \\boxed,
`答案：gold` when it is in Chinese, else `Answer: gold`; choice writes `Answer: B` (or `答案：B`); sql
wraps the gold in a ```sql fence; code, json and keyword cannot and leave it empty. Off (the
default), a row without a logged solution keeps an empty one: it is an outcome-only row, which SFT
skips and GRPO learns from. The stats count both (`answer_only_targets`, `outcome_only_rows`).
Then the reference self-check, in parallel processes: the module's `check_reference` (gold SQL
runs, tests compile, gold answer parses, schema is valid) and, when the row has a solution, the
verifier must accept it. Rejects carry stage=attach and a reason: `no_verifier_rule`,
`empty_reference` or `reference_self_check` (detail says why). rows_in == kept + rejected.
User verifiers get the same hooks by defining `check_reference(reference, params)` and
`solution_from_reference(reference, prompt)` next to the verifier function.
A rule with an `environment` instead of a verifier: its SQL must compile on its database (else a
ValueError naming the rule stops attach), its rows get verifier `episode` and the resolved
environment as `verifier_params`, and each is checked in this process by episode_rows.check_row
(the reference is the outcome's rows; a worked transcript replays to it); failures are
`reference_self_check` rejects like any other.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from . import verdict as V
from .config import EPISODE, VerifierConfig
from .episode_rows import check_row
from .pool import run_one, score_many
from .registry import get_verifier

SELF_CHECK = "rlvrflow.verifiers.attaching:self_check"
_PATH_KEYS = ("database", "path")


class AttachResult(NamedTuple):
    kept: object  # polars.DataFrame
    rejects: object  # polars.DataFrame
    stats: dict


def resolve_params(params: dict, base_dir: Path) -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, str) and value and not Path(value).is_absolute() and "\n" not in value:
            named = key in _PATH_KEYS or key.endswith(("_path", "_file"))
            if named or (len(value) < 512 and (base_dir / value).exists()):
                value = str((base_dir / value).resolve())
        out[key] = value
    return out


def _hook(verifier: str, name: str):
    fn = get_verifier(verifier)
    return getattr(sys.modules.get(fn.__module__), name, None)


def self_check(solution: str, reference: str, params: dict) -> V.Verdict:
    """Runs in a pool worker: params = {"verifier": name, "params": {...}}."""
    name, vparams = params["verifier"], params["params"]
    check = _hook(name, "check_reference")
    if check is not None:
        problem = check(reference, vparams)
        if problem:
            return V.error(problem)
    if not solution.strip():
        return V.correct("", "reference checks out; the row has no solution to run")
    v = run_one(get_verifier(name), solution, reference, vparams)
    if v.correct:
        return V.correct(v.extracted, "the row's solution passes its own verifier")
    return V.error(f"the row's solution gets '{v.status}' from its own verifier: {v.detail}", v.extracted)


def _build_solution(verifier: str, reference: str, prompt: str) -> str:
    build = _hook(verifier, "solution_from_reference")
    return (build(reference, prompt) or "") if build is not None else ""


def _checked_environment(rule, base_dir: Path):
    """The rule's environment, its database resolved and every statement compiled on it."""
    env = rule.resolved_environment(base_dir)
    try:
        env.check()
    except (ValueError, FileNotFoundError) as exc:
        raise ValueError(f"verifiers.rules[{rule.category}].environment: {exc}") from None
    return env


def attach(df, config: VerifierConfig, base_dir: Path | str, workers: int | None = None) -> AttachResult:
    """(kept, rejects, stats) for a polars frame of rows; see the module docstring."""
    import polars as pl

    t0 = time.perf_counter()
    base_dir = Path(base_dir)
    rows = df.to_dicts()
    n = len(rows)
    verifier, params_json, solution = [""] * n, ["{}"] * n, [""] * n
    reason, detail = [""] * n, [""] * n
    checks, check_rows, max_timeout, built = [], [], 0.0, [False] * n
    envs: dict[str, object] = {}
    for i, row in enumerate(rows):
        rule = config.rule_for(str(row.get("category") or ""))
        solution[i] = str(row.get("solution") or "")
        if rule is None:
            reason[i] = "no_verifier_rule"
            detail[i] = (
                f"category {row.get('category')!r} has no verifier rule; add one under "
                f"verifiers.rules (known: {', '.join(r.category for r in config.rules)})"
            )
            continue
        reference = str(row.get("reference") or "")
        if rule.environment is not None:
            env = envs.get(rule.category) or envs.setdefault(rule.category, _checked_environment(rule, base_dir))
            verifier[i], params_json[i] = EPISODE, env.model_dump_json()
            if not reference.strip():
                reason[i], detail[i] = "empty_reference", "the row has no reference to verify against"
            elif config.self_check and (problem := check_row(env, {**row, "solution": solution[i]})):
                reason[i], detail[i] = "reference_self_check", f"error: {problem}"
            continue
        params = resolve_params(dict(rule.params), base_dir)
        verifier[i], params_json[i] = rule.verifier, json.dumps(params, ensure_ascii=False, sort_keys=True)
        if not reference.strip():
            reason[i], detail[i] = "empty_reference", "the row has no reference to verify against"
            continue
        if not solution[i].strip() and config.answer_only_targets:
            solution[i] = _build_solution(rule.verifier, reference, str(row.get("prompt") or ""))
            built[i] = bool(solution[i].strip())
        if config.self_check:
            max_timeout = max(max_timeout, float(params.get("timeout_s", 0) or 0))
            checks.append((SELF_CHECK, solution[i], reference, {"verifier": rule.verifier, "params": params}))
            check_rows.append(i)
    timeout = max(config.timeout_s, 3 * max_timeout + 5)
    for i, v in zip(check_rows, score_many(checks, workers=workers or config.workers, timeout_s=timeout)):
        if not v.correct:
            reason[i], detail[i] = "reference_self_check", f"{v.status}: {v.detail}"
    full = df.with_columns(
        pl.Series("verifier", verifier, dtype=pl.String),
        pl.Series("verifier_params", params_json, dtype=pl.String),
        pl.Series("solution", solution, dtype=pl.String),
    )
    keep = pl.Series("keep", [not r for r in reason], dtype=pl.Boolean)
    kept = full.filter(keep)
    rejects = full.filter(~keep).with_columns(
        pl.lit("attach").alias("stage"),
        pl.Series("reason", [r for r in reason if r], dtype=pl.String),
        pl.Series("detail", [d for r, d in zip(reason, detail) if r], dtype=pl.String),
    )
    by_reason = dict(Counter(r for r in reason if r))
    outcome_only = sum(1 for r, sol in zip(reason, solution) if not r and not sol.strip())
    built_kept = sum(1 for r, b in zip(reason, built) if not r and b)
    stats = {
        "rows_in": n,
        "rows_kept": kept.height,
        "rows_rejected": rejects.height,
        "rejected_by_reason": by_reason,
        "answer_only_targets": built_kept,
        "outcome_only_rows": outcome_only,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    assert stats["rows_in"] == stats["rows_kept"] + stats["rows_rejected"], stats
    return AttachResult(kept, rejects, stats)
