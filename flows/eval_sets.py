"""The evaluate stage's extra sets: regression sets (forgetting) and the robustness set (declining or asking).

    sets = load_sets(spec)          # EvalSets(regression={"general": frame}, robustness=frame or None)
    digests = set_digests(spec)     # {path: sha256}: the evaluate stage's extra cache key

`eval.regression_sets` entries name a file (JSONL or Parquet rows with id, prompt, reference;
relative to the spec file) and the verifier that scores every row of it: each row's `verifier` and
`verifier_params` come from the entry, params resolved against the spec's folder as
verifiers.attach resolves a rule's. `eval.robustness_set` names a file whose rows carry their own
`verifier` (e.g. `refusal`) and optional `verifier_params`. The retail sample writes both with
`python examples/retail/eval_sets.py --out examples/retail/eval` (`make sample` does).

A missing set file is a data error of the evaluate stage, not of the spec: `spec-check`, `clean`,
`tier` and `export-dpo` work before the sets are written, and the message names the spec field and
how to write the file. Bad rows (no id, duplicate ids, an unknown verifier) name the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvrflow.flows.errors import DataError
from rlvrflow.flows.spec import DomainSpec

COLUMNS = ("id", "category", "prompt", "reference", "verifier", "verifier_params")
REQUIRED = ("id", "prompt", "reference")


@dataclass
class EvalSets:
    regression: dict[str, Any] = field(default_factory=dict)  # set name -> polars frame (COLUMNS)
    robustness: Any = None  # polars frame or None


def set_paths(spec: DomainSpec) -> dict[str, Path]:
    """Every set file the spec names, by where it is named ("eval.regression_sets[0] (general)")."""
    paths = {
        f"eval.regression_sets[{i}] ({s.name})": spec.resolve(s.path) for i, s in enumerate(spec.eval.regression_sets)
    }
    if spec.eval.robustness_set:
        paths["eval.robustness_set"] = spec.resolve(spec.eval.robustness_set)
    return paths


def _missing(where: str, path: Path) -> DataError:
    return DataError(
        f"evaluate: {where}: {path} does not exist; write it (the retail sample: python "
        "examples/retail/eval_sets.py --out examples/retail/eval --seed 0, or make sample), "
        "fix the path (relative to the spec file) or remove the entry from the spec's eval section"
    )


def set_digests(spec: DomainSpec) -> dict[str, str]:
    """{path: sha256} of every set file: what the evaluate stage's key holds of them."""
    from rlvrflow.flows.cache import file_digest

    out = {}
    for where, path in set_paths(spec).items():
        if not path.is_file():
            raise _missing(where, path)
        out[str(path)] = file_digest(path)
    return out


def _records(path: Path, where: str) -> list[tuple[str, dict]]:
    """(location, row) pairs of a JSONL or Parquet file; a line that is not a JSON object is a data error."""
    if not path.is_file():
        raise _missing(where, path)
    if path.suffix == ".parquet":
        import polars as pl

        return [(f"{path} row {i}", r) for i, r in enumerate(pl.read_parquet(path).to_dicts(), 1)]
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"evaluate: {where}: {path}:{n} is not JSON ({exc.msg}); one object per line") from None
        if not isinstance(row, dict):
            raise DataError(f"evaluate: {where}: {path}:{n} is not a JSON object")
        out.append((f"{path}:{n}", row))
    return out


def _params_json(raw: Any, base_dir: Path, at: str, where: str) -> str:
    from rlvrflow.verifiers.attaching import resolve_params

    try:
        params = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except (json.JSONDecodeError, TypeError, ValueError):
        raise DataError(f"evaluate: {where}: {at}: verifier_params must be a JSON object (or its JSON text)") from None
    return json.dumps(resolve_params(params, base_dir), ensure_ascii=False, sort_keys=True)


def read_set(spec: DomainSpec, path: Path, where: str, verifier: str | None = None, params: dict | None = None):
    """The rows of one set file as a polars frame of COLUMNS. With `verifier` (a regression set) every
    row gets it and `params`; without, each row must carry its own `verifier` (the robustness set)."""
    import polars as pl

    from rlvrflow.verifiers.registry import UnknownVerifier, check_name

    rows, seen = [], set()
    fixed = None if verifier is None else _params_json(params or {}, spec.base_dir, "params", where)
    for at, r in _records(path, where):
        lacking = [c for c in REQUIRED + (() if verifier else ("verifier",)) if r.get(c) in (None, "")]
        if lacking:
            raise DataError(
                f"evaluate: {where}: {at} lacks {lacking}; each row needs id, prompt and reference"
                + ("" if verifier else " and its verifier (e.g. refusal)")
            )
        if str(r["id"]) in seen:
            raise DataError(f"evaluate: {where}: {at}: id {r['id']!r} appears twice; ids must be unique")
        seen.add(str(r["id"]))
        name = verifier or str(r["verifier"])
        try:
            check_name(name)
        except UnknownVerifier as exc:
            raise DataError(f"evaluate: {where}: {at}: {exc}") from None
        rows.append(
            {
                "id": str(r["id"]),
                "category": str(r.get("category") or ""),
                "prompt": str(r["prompt"]),
                "reference": str(r["reference"]),
                "verifier": name,
                "verifier_params": fixed
                if verifier
                else _params_json(r.get("verifier_params"), spec.base_dir, at, where),
            }
        )
    if not rows:
        raise DataError(f"evaluate: {where}: {path} holds no rows")
    return pl.DataFrame(rows, schema={c: pl.String for c in COLUMNS})


def load_sets(spec: DomainSpec) -> EvalSets:
    """Every regression set (by name, in spec order) and the robustness set, read and checked."""
    sets = EvalSets()
    for i, s in enumerate(spec.eval.regression_sets):
        sets.regression[s.name] = read_set(
            spec, spec.resolve(s.path), f"eval.regression_sets[{i}] ({s.name})", s.verifier, s.params
        )
    if spec.eval.robustness_set:
        sets.robustness = read_set(spec, spec.resolve(spec.eval.robustness_set), "eval.robustness_set")
    return sets
