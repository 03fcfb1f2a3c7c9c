"""What a spec's data implies before anything trains: `rlvrflow spec-check` prints these notices, and
the retrain flow logs them as its first warnings and puts them in report.json's `warnings`.

    for n in preflight(spec): print(n.kind, n.message)

Two checks on the rows as logged (ingested, not yet cleaned or deduplicated), and two on the spec:
- no worked rows: no row has a `solution`, so SFT will be skipped; the choices and what each costs;
- prompts longer than the model's positions: the template's prompt plus the longest completion cap
  (the embedded models read one token a character, plus BOS; a local model's own tokenizer counts);
- settings the chosen model ignores: `training.tiny` with `embedded-base` or a local model;
- a 16-bit `training.dtype` on a CPU that emulates it: a matmul timed in that dtype against float32
  on this machine (training/precision.py), a notice when it is over SLOW_HALF_PRECISION times slower.
It reads the sources whole (the ingest step only: no cleaning, no validation); a source that matches
no file yet is a notice, not an error, since spec-check also runs before the logs are generated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlvrflow.flows.spec import DomainSpec
from rlvrflow.training.config import TINY_BASE_DIMS, TinyModelConfig

LONGEST_SHOWN = 3  # the longest prompts named in the notice
# a 16-bit dtype this many times slower than float32 in a CPU matmul: the CPU has no native instructions
# for it (where it has them, bfloat16 measured 1.5x faster than float32 in the GRPO update)
SLOW_HALF_PRECISION = 2.0
NATIVE = {"bfloat16": "AVX512-BF16 or AMX-BF16", "float16": "AVX512-FP16 or AMX-FP16"}  # the instructions each needs


@dataclass(frozen=True)
class Notice:
    """One thing the data or the spec implies: `kind` (a slug) and the message with the numbers and the fix.
    `warn`: the run repeats it as a warning (report.json); a note for spec-check's reader only is False."""

    kind: str
    message: str
    warn: bool = True


def preflight(spec: DomainSpec) -> list[Notice]:
    """Every notice for `spec` (see the module docstring); empty when there is nothing to say."""
    notices = ignored_settings(spec) + slow_half_precision(spec)
    rows = _logged_rows(spec)
    if isinstance(rows, str):
        return notices + [Notice("data_unread", f"the data checks (worked rows, prompt lengths) were skipped: {rows}")]
    if not rows:
        return notices
    return no_worked_rows(spec, rows) + too_long(spec, rows) + notices


def _logged_rows(spec: DomainSpec) -> list[dict] | str:
    """The ingested rows (id, question, category, solution), or why they could not be read (a source
    that matches no file yet, a file that does not parse: `rlvrflow clean` reports those in full)."""
    from rlvrflow.cleaning.ingest import IngestError, ingest

    try:
        return (
            ingest(spec.sources, spec.domain, spec.base_dir)
            .kept.select("id", "question", "category", "solution")
            .to_dicts()
        )
    except IngestError as exc:
        return str(exc)


def no_worked_rows(spec: DomainSpec, rows: list[dict]) -> list[Notice]:
    """No row carries a worked solution: SFT has nothing to learn from."""
    from rlvrflow.training.sft import NO_WORKED_ROWS_CHOICES

    if any(r.get("solution") and str(r["solution"]).strip() for r in rows):
        return []
    if spec.verifiers.answer_only_targets:
        return [
            Notice(
                "no_worked_rows",
                f"none of the {len(rows)} rows has a worked solution; "
                "verifiers.answer_only_targets is on, so SFT trains on `Answer: <gold>` targets built from "
                "the golds: the answer format, not the working",
            )
        ]
    return [
        Notice(
            "no_worked_rows",
            f"none of the {len(rows)} rows has a worked solution (outcome-only logs), so "
            f"SFT will be skipped and GRPO starts from the base model. Choices: {NO_WORKED_ROWS_CHOICES}",
        )
    ]


