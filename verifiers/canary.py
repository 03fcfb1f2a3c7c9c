"""Reward canaries: before any training, check that each rule's verifier rejects garbage.

A verifier that accepts one universal answer poisons every reward it gives: GRPO finds the answer
and makes it the policy's only output (`Answer: \\infty` once scored 1.0 against every math gold).
So at attach time every rule is probed: each canary response below (garbage, universal answers,
the verifier family's own hacks, the reference of a different row, the row's own prompt echoed,
and for keyword-like rules the prompt's format example and required keywords spammed: prompt_canaries.py)
is scored against a seeded sample of that rule's rows. A canary that scores on more than
`max_share` of the sampled rows fails the rule, and the run stops before SFT with a report naming
the rule, the canary and example rows. A single hit never stops the run (two rows may share an
answer); it is counted in the report and the attach stats.

Which lists a rule gets: GARBAGE always, plus its family's list (FAMILY by verifier name), plus,
for any verifier module (a user plugin too), what the module itself declares next to its verifier
function: `CANARIES = [...]` (responses) or `def canaries(reference, params) -> list[str]`.
A module may also set `CANARY_SAMPLE_ROWS` (the code verifier runs every canary in its sandbox,
so it probes fewer rows). Rules with an `environment` are skipped here: their rows are episodes, and
episode_canary.probe_environments runs scripted policies against them instead.
"""

from __future__ import annotations

import json
import random
import sys

from .config import CanaryConfig
from .prompt_canaries import PROMPT_CANARY_FIX, PROMPT_CANARY_NAMES, prompt_canaries
from .registry import get_verifier

MIN_HITS = 2  # one hit in a sample can be a coincidence (two rows whose answers agree); it is reported, not fatal

# Must score 0 under every verifier: nothing, noise, universal values, format without content.
GARBAGE: list[tuple[str, str]] = [
    ("empty", ""),
    ("whitespace", "   \n\t  "),
    ("newlines", "\n\n\n"),
    ("infinity", "Answer: \\infty"),
    ("boxed infinity", "\\boxed{\\infty}"),
    ("minus infinity", "Answer: -\\infty"),
    ("sympy infinity", "Answer: oo"),
    ("inf", "Answer: inf"),
    ("unicode infinity", "答案是∞"),
    ("Infinity", "The answer is Infinity."),
    ("nan", "Answer: nan"),
    ("NaN boxed", "\\boxed{\\text{NaN}}"),
    ("overflow literal", "Answer: 1e999"),
    ("overflow cjk", "答案是1e400"),
    ("power of ten", "Answer: 10^{1000}"),
    ("power of two", "Answer: 2^{10000}"),
    ("overflow product", "Answer: 1e308*10"),
    ("long integer", "Answer: " + "9" * 400),
    ("zero over zero", "Answer: 0/0"),
    ("one over zero", "\\boxed{\\frac{1}{0}}"),
    ("yes", "Yes"),
    ("true", "True"),
    ("answer yes", "Answer: yes"),
    ("answer true", "Answer: True"),
    ("none", "None"),
    ("null", "null"),
    ("empty boxed", "\\boxed{}"),
    ("empty answer", "Answer:"),
    ("empty text", "\\boxed{\\text{}}"),
    ("text answer", "Answer: \\text{the answer}"),
    ("number spam", " ".join(str(i) for i in range(200))),
    ("answer list spam", "Answer: " + ", ".join(str(i) for i in range(100))),
    ("marker spam", " ".join(f"Answer: {i}" for i in range(20))),
    ("huge latex", "\\boxed{" + "x+" * 5000 + "x}"),
    ("nested braces", "\\boxed{" + "{" * 2000 + "}" * 2000 + "}"),
    ("long garbage", "lorem " * 5000),
    ("binary noise", "\x00\x01\x02\xff" * 100),
    ("empty json", "{}"),
    ("empty list", "[]"),
    ("json null", "```json\nnull\n```"),
    ("i don't know", "I don't know."),
    ("refusal", "I cannot help with that."),
]

