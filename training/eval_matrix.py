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

With `constant` (training.baseline.constant_baseline: each category's most frequent training gold,
answered to every held-out prompt), the matrix gains a `constant` row, and every model row carries its
greedy gain over SFT and over that constant, with paired bootstrap intervals where per-prompt scores
exist (training.report.gain_interval). `decide_best` (the one place the best model is chosen;
`choose_best` is its name) never takes a checkpoint that does not beat the constant on the point
estimate and, where an interval exists, with its lower end above zero; when nothing beats both SFT
and the constant, SFT stays best and the decision carries a warning naming why.

Inputs are `training.evaluate` results (dicts). Stability reads `per_prompt` when the result has
it (a list of {"id", "n", "correct"}: sampled completions and how many were correct, per prompt);
without it, the result's own `per_prompt_variance` and `zero_variance_prompts`, which eval computes
from the same counts. Pure functions: no I/O, no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

BASELINE = "sft"
CONSTANT = "constant"
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
        return {
            "variance": float(result["per_prompt_variance"]),
            "sometimes_right": 1.0 - float(result["zero_variance_prompts"]),
        }
    raise ValueError(
        f"eval result {name!r} has neither per_prompt counts nor per_prompt_variance and "
        "zero_variance_prompts; pass the dict that training.evaluate returns"
    )


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


def build_matrix(
    evals,
    robustness: Mapping[str, Mapping] | None = None,
    regression: Mapping[str, Mapping[str, Mapping]] | None = None,
    max_regression: float = 2.0,
    baseline: str = BASELINE,
    constant: Mapping | None = None,
) -> list[dict]:
    """Matrix rows, the baseline first, then the other models in the order given, then the
    `constant` row when a constant baseline result is given.

    evals: eval results of the main held-out set, a list with `name`s or {name: result}; one must be
    `baseline`. robustness: {model name: eval result on the robustness set}. regression: {set name:
    {model name: eval result on that set}}. A model missing from an optional set gets None there
    (shown as "-"; a set it was not evaluated on is not held against it).
    """
    main = _named(evals, "evals")
    if baseline not in main:
        raise ValueError(
            f"build_matrix: no eval result named {baseline!r} among {sorted(main)}; the SFT "
            "baseline must be evaluated like every checkpoint"
        )
    order = [baseline] + [n for n in main if n != baseline]
    regression = {k: dict(v) for k, v in (regression or {}).items()}
    for set_name, by_model in regression.items():
        if baseline not in by_model:
            raise ValueError(
                f"build_matrix: regression set {set_name!r} has no {baseline!r} result; without the "
                "baseline a drop cannot be measured"
            )
    rows = []
    for name in order:
        r = main[name]
        missing = [c for c in COLUMNS if c not in r]
        if missing:
            raise ValueError(f"build_matrix: eval result {name!r} lacks {missing}; pass training.evaluate's dict")
        st = stability_of(r, name)
        row = {
            "name": name,
            "is_baseline": name == baseline,
            "k": r.get("k"),
            "n_prompts": r.get("n_prompts"),
            **{c: float(r[c]) for c in COLUMNS},
            "stability_variance": st["variance"],
            "sometimes_right": st["sometimes_right"],
            "robustness": _greedy((robustness or {}).get(name)),
            "regression": {},
            "regression_delta": {},
            "regressed": [],
        }
        for set_name, by_model in regression.items():
            score, base = _greedy(by_model.get(name)), _greedy(by_model[baseline])
            row["regression"][set_name] = score
            delta = None if score is None else round(100 * (score - base), 4)
            row["regression_delta"][set_name] = delta
            if delta is not None and -delta > max_regression:
                row["regressed"].append(set_name)
        row["is_constant"] = False
        row["gain_vs_sft"] = None if name == baseline else _gain(main[baseline], r)
        row["gain_vs_constant"] = None if constant is None else _gain(constant, r)
        rows.append(row)
    if constant is not None:
        rows.append(_constant_row(constant))
    return rows


