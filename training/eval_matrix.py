"""The eval matrix: one row per model (the SFT baseline, then every checkpoint), every dimension a column.

    rows = build_matrix(evals, robustness=robust_by_model, regression={"general": general_by_model})
    print(format_matrix(rows))
    best = choose_best(rows, max_regression=2.0)  # a name: "sft" or "step_000200"

Columns: pass@1 greedy, pass@1 sampled, pass@k, format rate, completion length mean / p90,
stability (mean per-prompt variance of correctness over the n samples, and the share of prompts
that are "sometimes right": neither 0 nor n of n correct), robustness (the share of the robustness
set handled well, greedy), and greedy pass@1 on each regression set with its change against SFT in
points (0-100 scale). A checkpoint that lost more than `max_regression` points on any regression
set is flagged and `choose_best` never picks it; SFT is picked when no checkpoint beats it.

Inputs are `training.evaluate` results (dicts). Stability reads `per_prompt` when the result has
it (a list of {"id", "n", "correct"}: sampled completions and how many were correct, per prompt);
without it, the result's own `per_prompt_variance` and `zero_variance_prompts`, which eval computes
from the same counts. Pure functions: no I/O, no torch.
"""
from __future__ import annotations

from typing import Mapping, Sequence

BASELINE = "sft"
COLUMNS = ("pass_at_1_greedy", "pass_at_1_sampled", "pass_at_k", "format_rate", "length_mean", "length_p90")


def stability(counts: Sequence[tuple[int, int]]) -> dict:
    """Mean per-prompt variance p(1-p) of correctness (p = c/n) and the share of prompts with 0 < c < n."""
    if not counts:
        raise ValueError("stability: no prompts; pass one (correct, n) pair per eval prompt")
    for c, n in counts:
        if n < 1 or not 0 <= c <= n:
            raise ValueError(f"stability: ({c}, {n}) is not a count of correct samples out of n >= 1")
    var = [(c / n) * (1 - c / n) for c, n in counts]
    return {"variance": sum(var) / len(var), "sometimes_right": sum(0 < c < n for c, n in counts) / len(counts)}


def stability_of(result: Mapping, name: str = "?") -> dict:
    """`stability` of one eval result, from its per-prompt counts or its summary fields (see above)."""
    if result.get("per_prompt"):
        return stability([(int(p["correct"]), int(p["n"])) for p in result["per_prompt"]])
    if "per_prompt_variance" in result and "zero_variance_prompts" in result:
        return {"variance": float(result["per_prompt_variance"]),
                "sometimes_right": 1.0 - float(result["zero_variance_prompts"])}
    raise ValueError(f"eval result {name!r} has neither per_prompt counts nor per_prompt_variance and "
                     "zero_variance_prompts; pass the dict that training.evaluate returns")


def _named(results, what: str) -> dict[str, dict]:
    """{name: result} from a mapping, or from a list of results that carry `name` (order kept)."""
    if isinstance(results, Mapping):
        return dict(results)
    out = {}
    for i, r in enumerate(results):
        if "name" not in r:
            raise ValueError(f"{what}[{i}] has no 'name'; give each eval result the model's name (sft, step_000100)")
        out[str(r["name"])] = r
    return out