FAMILY: dict[str, list[tuple[str, str]]] = {
    "math": [(f"option {c}", f"Answer: {c}") for c in "ABCDEFGH"]
    + [
        ("every letter", "Answer: A B C D"),
        ("hedge boxed", "\\boxed{0} \\boxed{1}"),
        ("empty set", "Answer: \\emptyset"),
        ("all reals", "Answer: \\mathbb{R}"),
        ("whole line", "Answer: (-\\infty, \\infty)"),
        ("variable", "Answer: x"),
        ("zero", "Answer: 0 or 1 or 2 or 3"),
        ("percent hedge", "Answer: 50% or 0.5 or 50"),
    ],
    "choice": [
        ("every letter", "Answer: A B C D E F G H"),
        ("letters run", "Answer: ABCD"),
        ("letter or letter", "Answer: A or B"),
        ("all of the above", "Answer: all of the above"),
        ("every paren", "(A) (B) (C) (D)"),
        ("letter list", "A, B, C, D"),
    ],
    "keyword": [
        ("keyword stuffing", " ".join(["refund return policy order shipping price total"] * 200)),
        ("bare url", "https://"),
        ("placeholder link", "Please see [link] for details."),
        ("generic reply", "Thank you for contacting us. We will get back to you soon."),
    ],
    "regex": [("regex stuffing", ".*" * 50)],
    "json": [
        ("json true", "true"),
        ("json zero", "0"),
        ("json string", '"ok"'),
        ("fenced empty", "```json\n{}\n```"),
        ("two blocks", '```json\n{"a": 1}\n```\n```json\n{"a": 2}\n```'),
    ],
    "sql": [
        ("select 1", "```sql\nSELECT 1\n```"),
        ("select null", "```sql\nSELECT NULL\n```"),
        ("schema dump", "```sql\nSELECT * FROM sqlite_master\n```"),
        ("empty sql", "```sql\n\n```"),
        ("two statements", "```sql\nSELECT 1; SELECT 2\n```"),
    ],
    "code": [
        ("exit zero", "```python\nimport sys\nsys.exit(0)\n```"),
        ("os exit", "```python\nimport os\nos._exit(0)\n```"),
        ("print passed", "```python\nprint('PASSED')\nprint('OK')\n```"),
        ("pass only", "```python\npass\n```"),
        ("raise systemexit", "```python\nraise SystemExit(0)\n```"),
        ("any function", "```python\ndef __getattr__(name):\n    return lambda *a, **k: None\n```"),
    ],
    "function_call": [
        ("empty call", '{"name": "", "arguments": {}}'),
        ("tool call tags", "<tool_call>{}</tool_call>"),
        ("call list", "[]"),
        ("null call", '{"name": null}'),
    ],
    # a robustness row is right only when the response asks for what is missing: a confident number, a
    # generic refusal and a generic request for "more details" must all score 0 (refusal.canaries adds
    # the row's own missing item next to a number)
    "refusal": [
        ("confident number", "Answer: 42"),
        ("bare amount", "$42.00"),
        ("stated total", "The total is $42."),
        ("generic refusal", "I'm sorry, I can't help with that."),
        ("generic ask", "Could you provide more details?"),
        ("ask then answer", "Could you confirm? Answer: 42"),
        ("boxed after ask", "Please let me know. \\boxed{42}"),
        ("hedged guess", "Some information is missing, but it's probably 42."),
        ("chinese refusal", "抱歉，我无法回答。"),
        ("chinese total", "请确认一下，合计42元。"),
        ("phrase stuffing", " ".join(["could you please provide confirm clarify which one missing"] * 20)),
    ],
    # `working` knows no gold: true arithmetic unrelated to the row scores 1.0, so a rule that uses it as
    # the row's verifier must stop here (it belongs in reward.process_verifier, beside the outcome)
    "working": [("pointless arithmetic", "1+1=2\nAnswer: 2"), ("calculator note", "<<2*3=6>>6")],
}


def battery(verifier: str, params: dict, reference: str) -> list[tuple[str, str]]:
    """(name, response) pairs for one rule and one of its references."""
    out = list(GARBAGE) + list(FAMILY.get(verifier, []))
    module = _module_of(verifier)
    if module is not None:
        declared = getattr(module, "CANARIES", None)
        if declared and module.__name__.split(".")[0] != "verifiers":
            out += [(f"plugin canary {i}", str(r)) for i, r in enumerate(declared)]
        hook = getattr(module, "canaries", None)
        if callable(hook):
            out += [(f"plugin canary for this row {i}", str(r)) for i, r in enumerate(hook(reference, params) or [])]
    return out


def _module_of(verifier: str):
    fn = get_verifier(verifier)
    return sys.modules.get(getattr(fn, "__module__", ""), None)


def sample_size(verifier: str, default: int) -> int:
    module = _module_of(verifier)
    return int(getattr(module, "CANARY_SAMPLE_ROWS", default) or default)


