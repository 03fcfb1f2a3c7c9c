"""The text rules shared by the vectorized cleaner and the per-value cleaner, written once.

Each rule is a regex plus a replacement in the syntax of Rust's `regex` crate (what polars runs):
no look-around, no back-references, `${1}` for groups, `\\z` for end of text. `py_rule` turns one
into Python `re` form, so `clean_value` (one string, pure Python) and `clean_frame` (polars,
vectorized) apply the same rules and give identical output; tests and bench/ check that.
Character classes are spelled out (`[ \\t\\n]`, `[0-9]`) because `\\s` and `\\d` differ
between the two engines.

Rule groups, in the order the cleaner applies them (the order makes the whole idempotent):
1. zero-width / bidi characters and BOMs dropped;
2. ftfy mojibake repair (only values with a character outside SAFE_CHARS: see `SUSPECT`), then
   control characters dropped and line breaks unified;
3. full-width to half-width (`width.py`);
4. LaTeX rules for all text;
5. special tokens and role tags replaced by a space;
6. LaTeX rules for answers (references only; anchored ones see the text without tokens), ending
   with the canonical form of a plain numeric fraction reference, `a/b`;
7. whitespace: exotic spaces, internal runs, trailing spaces, blank lines, ends.
One pass of these is not always a fixed point (ftfy can repair more once a neighbouring NBSP is
a space; removing a token can expose a `### Human:` prefix), so the cleaner repeats the pass on
values the last pass changed, up to MAX_PASSES: the result is idempotent by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import ftfy

__all__ = [
    "Rule",
    "py_rule",
    "escape",
    "FTFY_CONFIG",
    "SUSPECT",
    "INVISIBLE_RULES",
    "CONTROL_RULES",
    "LATEX_RULES",
    "ANSWER_LATEX_RULES",
    "PROSE_SPACE_RULES",
    "LIGHT_SPACE_RULES",
    "STRIP_CHARS",
    "MAX_PASSES",
    "token_rules",
]


@dataclass(frozen=True)
class Rule:
    """`pattern` (Rust/Python common subset) is replaced by `repl` (Rust syntax: ${1}, $$)."""

    pattern: str
    repl: str
    why: str


def escape(literal: str) -> str:
    """Escape a literal for both engines (Rust rejects escapes of non-meta characters like `\\<`)."""
    return "".join("\\" + ch if ch in "\\.+*?()|[]{}^$" else ch for ch in literal)


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("\\z", "\\Z"))


def _py_repl(repl: str) -> str:
    out, i = [], 0
    while i < len(repl):
        if repl.startswith("$$", i):
            out.append("$")
            i += 2
        elif repl.startswith("${", i):
            end = repl.index("}", i)
            out.append(f"\\g<{repl[i + 2 : end]}>")
            i = end + 1
        else:
            out.append("\\\\" if repl[i] == "\\" else repl[i])
            i += 1
    return "".join(out)


@lru_cache(maxsize=None)
def py_rule(rule: Rule) -> tuple[re.Pattern[str], str]:
    """The same rule for Python's `re`: compiled pattern and `re.sub` replacement."""
    return _compiled(rule.pattern), _py_repl(rule.repl)


# ftfy: repair encodings only. Width, quotes and HTML entities are left alone: width is scoped
# by our own rules, curly quotes are correct Chinese punctuation, and `&amp;` may be code or SQL.
FTFY_CONFIG = ftfy.TextFixerConfig(unescape_html=False, fix_character_width=False, uncurl_quotes=False)


# Characters ftfy (with the config above) leaves unchanged: printable ASCII, tab and newline,
# CJK symbols without combining marks, CJK ideographs and full-width ASCII. A value made only of
# these skips ftfy (the fast path); anything else (Latin-1 mojibake, curly quotes, C1 controls,
# \r, combining marks...) takes ftfy's full path.
SAFE_CHARS = "\\t\\n\\x20-\\x7E\\u3000-\\u3029\\u4E00-\\u9FFF\\uFF01-\\uFF5E"
SUSPECT = f"[^{SAFE_CHARS}]"

# Zero-width, bidi and BOM characters go before ftfy: no mojibake sequence contains them, and
# dropping them first keeps values whose only noise they are on the fast path. C0/C1 controls
# and the soft hyphen go after: C1 bytes and U+00AD are parts of Latin-1 mojibake, and ftfy
# removes whole terminal escapes (ESC[31m) where we would only drop the ESC.
INVISIBLE_RULES = (
    Rule(
        "[\\u180E\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u2064\\u2066-\\u2069\\uFEFF\\uFFF9-\\uFFFB]+",
        "",
        "zero-width, bidi and BOM characters carry no text",
    ),
)
CONTROL_RULES = (
    Rule("\\r\\n?|\\u2028|\\u2029|\\u0085", "\n", "one line-break convention"),
    Rule(
        "[\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F-\\x9F\\u00AD]+", "", "control characters and soft hyphens carry no text"
    ),
)

