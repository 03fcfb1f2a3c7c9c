"""`rlvrflow verify --verifier NAME [--params JSON] IN.jsonl OUT.jsonl`, as a function.

Each input line is a JSON object with `response` and `reference` (and optional `params`, merged
over --params). Each output line keeps every input field in order and adds `score`, `status`,
`extracted` and `detail`. A malformed line becomes `{"line": N, "raw": ..., ...}` with status
`error`; nothing crashes on bad rows. Rows are verified across processes with a progress bar and
the output is written atomically. Also runnable as `python -m rlvrflow.verifiers.cli` (same arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rlvrflow.io import write_text

from . import verdict as V
from .pool import as_params, score_many
from .registry import UnknownVerifier, get_verifier

EXIT_OK, EXIT_USAGE = 0, 2


def _read_rows(in_path: Path, base: dict) -> tuple[list[dict | None], list[tuple], dict[int, V.Verdict]]:
    rows, items, bad = [], [], {}
    with open(in_path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            idx = len(rows)
            row = None
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("the line is JSON but not an object")
                missing = [k for k in ("response", "reference") if k not in row]
                if missing:
                    raise ValueError(f"missing field(s) {missing}")
                params = {**base, **as_params(row.get("params"))}
            except (ValueError, json.JSONDecodeError) as exc:
                kept = row if isinstance(row, dict) else {"raw": line.rstrip("\n")[:1000]}
                rows.append({"line": n, **kept})
                bad[idx] = V.error(
                    f"{in_path.name}:{n}: {exc}; each line must be a JSON object with "
                    "'response' and 'reference' (and optional 'params' object)"
                )
                continue
            rows.append(row)
            items.append((idx, row["response"], row["reference"], params))
    return rows, items, bad


def verify_file(
    verifier: Any, params_json: Any, in_path: Any, out_path: Any, workers: int | None = None, progress: bool = True
) -> int:
    """Verify every line of in_path into out_path; returns a process exit code."""
    if isinstance(verifier, Path) or (
        isinstance(params_json, (str, Path)) and Path(str(verifier)).is_file() and not Path(str(in_path)).is_file()
    ):
        # called as verify_file(in_path, out_path, verifier, params, workers)
        verifier, params_json, in_path, out_path = in_path, out_path, verifier, params_json
    in_path, out_path = Path(in_path), Path(out_path)
    try:
        get_verifier(str(verifier))
        base = as_params(params_json)
    except (UnknownVerifier, ValueError, json.JSONDecodeError) as exc:
        print(f"rlvrflow verify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not in_path.is_file():
        print(f"rlvrflow verify: {in_path}: input file not found", file=sys.stderr)
        return EXIT_USAGE
    rows, items, verdicts = _read_rows(in_path, base)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"verify[{verifier}]", unit="row", file=sys.stderr)
    got = score_many([(str(verifier), r, ref, p) for _, r, ref, p in items], workers=workers, progress=bar)
    if bar is not None:
        bar.close()
    verdicts.update({idx: v for (idx, *_), v in zip(items, got)})
    write_text(
        out_path,
        "".join(
            json.dumps({**row, **verdicts[idx].to_dict()}, ensure_ascii=False) + "\n" for idx, row in enumerate(rows)
        ),
    )
    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v.status] = counts.get(v.status, 0) + 1
    print(f"verified {len(rows)} rows: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())), file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlvrflow.verifiers.cli", description=__doc__.splitlines()[0])
    ap.add_argument("--verifier", required=True)
    ap.add_argument("--params", default="{}", help="JSON object of verifier params")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("input")
    ap.add_argument("output")
    a = ap.parse_args(argv)
    return verify_file(a.verifier, a.params, a.input, a.output, a.workers, not a.no_progress)


if __name__ == "__main__":
    sys.exit(main())