def probe(
    rows: list[dict], rules: list, cfg: CanaryConfig, workers: int | None = None, timeout_s: float = 30.0
) -> dict:
    """Score every canary against a seeded sample of each rule's rows (dicts with `id`,
    `category`, `prompt`, `reference`, `verifier`, `verifier_params`); the report says which
    canaries scored on more than cfg.max_share of a rule's sample. report["ok"] is False then."""
    from .pool import score_many

    report = {"max_share": cfg.max_share, "rules": [], "ok": True, "failed": []}
    for rule in rules:
        mine = [r for r in rows if r.get("category") == rule.category]
        if not mine or getattr(rule, "environment", None) is not None:  # episodes: episode_canary.probe_environments
            continue
        rng = random.Random(f"{cfg.seed}:{rule.category}")
        sample = sorted(mine, key=lambda r: str(r.get("id")))
        rng.shuffle(sample)
        sample = sample[: sample_size(rule.verifier, cfg.sample_rows)]
        items, keys = [], []
        for i, row in enumerate(sample):
            params = json.loads(row.get("verifier_params") or "{}")
            reference = str(row.get("reference") or "")
            pairs = battery(rule.verifier, params, reference)
            pairs.append(("the row's own prompt", str(row.get("prompt") or "")))
            pairs += prompt_canaries(rule.verifier, params, reference, str(row.get("prompt") or ""))
            other = _other_reference(sample, i, reference)
            if other is not None:
                pairs.append(("another row's reference", other))
            for name, response in pairs:
                items.append((rule.verifier, response, reference, params))
                keys.append((name, response, row))
        verdicts = score_many(items, workers=workers, timeout_s=timeout_s)
        hits: dict[str, list] = {}
        counts: dict[str, int] = {}
        for (name, response, row), v in zip(keys, verdicts):
            counts[name] = counts.get(name, 0) + 1
            if v.score > 0:
                hits.setdefault(name, []).append((response, row, v))
        failed = []
        for name, found in sorted(hits.items()):
            share = len(found) / counts[name]
            if share > cfg.max_share and len(found) >= MIN_HITS:
                failed.append(
                    {
                        "canary": name,
                        "response": _clip(found[0][0]),
                        "hits": len(found),
                        "rows": counts[name],
                        "share": round(share, 4),
                        "examples": [
                            {
                                "id": str(r.get("id")),
                                "reference": _clip(str(r.get("reference"))),
                                "detail": _clip(v.detail),
                            }
                            for _, r, v in found[:3]
                        ],
                    }
                )
        entry = {
            "category": rule.category,
            "verifier": rule.verifier,
            "rows_probed": len(sample),
            "canaries": len(counts),
            "verdicts": len(items),
            "scored": {k: len(v) for k, v in sorted(hits.items())},
            "failed": failed,
        }
        report["rules"].append(entry)
        if failed:
            report["ok"] = False
            report["failed"] += [{"category": rule.category, "verifier": rule.verifier, **f} for f in failed]
    return report


def _other_reference(sample: list[dict], i: int, reference: str) -> str | None:
    """The next sampled row's reference that is written differently from this row's."""
    for j in range(1, len(sample)):
        other = str(sample[(i + j) % len(sample)].get("reference") or "")
        if other.strip() and other.strip() != reference.strip():
            return other
    return None


def _clip(text: str, limit: int = 160) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"...[{len(text) - limit} more chars]"


def summary(report: dict) -> str:
    """One paragraph a person can act on."""
    if report["ok"]:
        n = sum(r["verdicts"] for r in report["rules"])
        return (
            f"reward canaries: {n} canary verdicts over {len(report['rules'])} rules, none scored above "
            f"{report['max_share']:.0%} of a rule's rows"
        )
    lines = [
        f"reward canaries FAILED: a verifier accepts garbage, so training on its reward would teach the "
        f"model that answer (max_share {report['max_share']:.0%}):"
    ]
    for f in report["failed"][:10]:
        ex = f["examples"][0] if f["examples"] else {}
        lines.append(
            f"  rule {f['category']!r} ({f['verifier']}): canary {f['canary']!r} = {f['response']!r} "
            f"scored on {f['hits']}/{f['rows']} rows ({f['share']:.1%}), e.g. row {ex.get('id')!r} "
            f"reference {ex.get('reference')!r}"
        )
    lines.append(
        "  fix the verifier (or its params) so these score 0; raise verifiers.canaries.max_share only "
        "if the canary is really a right answer for those rows"
    )
    if any(f["canary"] in PROMPT_CANARY_NAMES for f in report["failed"]):
        lines.append(f"  {PROMPT_CANARY_FIX}")
    return "\n".join(lines)


