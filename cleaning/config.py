"""The `sources:`, `cleaning:` and `validation:` sections of a domain spec.

Frozen pydantic v2 models with `extra="forbid"`. Every field carries a description, which
`flows/spec.py` prints as the fix hint when a spec breaks a rule. Relative paths in a
`SourceSpec` resolve against the spec file's folder (the `base_dir` given to `prepare`).

    SourceSpec(name="tickets", path="raw/*.jsonl", format="jsonl",
               fields={"question": "body", "reference": "answer", "category": "type"})
"""

from __future__ import annotations

import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FieldMap",
    "SourceSpec",
    "WidthConfig",
    "SpecialTokensConfig",
    "TemplatePart",
    "TemplateConfig",
    "DedupConfig",
    "PiiConfig",
    "CleaningConfig",
    "ValidationConfig",
    "PII_KINDS",
    "DEFAULT_SPECIAL_TOKENS",
    "DEFAULT_ROLE_TAGS",
    "DEFAULT_LAYOUT",
    "ROW_FIELDS",
]

ROW_FIELDS = ("id", "question", "reference", "category", "solution")
REQUIRED_FIELDS = ("question", "reference", "category")

DEFAULT_SPECIAL_TOKENS = (
    "<s>",
    "</s>",
    "<pad>",
    "<unk>",
    "<mask>",
    "<bos>",
    "<eos>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|end|>",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[UNK]",
    "[MASK]",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
)
DEFAULT_ROLE_TAGS = ("system", "user", "assistant", "tool", "human")
PII_KINDS = ("email", "phone", "id_number", "bank_card", "ip_address")
DEFAULT_LAYOUT = "{question}\n\nRequirements: {requirements}\n\nFormat example:\n{format_example}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FieldMap(_Frozen):
    """Which source column feeds each row field (defaults: the row field's own name)."""

    id: str | None = Field(
        "id",
        description=(
            "source column holding a stable row id; rows without one get sha1(domain + question)[:16]; "
            "null means never read an id"
        ),
    )
    question: str = Field("question", min_length=1, description="source column holding the user's question")
    reference: str = Field(
        "reference",
        min_length=1,
        description=("source column holding the gold reference (answer, gold SQL, JSON tests...)"),
    )
    category: str = Field(
        "category",
        min_length=1,
        description=("source column holding the category; may be absent when `defaults.category` is set"),
    )
    solution: str | None = Field(
        "solution", description=("source column holding a known-good response, if the log has one; null means none")
    )


