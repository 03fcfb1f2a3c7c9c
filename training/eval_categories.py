"""The eval matrix by category: every category of the held-out split, single-reply and episode alike,
with each model's greedy pass@1 and its gain over SFT with a paired bootstrap interval.

    rows = category_rows({"sft": sft_result, "step_000040": ckpt_result})
    print(format_categories(rows, ["sft", "step_000040"], final="step_000040"))

A model's result is what the evaluate stage writes (<name>.json): training.eval's result, whose
`by_prompt` carries each prompt's category, and, when the split holds rows of an environment's
category, `episodes` (training.eval_episodes: one greedy episode per prompt, success when the end
state matched). A category is a row even when every model fails all its prompts (0.0, never left out).

How episodes count (EPISODES_COUNTED, also in report.json as `headline_scope`): apart. The headline
(pass@1 greedy and sampled, pass@k, format rate, the gain over SFT and the best-model choice) is over
the single-reply prompts only; episodes have one greedy episode per prompt (no sampled pass@1, no
pass@k), so pooling them would mix two measures in one number. Their success, its gain and interval
are reported beside it: per category here, and as a whole under report.json's `episodes`.
"""

from __future__ import annotations

from typing import Mapping

BASELINE = "sft"
EPISODES_COUNTED = (
    "apart: the headline metrics, the gain over SFT and the best-model choice are over the single-reply "
    "prompts; episode categories (one greedy episode per prompt, success when the end state matched) are "
    "reported beside them under `episodes` and, per category, in `per_category`"
)


def _subset(result: Mapping, category: str) -> dict | None:
    """`result` cut to one category's prompts, as training.report.gain_interval reads it."""
    bp = result.get("by_prompt") or {}
    if not bp.get("categories"):
        return None
    keep = [i for i, c in enumerate(bp["categories"]) if c == category]
    return {"by_prompt": {"ids": [bp["ids"][i] for i in keep], "greedy": [bp["greedy"][i] for i in keep]}}


def _kinds(result: Mapping) -> list[tuple[str, Mapping]]:
    parts = [("reply", result)]
    if result.get("episodes"):
        parts.append(("episode", result["episodes"]))
    return parts


def category_rows(results: Mapping[str, Mapping], baseline: str = BASELINE) -> list[dict]:
    """One row per (kind, category), replies first: {category, kind, n, pass_at_1_greedy: {model:
    share}, gain_vs_sft: {model: gain_interval or None}} (the baseline has no gain)."""
    from rlvrflow.training.report import gain_interval

    if baseline not in results:
        raise ValueError(f"category_rows: no result named {baseline!r} among {sorted(results)}")
    seen: dict[tuple[str, str], int] = {}
    for result in results.values():
        for kind, part in _kinds(result):
            for cat, d in (part.get("per_category") or {}).items():
                seen[(kind, cat)] = max(seen.get((kind, cat), 0), int(d["n"]))
    rows = []
    for (kind, cat), n in sorted(seen.items(), key=lambda kc: (kc[0][0] != "reply", kc[0][1])):
        parts = {name: dict(_kinds(r)).get(kind) for name, r in results.items()}
        score = {
            name: float(p["per_category"][cat]["pass_at_1_greedy"])
            for name, p in parts.items()
            if p and cat in (p.get("per_category") or {})
        }
        base = parts.get(baseline)
        gains = {}
        for name, p in parts.items():
            if name == baseline or name not in score:
                continue
            a, b = (_subset(base, cat) if base else None), _subset(p, cat)
            gains[name] = gain_interval(a, b, "greedy") if a and b else None
        rows.append({"category": cat, "kind": kind, "n": n, "pass_at_1_greedy": score, "gain_vs_sft": gains})
    return rows


def episodes_summary(results: Mapping[str, Mapping], final: str, baseline: str = BASELINE) -> dict | None:
    """report.json's `episodes`: the baseline's and the final model's episode figures (by_prompt left
    out) and the paired gain over all episode prompts; None when the split has no episode rows."""
    from rlvrflow.training.report import gain_interval

    base, last = (results.get(baseline) or {}).get("episodes"), (results.get(final) or {}).get("episodes")
    if not base and not last:
        return None

    def figures(part: Mapping | None) -> dict | None:
        return None if not part else {k: v for k, v in part.items() if k != "by_prompt"}

    gain = gain_interval(dict(base), dict(last), "greedy") if base and last and final != baseline else None
    return {"baseline": figures(base), "final": figures(last), "gain": gain}


def per_category_report(rows: list[dict], final: str, baseline: str = BASELINE) -> dict:
    """report.json's `per_category`: {category: {kind, n, baseline, final, gain}} for the final model."""
    return {
        row["category"]: {
            "kind": row["kind"],
            "n": row["n"],
            "baseline": row["pass_at_1_greedy"].get(baseline),
            "final": row["pass_at_1_greedy"].get(final),
            "gain": row["gain_vs_sft"].get(final),
        }
        for row in rows
    }


def format_categories(rows: list[dict], models: list[str], final: str) -> str:
    """A text table: a row per category (episode categories marked), greedy pass@1 per model in %, and
    the `final` model's gain over SFT with its interval (the report's final model, not always the last)."""
    if not rows:
        return ""
    last = final if final != BASELINE else None  # SFT alone has no gain to show
    head = ["category", "n", *models] + ([f"{last} vs {BASELINE}"] if last else [])
    table = [head]
    for r in rows:
        g = r["gain_vs_sft"].get(last) if last else None
        gain = ["-" if g is None else f"{g['points']:+.1f} [{g['low']:+.1f}, {g['high']:+.1f}]"] if last else []
        scores = [
            "-" if r["pass_at_1_greedy"].get(m) is None else f"{100 * r['pass_at_1_greedy'][m]:.1f}" for m in models
        ]
        name = r["category"] + (" (episodes)" if r["kind"] == "episode" else "")
        table.append([name, str(r["n"]), *scores, *gain])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in table
    )