# --- Prior canaries: the data's own most frequent golds as constant answers -----------------------
# A verifier can be sound and the reward still teach one answer: when a third of a rule's golds are
# `2`, a policy that always writes `Answer: 2` earns reward on a third of the rows (GRPO from a base
# with no SFT collapsed to exactly that). No garbage canary sees it, so each rule is also probed with
# its most frequent golds, written the way a model writes an answer.


def render_constant(verifier: str, reference: str) -> str:
    """A constant answer built from one gold, as a model would write it: the verifier module's
    `solution_from_reference` (math: `Answer: 2`, choice: `Answer: B`, sql: the query in a fence).
    "" for a verifier whose reference is a rubric, not an answer (keyword, regex, json, code: no such
    hook): a constant reply that meets a category-wide rubric is the rule working, and the other
    canaries (another row's reference, stuffing) probe those."""
    build = getattr(_module_of(verifier), "solution_from_reference", None)
    return str((build(reference, "") if callable(build) else "") or "")


def top_golds(references: list[str], k: int) -> list[tuple[str, int]]:
    """The k most frequent non-empty references with their counts (ties by text, so runs agree)."""
    counts: dict[str, int] = {}
    for ref in references:
        ref = str(ref or "").strip()
        if ref:
            counts[ref] = counts.get(ref, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def prior_probe(
    rows: list[dict], rules: list, cfg: CanaryConfig, workers: int | None = None, timeout_s: float = 30.0
) -> list[dict]:
    """Each rule's `cfg.prior_golds` most frequent golds (over all its rows) as constant answers,
    scored on the rule's seeded canary sample. One entry per constant that scored on more than
    cfg.max_share of the sample (and on MIN_HITS rows): {category, verifier, constant, response,
    hits, rows, share, stop}; stop is True above cfg.max_prior_share."""
    from .pool import score_many

    found = []
    for rule in rules:
        mine = [r for r in rows if r.get("category") == rule.category]
        if not mine or cfg.prior_golds == 0 or getattr(rule, "environment", None) is not None:
            continue
        rng = random.Random(f"{cfg.seed}:{rule.category}")
        sample = sorted(mine, key=lambda r: str(r.get("id")))
        rng.shuffle(sample)
        sample = sample[: sample_size(rule.verifier, cfg.sample_rows)]
        constants = [
            (gold, render_constant(rule.verifier, gold))
            for gold, _ in top_golds([str(r.get("reference") or "") for r in mine], cfg.prior_golds)
        ]
        constants = [(gold, response) for gold, response in constants if response.strip()]
        items = [
            (rule.verifier, response, str(row.get("reference") or ""), json.loads(row.get("verifier_params") or "{}"))
            for _, response in constants
            for row in sample
        ]
        verdicts = score_many(items, workers=workers, timeout_s=timeout_s)
        for j, (gold, response) in enumerate(constants):
            hits = sum(v.score > 0 for v in verdicts[j * len(sample) : (j + 1) * len(sample)])
            share = hits / len(sample)
            if share > cfg.max_share and hits >= MIN_HITS:
                found.append(
                    {
                        "category": rule.category,
                        "verifier": rule.verifier,
                        "constant": _clip(gold),
                        "response": _clip(response),
                        "hits": hits,
                        "rows": len(sample),
                        "share": round(share, 4),
                        "stop": share > cfg.max_prior_share,
                    }
                )
    return found


def prior_summary(priors: list[dict], max_prior_share: float) -> str:
    """The skewed priors in one line (each rule's highest-scoring constant), then one line per
    constant over the bound with the fix."""
    if not priors:
        return "prior canaries: no constant gold answer scored above the canary threshold"
    top: dict[str, dict] = {}
    for p in priors:
        if p["category"] not in top or p["share"] > top[p["category"]]["share"]:
            top[p["category"]] = p
    lines = [
        "skewed prior (a constant answer earns reward; the eval's constant baseline shows what it is worth): "
        + "; ".join(
            f"rule {c!r} ({p['verifier']}): {p['response']!r} right on {p['hits']}/{p['rows']} rows ({p['share']:.1%})"
            for c, p in top.items()
        )
    ]
    for p in priors:
        if p["stop"]:
            lines.append(
                f"  rule {p['category']!r}: {p['response']!r} is right on {p['share']:.1%} of its rows, over "
                f"verifiers.canaries.max_prior_share={max_prior_share:.0%}: GRPO would learn to answer it to "
                "everything"
            )
    if any(p["stop"] for p in priors):
        lines.append(
            "  fix: balance or split the category so no single answer covers that share of its rows, or "
            "raise verifiers.canaries.max_prior_share if that constant really is acceptable"
        )
    return "\n".join(lines)