class SourceSpec(_Frozen):
    """One raw log source: where the files are, how to read them and which columns map where."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$",
        description=("short name of the source, used in stats (letters, digits, '_', '-', '.')"),
    )
    path: str | list[str] = Field(
        description=(
            "file path or glob (or a list of them), relative to the spec file; for hf_disk, the "
            "folder written by datasets' save_to_disk"
        )
    )
    format: Literal["jsonl", "csv", "parquet", "hf_disk"] = Field(
        description=(
            "file format: jsonl (one JSON object a line), csv (header row), parquet, or hf_disk "
            "(a Hugging Face dataset saved with save_to_disk)"
        )
    )
    encoding: str = Field(
        "auto",
        description=(
            "text encoding for jsonl/csv: auto (UTF-8 with or without BOM, UTF-16 with BOM, then "
            "GB18030/GBK) or a Python codec name such as utf-8 or gb18030"
        ),
    )
    fields: FieldMap = Field(
        default_factory=FieldMap,
        description=("mapping row field -> source column, e.g. {question: body, reference: answer}"),
    )
    defaults: dict[Literal["category", "solution"], str] = Field(
        default_factory=dict, description=("constant values for fields the source lacks, e.g. {category: arithmetic}")
    )
    max_row_bytes: int = Field(
        65536, gt=0, description=("rows larger than this many bytes (UTF-8) are quarantined as oversized_row")
    )
    csv_delimiter: str = Field(
        ",", min_length=1, max_length=1, description=("field delimiter for csv sources (one character)")
    )
    split: str | None = Field(
        None, description=("for hf_disk sources holding a DatasetDict: the split to read (null reads all splits)")
    )

    @property
    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)

    @field_validator("encoding")
    @classmethod
    def _known_codec(cls, value: str) -> str:
        if value == "auto":
            return value
        import codecs

        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}; use auto, utf-8, gb18030, ...") from None
        return value


class WidthConfig(_Frozen):
    """Where full-width ASCII forms (U+FF01-FF5E, U+3000) become half-width ASCII."""

    scope: list[Literal["question", "reference", "solution", "numbers", "math_spans", "code"]] = Field(
        default_factory=lambda: ["reference", "solution", "numbers", "math_spans", "code"],
        description=(
            "where to convert: whole fields (question, reference, solution) or, inside the "
            "question's prose, digit runs with their operators (numbers), $...$ / \\(...\\) math and "
            "bare formulas such as ｘ＋１＝３ with their variables (math_spans) and `code` spans or "
            "``` blocks (code); CJK punctuation in the rest of the prose is kept"
        ),
    )
    categories_all_fields: list[str] = Field(
        default_factory=list,
        description=("categories whose rows are converted in every field, prose included (e.g. [arithmetic])"),
    )


class SpecialTokensConfig(_Frozen):
    """Chat-template and tokenizer noise to strip from every text field."""

    enabled: bool = Field(True, description="strip special tokens and role tags")
    tokens: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SPECIAL_TOKENS),
        description=("literal tokens to strip (replaced by a space, then whitespace is normalized)"),
    )
    extra: list[str] = Field(default_factory=list, description="more literal tokens to strip")
    role_tags: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ROLE_TAGS),
        description=(
            "role names dropped right after <|im_start|> / <|start_header_id|> and as a leading "
            "'### Human:' style prefix"
        ),
    )

    @property
    def all_tokens(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for t in [*self.tokens, *self.extra] if t))


class TemplatePart(_Frozen):
    """The two domain-written parts of the three-part prompt (the question is the third)."""

    requirements: str = Field(
        "Answer the question.", description=("what the answer must satisfy (units, rounding, dialect, output rules)")
    )
    format_example: str = Field(
        "Answer: 42", description=("a short example of the expected answer format, shown verbatim")
    )


class TemplateConfig(_Frozen):
    """How the prompt is assembled: question / requirements / format example."""

    layout: str = Field(
        DEFAULT_LAYOUT,
        description=("prompt layout with exactly the placeholders {question}, {requirements}, {format_example}"),
    )
    default: TemplatePart = Field(
        default_factory=TemplatePart, description=("requirements and format example for categories without an override")
    )
    by_category: dict[str, TemplatePart] = Field(
        default_factory=dict,
        description=("per-category overrides, e.g. {sql: {requirements: ..., format_example: ...}}"),
    )

    @field_validator("layout")
    @classmethod
    def _placeholders(cls, layout: str) -> str:
        names = {f for _, f, _, _ in string.Formatter().parse(layout) if f is not None}
        wanted = {"question", "requirements", "format_example"}
        if names != wanted:
            raise ValueError(
                f"layout placeholders are {sorted(names)}; use exactly {sorted(wanted)} "
                "(write literal braces as {{ and }})"
            )
        return layout

    def part(self, category: str) -> TemplatePart:
        return self.by_category.get(category, self.default)


class DedupConfig(_Frozen):
    """Duplicate removal on the normalized question (the first occurrence is kept)."""

    exact: bool = Field(True, description="drop rows whose normalized question was already seen")
    near: bool = Field(
        True, description=("drop rows whose question is a near-duplicate (MinHash LSH, then exact Jaccard check)")
    )
    threshold: float = Field(
        0.85,
        gt=0.0,
        le=1.0,
        description=("Jaccard similarity of character 5-gram sets above which two questions are near-duplicates"),
    )
    num_perm: int = Field(128, ge=16, le=1024, description="MinHash permutations (more: slower, more accurate)")
    seed: int = Field(1, description="MinHash seed, for reproducible near-duplicate decisions")
    shards: int = Field(
        16,
        ge=1,
        le=4096,
        description=(
            "hash shards of the on-disk dedup passes: rows with equal question hashes (exact) or equal "
            "LSH buckets (near) meet in one shard, and each shard is resolved on its own (one task each "
            "on Dask); more shards: less memory per task, more files. Results do not depend on it"
        ),
    )


class PiiConfig(_Frozen):
    """PII scrubbing (cleaning/pii.py): matches become typed placeholders such as <PHONE>."""

    enabled: bool = Field(
        False,
        description=(
            "replace e-mail addresses, phone numbers (Chinese mobiles and landlines, +CC / 00CC "
            "international numbers, and North American, British and Australian numbers written in "
            "their usual groups, not compact), Chinese resident ID numbers (checksum), bank card "
            "numbers (network prefix + Luhn) and IP addresses in question, reference and solution by "
            "<EMAIL>, <PHONE>, <ID_NUMBER>, <BANK_CARD>, <IP_ADDRESS>; kept everywhere in the row: "
            "order numbers after a label or key (订单号, order no., order_id=), amounts, and numbers "
            "used as math (an operand of a sign or of a math word such as 'divided by', 'sum of', "
            "'prime', 除以, 的和; inside $...$; a bare-number reference); cleaning/pii.py lists the "
            "exact forms (`pii: true` is short for enabled with every kind)"
        ),
    )
    kinds: list[Literal["email", "phone", "id_number", "bank_card", "ip_address"]] = Field(
        default_factory=lambda: list(PII_KINDS),
        min_length=1,
        description=("which kinds to scrub: email, phone, id_number, bank_card, ip_address"),
    )


class CleaningConfig(_Frozen):
    """The pure text transformations, PII scrubbing, the prompt template and dedup."""

    verbatim_categories: list[str] = Field(
        default_factory=lambda: ["sql", "code", "json", "regex"],
        description=(
            "categories whose reference and solution are code or data (gold SQL, JSON tests): "
            "there only mojibake, control characters and line breaks are fixed, never width, "
            "LaTeX, special tokens or inner whitespace"
        ),
    )
    fix_mojibake: bool = Field(
        True, description=("repair mojibake with ftfy (only rows with suspicious characters take the slow path)")
    )
    width: WidthConfig = Field(
        default_factory=WidthConfig, description=("full-width to half-width conversion scope (see WidthConfig)")
    )
    latex: bool = Field(
        True,
        description=(
            "normalize LaTeX: \\dfrac/\\tfrac -> \\frac, drop \\left/\\right, thin spaces, ^\\circ, "
            "\\text{} units and math delimiters around a whole reference, and write a reference that is "
            "a plain numeric fraction as a/b (\\frac{3}{4} -> 3/4)"
        ),
    )
    special_tokens: SpecialTokensConfig = Field(
        default_factory=SpecialTokensConfig, description=("special tokens and role tags to strip")
    )
    template: TemplateConfig = Field(
        default_factory=TemplateConfig, description=("the three-part prompt template, per category")
    )
    dedup: DedupConfig = Field(default_factory=DedupConfig, description="exact and near-duplicate removal")
    pii: PiiConfig = Field(
        default_factory=PiiConfig,
        description=("PII scrubbing, off by default: `pii: true`, or {enabled: true, kinds: [email, phone]}"),
    )
    chunk_rows: int = Field(
        100_000,
        ge=1,
        le=1_000_000,
        description=(
            "records (rows + rejects) read, cleaned, checked and written at a time: memory grows with "
            "this, not with the input (a 1M-row run peaked near 1 GB at the default, most of it the "
            "checks on one chunk); results do not depend on it"
        ),
    )

    @field_validator("pii", mode="before")
    @classmethod
    def _pii_switch(cls, value):
        return {"enabled": value} if isinstance(value, bool) else value


class ValidationConfig(_Frozen):
    """Great Expectations checks on the clean rows; failing rows are rejected with a reason."""

    min_question_chars: int = Field(3, ge=1, description="shortest allowed question, in characters")
    max_question_chars: int = Field(8000, ge=1, description="longest allowed question, in characters")
    max_prompt_chars: int = Field(4000, ge=1, description="longest allowed prompt, in characters")
    max_reference_chars: int = Field(20000, ge=1, description="longest allowed reference, in characters")
    categories: list[str] = Field(
        default_factory=list,
        description=("allowed categories; rows with another category are rejected (empty list: any category)"),
    )
    min_rows: int = Field(1, ge=0, description="fewest clean rows the run may produce")
    max_rejected_fraction: float = Field(
        0.2, ge=0.0, le=1.0, description=("largest share of rows the validation checks may reject before the run stops")
    )

    @model_validator(mode="after")
    def _bounds(self) -> "ValidationConfig":
        if self.min_question_chars > self.max_question_chars:
            raise ValueError("min_question_chars must not exceed max_question_chars")
        return self


class DriftConfig(_Frozen):
    """The `drift:` section: how far tonight's rows may move from the champion's before the run stops
    (cleaning/drift.py). Checked only when the registry has a champion."""

    enabled: bool = Field(True, description="check tonight's rows against the champion's before any training")
    max_share_shift: float = Field(
        0.15,
        ge=0,
        le=1,
        description=(
            "how far a category's share of the new rows may move, either way (0.15: a 30% category may be "
            "15%-45%), and the share categories the champion never saw may take; a category that vanishes fails"
        ),
    )
    max_format_shift: float = Field(
        0.10,
        ge=0,
        le=1,
        description=(
            "share of a category's references that may take a format the champion's rows had under 1% of "
            "(integer, decimal, fraction, percent, json, text)"
        ),
    )
    range_margin: float = Field(
        0.5,
        ge=0,
        description=(
            "how much wider than the champion's 1st-99th percentile range numeric references and question "
            "lengths may spread: each end moves out by this fraction of the range's width or of its larger end's "
            "magnitude, whichever is more (0.5 on 5..400: -195..600)"
        ),
    )
    max_out_of_range: float = Field(
        0.05,
        ge=0,
        le=1,
        description=(
            "share of a category's numeric references (and of questions, by length) that may fall outside that range"
        ),
    )
    max_solution_drop: float = Field(
        0.2, ge=0, le=1, description=("how far the share of rows with a worked solution may fall")
    )
    max_rejected_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "share of a source file's rows that may be lost before training (rejected at ingest, cleaning, "
            "validation, dedup or attach); a file over it is a broken source: a changed field mapping, another "
            "encoding, a re-export of rows already read"
        ),
    )
