"""Environment canaries: before training on episodes, check that the outcome check pays for the work.

An outcome check that reads nothing the episode changes, or pays an episode that writes more than
the ticket asks, poisons every reward it gives. So scripted policies that know nothing of the right
answer are run against a seeded sample of the environment's rows:

    no_action          a final reply at once ("Done."): on a row whose reference expects a change, a
                       pass means the database already holds the outcome or the query reads nothing
                       the episode touches; one such row stops the run
    call_every_tool    every tool called once in one message, arguments guessed from the prompt (its
                       numbers, its quoted text) and the schema (first enum value, default), then "Done."
    call_every_tool_twice  the same calls made twice: an outcome that does not count rows pays repeats

The guessing canaries stop the run when they pass on more than `max_share` of the sampled rows and on
at least two of them (a guess from the prompt can be right for a one-argument ticket such as "cancel
order 8"). A row whose reference is not a JSON array of rows is a data error, named with its index.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .environment import Environment, expected_rows
from .episode import run_episodes

MIN_HITS = 2
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"[\"'“‘「](.+?)[\"'”’」]")


@dataclass
class CanaryResult:
    canary: str
    rows: int
    passed: list[int] = field(default_factory=list)  # indices into the rows given

    @property
    def share(self) -> float:
        return len(self.passed) / self.rows if self.rows else 0.0


@dataclass
class EnvironmentCheck:
    results: list[CanaryResult]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def _guess(schema: dict, prompt: str):
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    numbers = _NUMBER.findall(prompt)
    kind = schema.get("type")
    if kind == "integer":
        return next((int(n) for n in numbers if "." not in n), 1)
    if kind == "number":
        return float(numbers[0]) if numbers else 1.0
    if kind == "boolean":
        return True
    if kind == "string":
        quoted = _QUOTED.search(prompt)
        return quoted.group(1) if quoted else (prompt.split() or ["x"])[0]
    return None


def guessed_calls(env: Environment, prompt: str) -> str:
    """One `<tool_call>` block per tool, arguments guessed from the prompt and the schema."""
    blocks = []
    for tool in env.tools:
        args = {}
        for name, schema in tool.parameters.get("properties", {}).items():
            value = _guess(schema if isinstance(schema, dict) else {}, prompt)
            if value is not None:
                args[name] = value
        blocks.append(f"<tool_call>\n{json.dumps({'name': tool.name, 'arguments': args})}\n</tool_call>")
    return "\n".join(blocks)


def _scripted(first: Callable[[str], str]) -> Callable[[list[list[dict]]], list[str]]:
    def policy(batch: list[list[dict]]) -> list[str]:
        out = []
        for messages in batch:
            prompt = next(m["content"] for m in messages if m["role"] == "user")
            acted = any(m["role"] == "assistant" for m in messages)
            out.append("Done." if acted else first(prompt))
        return out

    return policy


def check_environment(
    env: Environment, rows: Sequence[Mapping], max_share: float = 0.01, sample_rows: int = 50, seed: int = 0
) -> EnvironmentCheck:
    """Run the canaries on a seeded sample of `rows` (`prompt`, `reference`); problems say what stops."""
    problems = []
    for i, row in enumerate(rows):
        try:
            expected_rows(str(row["reference"]))
        except (KeyError, ValueError) as exc:
            problems.append(f"row {i}: reference unusable: {exc}")
    if problems:
        return EnvironmentCheck([], problems)
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(sample_rows, len(rows))))
    sample = [rows[i] for i in picked]
    canaries = {
        "no_action": lambda prompt: "Done.",
        "call_every_tool": lambda prompt: guessed_calls(env, prompt),
        "call_every_tool_twice": lambda prompt: guessed_calls(env, prompt) + "\n" + guessed_calls(env, prompt),
    }
    results = []
    for name, first in canaries.items():
        episodes = run_episodes(env, sample, _scripted(first))
        result = CanaryResult(name, len(sample), [picked[k] for k, ep in enumerate(episodes) if ep.verdict.correct])
        results.append(result)
        if name == "no_action":
            changes = [i for i in result.passed if expected_rows(str(rows[i]["reference"]))]
            if changes:
                problems.append(
                    f"no_action passes row(s) {changes[:5]} whose reference expects a change: the "
                    "database already holds the outcome, or outcome.query reads nothing the tools "
                    "change; narrow the query to what the episode writes"
                )
        elif len(result.passed) >= MIN_HITS and result.share > max_share:
            problems.append(
                f"{name} passes {len(result.passed)} of {result.rows} rows (e.g. row(s) "
                f"{result.passed[:5]}): outcome.query pays guesses; make it read every column the "
                "ticket fixes (the amount, not only the order) and every row the episode writes"
            )
    return EnvironmentCheck(results, problems)


def probe_environments(rows: Sequence[Mapping], rules: Sequence, cfg, base_dir) -> dict:
    """check_environment for every rule with an environment, on its category's rows (`cfg` is the
    spec's CanaryConfig: max_share, sample_rows, seed). The report: {"ok", "rules": [{category, rows,
    passed: {canary: rows passed}, problems}]}; "ok" is False when any rule has a problem."""
    report = {"ok": True, "rules": []}
    for rule in rules:
        mine = [r for r in rows if r.get("category") == rule.category]
        if rule.environment is None or not mine:
            continue
        check = check_environment(rule.resolved_environment(base_dir), mine, cfg.max_share, cfg.sample_rows, cfg.seed)
        report["rules"].append(
            {
                "category": rule.category,
                "rows": len(mine),
                "passed": {r.canary: len(r.passed) for r in check.results},
                "problems": check.problems,
            }
        )
        report["ok"] = report["ok"] and check.ok
    return report


def environment_summary(report: dict) -> str:
    """One line when every environment passed, else one line per problem naming its rule."""
    if report["ok"]:
        return (
            f"environment canaries: {len(report['rules'])} environment(s), no scripted policy "
            "(no action, every tool, every tool twice) reached an expected end state where it must not"
        )
    lines = [
        "environment canaries stop the run: a scripted policy that knows nothing of the answer earns the outcome reward"
    ]
    for entry in report["rules"]:
        lines += [f"  rule {entry['category']!r} (verifiers.rules[].environment): {p}" for p in entry["problems"]]
    return "\n".join(lines)