LATEX_RULES = (
    Rule("\\\\[dt]frac", "\\frac", "\\dfrac and \\tfrac are \\frac with another size"),
    Rule("(?:\\\\(?:left|right)[ \\t]*)+\\.", "", "\\left. and \\right. are invisible delimiters"),
    Rule("(?:\\\\(?:left|right))+([^a-zA-Z.]|\\z)", "${1}", "\\left( / \\right) sizing only"),
    Rule("\\\\!", "", "negative thin space"),
    Rule("\\\\,([0-9])", "${1}", "thin space as a thousands separator: 1\\,000 -> 1000"),
)

_SP = "[ \\t]*"
ANSWER_LATEX_RULES = (
    Rule("\\^[ \\t]*\\{[ \\t]*\\\\circ[ \\t]*\\}|\\^[ \\t]*\\\\circ", "", "degree marks: 90^\\circ -> 90"),
    Rule(
        "\\\\(?:text|textrm|textnormal|mbox|mathrm)[ \\t]*\\{([^{}]*)\\}",
        "${1}",
        "units in \\text{...}: keep the words, drop the wrapper",
    ),
    Rule("\\\\q?quad([^a-zA-Z]|\\z)|\\\\[,:;> ]", " ${1}", "LaTeX spacing commands are spaces"),
    Rule("\\\\%", "%", "escaped percent"),
    Rule(
        "^[ \\t\\n]*(?:\\$+|\\\\\\(|\\\\\\[)([^$]*?)(?:\\$+|\\\\\\)|\\\\\\])[ \\t\\n]*\\z",
        "${1}",
        "math delimiters around the whole reference: $42$ -> 42",
    ),
    Rule("^([^$]*[^$ \\t\\n])[ \\t\\n]*\\$+[ \\t\\n]*\\z", "${1}", "a stray closing $ at the end"),
    # One canonical form for a reference that is a plain numeric fraction: `a/b`, however the log
    # wrote it (the math verifier reads `3/4`, `\\frac{3}{4}` and `0.75` in a response alike).
    Rule(
        f"^[ \\t\\n]*([-+]?)\\\\frac{_SP}\\{{{_SP}([0-9]+){_SP}\\}}{_SP}\\{{{_SP}([0-9]+){_SP}\\}}[ \\t\\n]*\\z",
        "${1}${2}/${3}",
        "a numeric fraction reference is written a/b: \\frac{3}{4} -> 3/4",
    ),
    Rule(
        f"^[ \\t\\n]*\\\\frac{_SP}\\{{{_SP}(-[0-9]+){_SP}\\}}{_SP}\\{{{_SP}([0-9]+){_SP}\\}}[ \\t\\n]*\\z",
        "${1}/${2}",
        "the same with the sign inside: \\frac{-3}{4} -> -3/4",
    ),
    Rule(
        "^[ \\t\\n]*([-+]?)\\\\frac([0-9])([0-9])[ \\t\\n]*\\z",
        "${1}${2}/${3}",
        "the same in shorthand: \\frac34 -> 3/4",
    ),
)

PROSE_SPACE_RULES = (
    Rule("[\\t\\u00A0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000]", " ", "exotic spaces are spaces"),
    Rule("([^ \\n]) {2,}", "${1} ", "runs of spaces inside a line (indentation is kept)"),
    Rule(" +\\n", "\n", "trailing spaces"),
    Rule("\\n{3,}", "\n\n", "at most one blank line"),
)

LIGHT_SPACE_RULES = (Rule("[ \\t]+\\n", "\n", "trailing spaces"),)

STRIP_CHARS = " \t\n"
MAX_PASSES = 4


@lru_cache(maxsize=64)
def token_rules(tokens: tuple[str, ...], roles: tuple[str, ...]) -> tuple[Rule, ...]:
    """Rules stripping chat-template roles and literal special tokens (longest token first)."""
    rules = []
    if roles:
        role = "(?:" + "|".join(escape(r) for r in sorted(roles, key=len, reverse=True)) + ")"
        rules.append(
            Rule(f"<\\|start_header_id\\|>[ \\t]*{role}?[ \\t]*<\\|end_header_id\\|>", " ", "llama-3 role header")
        )
        rules.append(Rule(f"<\\|im_start\\|>[ \\t]*{role}?", " ", "ChatML turn start with its role"))
    if tokens:
        alts = "|".join(escape(t) for t in sorted(set(tokens), key=len, reverse=True))
        rules.append(Rule(alts, " ", "special tokens (a space, so no new token forms)"))
    if roles:
        rules.append(
            Rule(f"^(?:[ \\t\\n]*###[ \\t]*(?i:{role})[ \\t]*:)+", " ", "a leading '### Human:' style role prefix")
        )
    return tuple(rules)