def _gain(before: Mapping, after: Mapping) -> dict | None:
    """Greedy pass@1 gain in points with its paired bootstrap interval; the point gain alone (no
    interval) when a result has no per-prompt scores."""
    from rlvrflow.training.report import gain_interval

    interval = gain_interval(dict(before), dict(after), "greedy")
    if interval is not None:
        return interval
    return {
        "points": round(100 * (float(after["pass_at_1_greedy"]) - float(before["pass_at_1_greedy"])), 2),
        "low": None,
        "high": None,
        "metric": "pass_at_1_greedy",
    }


def _constant_row(constant: Mapping) -> dict:
    missing = [c for c in ("pass_at_1_greedy", "constants") if c not in constant]
    if missing:
        raise ValueError(f"build_matrix: the constant baseline lacks {missing}; pass training.baseline's result")
    return {
        "name": CONSTANT,
        "is_baseline": False,
        "is_constant": True,
        "k": None,
        "n_prompts": constant.get("n_prompts"),
        **{c: _num(constant.get(c)) for c in COLUMNS},
        "stability_variance": 0.0,
        "sometimes_right": 0.0,
        "robustness": None,
        "regression": {},
        "regression_delta": {},
        "regressed": [],  # not a model: no regression sets
        "constants": dict(constant["constants"]),
        "gain_vs_sft": None,
        "gain_vs_constant": None,
    }


def _num(x) -> float | None:
    return None if x is None else float(x)


def _greedy(result: Mapping | None) -> float | None:
    return None if result is None else float(result["pass_at_1_greedy"])


@dataclass(frozen=True)
class BestChoice:
    """Which model is best and why: typed, so the report, its warnings and the doctor read fields.

    best: the chosen model's name (the SFT baseline when no checkpoint qualifies). beats_sft /
    beats_constant: the checkpoints that beat each, on `metric` (the constant: also with the interval's
    lower end above zero where one exists). no_gain: no checkpoint beat both, so nothing trained is
    best. warning: what a person should know when no_gain holds (None otherwise)."""

    best: str
    baseline: str
    metric: str
    beats_sft: list[str] = field(default_factory=list)
    beats_constant: list[str] | None = None
    regressed: list[str] = field(default_factory=list)
    no_gain: bool = False
    warning: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def decide_best(rows: Sequence[Mapping], max_regression: float = 2.0, metric: str = "pass_at_1_greedy") -> BestChoice:
    """The best model: the highest `metric` among checkpoints that lost at most `max_regression` points
    on every regression set, beat the baseline strictly and, when the matrix has a `constant` row,
    beat that too (see the module docstring); the latest wins ties, as in
    training.checkpoint.best_checkpoint. The baseline when none qualifies."""
    base = next((r for r in rows if r["is_baseline"]), None)
    if base is None:
        raise ValueError("choose_best: no baseline row; build the rows with build_matrix")
    const = next((r for r in rows if r.get("is_constant")), None)
    ckpts = [r for r in rows if not r["is_baseline"] and not r.get("is_constant")]
    regressed = [
        r["name"] for r in ckpts if any(d is not None and -d > max_regression for d in r["regression_delta"].values())
    ]
    beats_sft = [r["name"] for r in ckpts if r[metric] > base[metric]]
    beats_const = None if const is None else [r["name"] for r in ckpts if _beats_constant(r, const, metric)]
    better = [
        r
        for r in ckpts
        if r["name"] in beats_sft and r["name"] not in regressed and (beats_const is None or r["name"] in beats_const)
    ]
    if better:
        top = max(r[metric] for r in better)
        return BestChoice(
            [r for r in better if r[metric] == top][-1]["name"], base["name"], metric, beats_sft, beats_const, regressed
        )
    warning = None
    if ckpts:
        warning = _no_gain_warning(base, const, ckpts, beats_sft, beats_const, regressed, metric)
    return BestChoice(base["name"], base["name"], metric, beats_sft, beats_const, regressed, bool(ckpts), warning)


def choose_best(rows: Sequence[Mapping], max_regression: float = 2.0, metric: str = "pass_at_1_greedy") -> str:
    """The name `decide_best` chooses."""
    return decide_best(rows, max_regression, metric).best


