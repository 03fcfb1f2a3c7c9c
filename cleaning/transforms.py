"""The pure, idempotent text transformations: one value at a time, or a whole frame vectorized.

`clean_value(text, field, category, cfg)` is the reference: plain Python, one string, ftfy on
every value. `clean_frame(df, cfg)` does the same to the `question`, `reference` and `solution`
columns of a polars frame: the regex rules run in polars (Rust, all cores) and only on rows one of
their patterns matches, and the two steps that need Python (ftfy, and full-width conversion inside
spans of the question) run only on the rows a vectorized `str.contains` flags (the fast path for
clean text). Both give the same output (tests and bench/clean_throughput.py check it), and
applying either twice changes nothing more.

Fields of a `verbatim_categories` row's reference and solution (gold SQL, JSON tests) get only
the encoding, control-character and line-break fixes.

    clean_value("Ｗｈａｔ is １＋１？<|im_end|>", "question", "arithmetic", CleaningConfig())
    -> 'Ｗｈａｔ is 1+1？'
"""

from __future__ import annotations

import ftfy
import polars as pl

from .config import CleaningConfig
from .rules import (
    ANSWER_LATEX_RULES,
    CONTROL_RULES,
    FTFY_CONFIG,
    INVISIBLE_RULES,
    LATEX_RULES,
    LIGHT_SPACE_RULES,
    MAX_PASSES,
    PROSE_SPACE_RULES,
    STRIP_CHARS,
    SUSPECT,
    Rule,
    py_rule,
    token_rules,
)
from .width import (
    FULL_WIDTH,
    HALF_WIDTH,
    HAS_FULL_WIDTH,
    NUMBER_RUN_FULL_WIDTH,
    OPERATOR,
    SPAN_DELIMITER,
    convert_spans,
    to_half_width,
)

__all__ = ["TEXT_FIELDS", "clean_value", "clean_frame", "rule_plan"]

TEXT_FIELDS = ("question", "reference", "solution")


def rule_plan(field: str, verbatim: bool, cfg: CleaningConfig) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """The regex rules for one field kind: (rules after width conversion, whitespace rules)."""
    if verbatim and field != "question":
        return (), LIGHT_SPACE_RULES
    rules: list[Rule] = list(LATEX_RULES) if cfg.latex else []
    tok = cfg.special_tokens
    if tok.enabled:
        rules += token_rules(tok.all_tokens, tuple(tok.role_tags))
    if cfg.latex and field == "reference":
        rules += ANSWER_LATEX_RULES
    return tuple(rules), PROSE_SPACE_RULES


def _width_mode(field: str, category: str, verbatim: bool, cfg: CleaningConfig) -> str:
    """'all' (whole value), 'spans' (question prose: only spans) or 'none'."""
    if verbatim and field != "question":
        return "none"
    if category in cfg.width.categories_all_fields or field in cfg.width.scope:
        return "all"
    return "spans" if field == "question" else "none"