def model_positions(spec: DomainSpec) -> tuple[int | None, str]:
    """The chosen model's max positions and where that figure comes from."""
    t = spec.training
    if t.model == "embedded":
        return t.tiny.max_positions, "training.tiny.max_positions"
    if t.model == "embedded-base":
        from rlvrflow.training.tiny_base import BASE_DIR

        path = BASE_DIR / "config.json"
    else:
        path = Path(t.model) / "config.json"
    if not path.is_file():
        return None, str(path)
    return json.loads(path.read_text()).get("max_position_embeddings"), f"{t.model}'s config.json"


def _token_counter(spec: DomainSpec):
    """Tokens of a prompt: for the embedded models one a character plus BOS (their tokenizer is
    character-level), else the local model's own tokenizer."""
    if spec.training.is_embedded:
        return lambda text: len(text) + 1
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec.training.model)
    return lambda text: len(tok(text, add_special_tokens=True)["input_ids"])


def too_long(spec: DomainSpec, rows: list[dict]) -> list[Notice]:
    """Prompts that, with the completion budget, run past the model's positions."""
    from rlvrflow.cleaning.template import render_prompt

    positions, where = model_positions(spec)
    if not positions:
        return []
    budget = spec.generation.max_new_tokens  # the cap of tiering, GRPO and eval alike
    count = _token_counter(spec)
    sized = sorted(
        ((count(render_prompt(str(r["question"]), str(r["category"]), spec.cleaning.template)), r) for r in rows),
        key=lambda x: -x[0],
    )
    over = [(n, r) for n, r in sized if n + budget > positions]
    if not over:
        return []
    shown = ", ".join(f"{r['id']} ({r['category']}, {n} tokens)" for n, r in over[:LONGEST_SHOWN])
    cats = sorted({str(r["category"]) for _, r in over})
    return [
        Notice(
            "prompts_too_long",
            (
                f"{len(over)} of {len(rows)} prompts (categories {', '.join(cats)}) are longer than the model's {positions} "
                f"positions ({where}) less the {budget} new tokens a completion may take; the longest: {shown}. The model "
                "never saw positions that far and answers those prompts with noise, and SFT cuts their start. Fix: shorten "
                "them (cleaning.template, or validation.max_prompt_chars to drop them), or use a model with more positions"
            ),
        )
    ]


def slow_half_precision(spec: DomainSpec) -> list[Notice]:
    """`training.dtype` bfloat16 or float16 on a CPU that emulates it: every stage would run that much slower."""
    from rlvrflow.training.modeling import pick_device
    from rlvrflow.training.precision import cpu_matmul_slowdown

    t = spec.training
    if t.dtype not in ("bfloat16", "float16") or t.device == "cuda" or pick_device(t.device).type != "cpu":
        return []
    slower = cpu_matmul_slowdown(t.dtype)
    if slower < SLOW_HALF_PRECISION:
        return []
    return [
        Notice(
            "slow_half_precision",
            f"training.dtype: {t.dtype} on this CPU: a {t.dtype} matmul took {slower:.0f}x as long as a float32 one "
            "(measured here), so the CPU has no native instructions for it and SFT, tiering, GRPO and eval would "
            f"run several times slower. Fix: training.dtype: float32 (or auto, float32 on a CPU); {t.dtype} pays "
            f"on GPUs and on CPUs with {NATIVE[t.dtype]}",
        )
    ]


def ignored_settings(spec: DomainSpec) -> list[Notice]:
    """Spec settings the chosen model does not read: `training.tiny` (which spec-check prints with its
    defaults whatever the model) builds only `training.model: embedded`."""
    t = spec.training
    if t.model == "embedded":
        return []
    if t.model == "embedded-base":
        d = TINY_BASE_DIMS
        own = (
            f"embedded-base has its own dimensions ({d.num_layers} layers, width {d.hidden_size}, "
            f"{d.max_positions} positions)"
        )
    else:
        own = f"{t.model} has its own dimensions (its config.json)"
    # dimensions left at a default are only a note on spec-check's printout; other ones were written for a
    # model that will not read them: a warning (compared by value: overrides re-validate the whole spec)
    written = t.tiny not in (TinyModelConfig(), TINY_BASE_DIMS)
    said = "set in the spec" if written else "spec-check prints it with its defaults"
    return [
        Notice(
            "ignored_setting",
            f"training.tiny ({said}) is not used: {own}; it applies only to training.model: embedded",
            warn=written,
        )
    ]