def build_matrix(evals, robustness: Mapping[str, Mapping] | None = None,
                 regression: Mapping[str, Mapping[str, Mapping]] | None = None, max_regression: float = 2.0,
                 baseline: str = BASELINE) -> list[dict]:
    """Matrix rows, the baseline first, then the other models in the order given.

    evals: eval results of the main held-out set, a list with `name`s or {name: result}; one must be
    `baseline`. robustness: {model name: eval result on the robustness set}. regression: {set name:
    {model name: eval result on that set}}. A model missing from an optional set gets None there
    (shown as "-"; a set it was not evaluated on is not held against it).
    """
    main = _named(evals, "evals")
    if baseline not in main:
        raise ValueError(f"build_matrix: no eval result named {baseline!r} among {sorted(main)}; the SFT "
                         "baseline must be evaluated like every checkpoint")
    order = [baseline] + [n for n in main if n != baseline]
    regression = {k: dict(v) for k, v in (regression or {}).items()}
    for set_name, by_model in regression.items():
        if baseline not in by_model:
            raise ValueError(f"build_matrix: regression set {set_name!r} has no {baseline!r} result; without the "
                             "baseline a drop cannot be measured")
    rows = []
    for name in order:
        r = main[name]
        missing = [c for c in COLUMNS if c not in r]
        if missing:
            raise ValueError(f"build_matrix: eval result {name!r} lacks {missing}; pass training.evaluate's dict")
        st = stability_of(r, name)
        row = {"name": name, "is_baseline": name == baseline, "k": r.get("k"), "n_prompts": r.get("n_prompts"),
               **{c: float(r[c]) for c in COLUMNS},
               "stability_variance": st["variance"], "sometimes_right": st["sometimes_right"],
               "robustness": _greedy((robustness or {}).get(name)), "regression": {}, "regression_delta": {},
               "regressed": []}
        for set_name, by_model in regression.items():
            score, base = _greedy(by_model.get(name)), _greedy(by_model[baseline])
            row["regression"][set_name] = score
            delta = None if score is None else round(100 * (score - base), 4)
            row["regression_delta"][set_name] = delta
            if delta is not None and -delta > max_regression:
                row["regressed"].append(set_name)
        rows.append(row)
    return rows


def _greedy(result: Mapping | None) -> float | None:
    return None if result is None else float(result["pass_at_1_greedy"])


def choose_best(rows: Sequence[Mapping], max_regression: float = 2.0, metric: str = "pass_at_1_greedy") -> str:
    """The name of the best model: the highest `metric` among checkpoints that lost at most
    `max_regression` points on every regression set (the latest wins ties, as in
    training.checkpoint.best_checkpoint); the baseline unless one of them beats it strictly."""
    base = next((r for r in rows if r["is_baseline"]), None)
    if base is None:
        raise ValueError("choose_best: no baseline row; build the rows with build_matrix")

    def kept(r: Mapping) -> bool:
        return all(d is None or -d <= max_regression for d in r["regression_delta"].values())

    better = [r for r in rows if not r["is_baseline"] and kept(r) and r[metric] > base[metric]]
    if not better:
        return base["name"]
    top = max(r[metric] for r in better)
    return [r for r in better if r[metric] == top][-1]["name"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def format_matrix(rows: Sequence[Mapping]) -> str:
    """A fixed-width text table (percentages; length in tokens); `!` marks a regressed set."""
    sets = list(rows[0]["regression"]) if rows else []
    head = ["model", "p@1 greedy", "p@1 samp", f"pass@{rows[0]['k'] if rows else 'k'}", "format",
            "len mean/p90", "var", "sometimes", "robust"] + sets
    table = [head]
    for r in rows:
        cells = [r["name"], _pct(r["pass_at_1_greedy"]), _pct(r["pass_at_1_sampled"]), _pct(r["pass_at_k"]),
                 _pct(r["format_rate"]), f"{r['length_mean']:.1f}/{r['length_p90']:.0f}",
                 f"{r['stability_variance']:.3f}", _pct(r["sometimes_right"]), _pct(r["robustness"])]
        for s in sets:
            d = r["regression_delta"][s]
            mark = "!" if s in r["regressed"] else ""
            cells.append(_pct(r["regression"][s]) + ("" if r["is_baseline"] or d is None else f" ({d:+.1f}){mark}"))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in table]
    flagged = [f"{r['name']} lost more than the allowed points on {', '.join(r['regressed'])}"
               for r in rows if r["regressed"]]
    return "\n".join(lines + [f"! {f}" for f in flagged])