def _sub_all(text: str, rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        pattern, repl = py_rule(rule)
        text = pattern.sub(repl, text)
    return text


def clean_value(text: str, field: str, category: str, cfg: CleaningConfig) -> str:
    """Clean one value of `field` ("question", "reference" or "solution") of a row of `category`.

    The pass repeats while its regex rules still change the value (at most MAX_PASSES times); a
    value that only ftfy changed is done, since ftfy's output is a fixed point of ftfy."""
    for _ in range(MAX_PASSES):
        fixed, cleaned = _clean_once(text, field, category, cfg)
        done = cleaned == text or cleaned == fixed
        text = cleaned
        if done:
            break
    return text


def _clean_once(text: str, field: str, category: str, cfg: CleaningConfig) -> tuple[str, str]:
    """(the value after ftfy, the value after the whole pass)."""
    verbatim = category in cfg.verbatim_categories
    text = _sub_all(text, INVISIBLE_RULES)
    if cfg.fix_mojibake:  # always: this is the reference the fast path is checked against
        text = ftfy.fix_text(text, FTFY_CONFIG)
    fixed = text
    text = _sub_all(text, CONTROL_RULES)
    mode = _width_mode(field, category, verbatim, cfg)
    if mode == "all":
        text = to_half_width(text)
    elif mode == "spans":
        text = convert_spans(text, cfg.width.scope)
    rules, spaces = rule_plan(field, verbatim, cfg)
    text = _sub_all(text, rules)
    return fixed, _sub_all(text, spaces).strip(STRIP_CHARS)


# ---- vectorized -------------------------------------------------------------------------------


def _on_rows(s: pl.Series, mask: pl.Series, fn) -> pl.Series:
    """Apply the Python function `fn` only where `mask` is true (the slow path)."""
    idx = mask.fill_null(False).arg_true()
    if idx.len() == 0:
        return s
    return s.clone().scatter(idx, [fn(v) for v in s.gather(idx).to_list()])  # scatter works in place


def _replace_rules(s: pl.Series, rules: tuple[Rule, ...], strip: bool = False) -> pl.Series:
    """Apply `rules` in order (then strip the ends), but only to the rows one of them can change.

    If no rule matches a value, the first rule leaves it as is, so the second sees it unchanged,
    and so on: the values matching none of the patterns (one vectorized scan) are skipped.
    """
    patterns = [f"(?:{r.pattern})" for r in rules]
    if strip:
        patterns.append(f"^[{STRIP_CHARS}]|[{STRIP_CHARS}]\\z")
    if not patterns:
        return s
    idx = s.str.contains("|".join(patterns)).fill_null(False).arg_true()
    if idx.len() == 0:
        return s
    sub = s.gather(idx)
    for rule in rules:
        sub = sub.str.replace_all(rule.pattern, rule.repl)
    if strip:
        sub = sub.str.strip_chars(STRIP_CHARS)
    return s.clone().scatter(idx, sub)


def _clean_column(s: pl.Series, field: str, categories: pl.Series, cfg: CleaningConfig) -> pl.Series:
    """One full pass on every row, then more passes on the rows whose regex rules changed them
    (the same loop as `clean_value`)."""
    fixed, out = _column_once(s, field, categories, cfg)
    again = (out != s) & (out != fixed)
    for _ in range(MAX_PASSES - 1):
        idx = again.arg_true()
        if idx.len() == 0:
            break
        before = out.gather(idx)
        fixed, after = _column_once(before, field, categories.gather(idx), cfg)
        out = out.clone().scatter(idx, after)
        again = pl.repeat(False, s.len(), dtype=pl.Boolean, eager=True).scatter(
            idx, (after != before) & (after != fixed)
        )
    return out


def _column_once(s: pl.Series, field: str, categories: pl.Series, cfg: CleaningConfig) -> tuple[pl.Series, pl.Series]:
    """(the column after ftfy, the column after the whole pass)."""
    s = _replace_rules(s, INVISIBLE_RULES)
    if cfg.fix_mojibake:
        s = _on_rows(s, s.str.contains(SUSPECT), lambda v: ftfy.fix_text(v, FTFY_CONFIG))
    fixed = s
    s = _replace_rules(s, CONTROL_RULES)
    verbatim = categories.is_in(cfg.verbatim_categories) if field != "question" else None
    has_fw = s.str.contains(HAS_FULL_WIDTH)
    all_cats = categories.is_in(cfg.width.categories_all_fields)
    whole = all_cats | (field in cfg.width.scope)
    if verbatim is not None:
        whole = whole & ~verbatim
    convert = has_fw & whole
    if convert.any():
        s = s.zip_with(~convert, s.str.replace_many(FULL_WIDTH, HALF_WIDTH))
    if field == "question":
        maybe = s.str.contains(NUMBER_RUN_FULL_WIDTH) | (
            has_fw & (s.str.contains(SPAN_DELIMITER) | s.str.contains(OPERATOR))
        )
        s = _on_rows(s, maybe & ~whole, lambda v: convert_spans(v, cfg.width.scope))
    rules, spaces = rule_plan(field, False, cfg)
    prose = _replace_rules(_replace_rules(s, rules), spaces, strip=True)
    if verbatim is None or not verbatim.any():
        return fixed, prose
    light = _replace_rules(s, LIGHT_SPACE_RULES, strip=True)
    return fixed, light.zip_with(verbatim, prose)


def clean_frame(df: pl.DataFrame, cfg: CleaningConfig) -> pl.DataFrame:
    """Clean the text columns of `df` (needs `category`; missing text columns are skipped)."""
    categories = df["category"].cast(pl.String).fill_null("")
    cols = [
        _clean_column(df[f].cast(pl.String).fill_null(""), f, categories, cfg).alias(f)
        for f in TEXT_FIELDS
        if f in df.columns
    ]
    return df.with_columns(cols)