def _beats_constant(row: Mapping, const: Mapping, metric: str) -> bool:
    """Above the constant on `metric`; and, when the constant answer scores at all, with the greedy
    gain's interval above 0: a policy that collapsed to a skewed gold is at the constant's level
    and only noise lifts it above. A constant that scores nothing explains no gain, so the bar is
    then the same as against SFT (the point estimate)."""
    if row[metric] <= const[metric]:
        return False
    gain = row.get("gain_vs_constant")
    if const.get("pass_at_1_greedy") == 0 or gain is None or gain.get("low") is None:
        return True
    return gain["low"] > 0


def _no_gain_warning(
    base: Mapping,
    const: Mapping | None,
    ckpts: list,
    beats_sft: list[str],
    beats_const: list[str] | None,
    regressed: list[str],
    metric: str,
) -> str:
    name = base["name"]
    parts = [
        f"no checkpoint beat both {name} and the constant baseline"
        if const is not None
        else f"no checkpoint beat {name}",
        f"on {metric}; none is best, keep {name}",
    ]
    lines = [" ".join(parts)]
    if const is not None:
        shown = ", ".join(f"{c}: {a!r}" for c, a in list(const["constants"].items())[:4])
        lines.append(
            f"the constant baseline (one answer per category from the training golds: {shown}) scores "
            f"{100 * const[metric]:.1f}; {name} scores {100 * base[metric]:.1f}"
        )
        explained = [r for r in ckpts if r["name"] in beats_sft and r["name"] not in (beats_const or [])]
        for r in explained[-3:]:
            g, c = r.get("gain_vs_sft") or {}, r.get("gain_vs_constant") or {}
            lines.append(
                f"{r['name']} gains {g.get('points', 0):+.1f} points over {name} but "
                f"{c.get('points', 0):+.1f} over the constant"
                + (f" (interval {c['low']:+.1f} to {c['high']:+.1f})" if c.get("low") is not None else "")
                + (
                    ": a constant answer explains that gain; check whether the policy collapsed to one answer"
                    if c.get("points", 0) <= 0
                    else ": not clear of the constant answer's level; more held-out prompts would tell"
                )
            )
    if regressed:
        lines.append(f"lost more than max_regression on a regression set: {', '.join(regressed)}")
    return "; ".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def format_matrix(rows: Sequence[Mapping]) -> str:
    """A fixed-width text table (percentages; length in tokens); `!` marks a regressed set."""
    sets = list(rows[0]["regression"]) if rows else []
    head = [
        "model",
        "p@1 greedy",
        "p@1 samp",
        f"pass@{rows[0]['k'] if rows else 'k'}",
        "format",
        "len mean/p90",
        "var",
        "sometimes",
        "robust",
    ] + sets
    table = [head]
    for r in rows:
        length = "-" if r["length_mean"] is None else f"{r['length_mean']:.1f}/{r['length_p90']:.0f}"
        cells = [
            r["name"],
            _pct(r["pass_at_1_greedy"]),
            _pct(r["pass_at_1_sampled"]),
            _pct(r["pass_at_k"]),
            _pct(r["format_rate"]),
            length,
            f"{r['stability_variance']:.3f}",
            _pct(r["sometimes_right"]),
            _pct(r["robustness"]),
        ]
        for s in sets:
            d = r["regression_delta"].get(s)
            mark = "!" if s in r["regressed"] else ""
            cells.append(_pct(r["regression"].get(s)) + ("" if r["is_baseline"] or d is None else f" ({d:+.1f}){mark}"))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in table
    ]
    flagged = [
        f"{r['name']} lost more than the allowed points on {', '.join(r['regressed'])}" for r in rows if r["regressed"]
    ]
    notes = [
        f"constant: one answer per category, picked on the training golds ({_constants(r)})"
        for r in rows
        if r.get("is_constant")
    ]
    return "\n".join(lines + [f"! {f}" for f in flagged] + notes)


def _constants(row: Mapping) -> str:
    items = list(row["constants"].items())
    return ", ".join(f"{c}: {a!r}" for c, a in items[:6]) + (f", {len(items) - 6} more" if len(items) > 6 else "")
