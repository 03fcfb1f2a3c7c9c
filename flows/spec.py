"""The domain spec: one YAML file per domain, loaded into a frozen `DomainSpec`.

`load_spec(path)` reads the YAML, validates every section against the config model its library
owns (cleaning, verifiers, curriculum, training) and turns any problem into a `SpecError` whose
message names the file, the field path (`sources[0].format`), the rule broken with the value seen,
and the fix (the field's description and, for enums and literals, the allowed values).

Relative paths inside the spec resolve against `spec.base_dir`, the spec file's folder.

How completions are sampled is set once, in `generation:` (max_new_tokens, temperature, top_p), and
resolved here into the sections that generate (curriculum, training.grpo, eval) before they validate,
so the stages (and the cache keys, which hash the sections) read the resolved values. Writing one of
those fields in its section, or a field under an earlier name, is a `renamed` error that names the
new place. docs/spec.md lists every field a spec takes (`python scripts/spec_reference.py`).

    spec = load_spec("examples/retail/spec.yaml")
    spec.training.sft.max_steps, spec.base_dir
"""

from __future__ import annotations

import difflib
import enum
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from rlvrflow.cleaning.config import CleaningConfig, DriftConfig, SourceSpec, ValidationConfig
from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.flows.config import OrchestrationConfig, PromotionConfig, RegistryConfig
from rlvrflow.training.config import EvalConfig, TrainingConfig, renamed_error
from rlvrflow.verifiers.config import VerifierConfig

__all__ = [
    "DomainSpec",
    "FROM_GENERATION",
    "GenerationConfig",
    "SpecError",
    "load_spec",
    "spec_data",
    "spec_from_dict",
    "format_validation_error",
]

# The sections that generate completions, each reading every generation.* field.
GENERATION_TARGETS: tuple[tuple[str, ...], ...] = (("curriculum",), ("training", "grpo"), ("eval",))
GENERATION_FIELDS = ("max_new_tokens", "episode_max_new_tokens", "temperature", "top_p")
# Fields of the library sections that a spec sets in one place: spec path -> where it is set now.
FROM_GENERATION: dict[str, str] = {
    ".".join((*path, f)): f"generation.{f}" for path in GENERATION_TARGETS for f in GENERATION_FIELDS
}


class SpecError(ValueError):
    """A domain spec that cannot be used; the message says where, what and how to fix it."""


def _default_factory(cls: type[BaseModel]):
    """A section may be omitted when its model builds from defaults alone; else it is required."""
    try:
        cls()
    except (ValidationError, TypeError):
        return None
    return cls


def _section_field(cls: type[BaseModel], description: str) -> Any:
    factory = _default_factory(cls)
    if factory is None:
        return Field(description=description)
    return Field(default_factory=factory, description=description)


class GenerationConfig(BaseModel):
    """How completions are sampled, set once for tiering (and so DPO's pairs), GRPO rollouts and eval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_new_tokens: int = Field(
        24,
        ge=1,
        description="completion length cap in tokens, for tiering, GRPO rollouts and eval (greedy and "
        "sampled) alike, so a tier and a held-out score describe the completions GRPO trains on",
    )
    episode_max_new_tokens: int = Field(
        128,
        ge=1,
        description="length cap in tokens of each assistant message of an episode (an environment's category), "
        "for tiering, GRPO rollouts and eval alike: a tool call with its JSON arguments runs longer than most "
        "single replies, so it has its own cap (max_new_tokens stays the single replies')",
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="sampling temperature of tiering, GRPO rollouts and eval's sampled metrics (the "
        "greedy metrics use 0): tiering predicts which groups GRPO will find mixed, so both sample alike",
    )
    top_p: float = Field(
        1.0,
        gt=0,
        le=1,
        description="nucleus sampling mass of tiering, GRPO rollouts and eval's sampled metrics",
    )


def _generation(data: Any) -> GenerationConfig | None:
    """generation.* of raw spec data; None when invalid (validation reports it at generation.*)."""
    try:
        return GenerationConfig.model_validate(data.get("generation") or {})
    except ValidationError:
        return None


def _section_data(data: dict, path: tuple[str, ...]) -> Any:
    for name in path:
        data = data.get(name) if isinstance(data, dict) else None
        if isinstance(data, BaseModel):
            data = data.model_dump(exclude_unset=True)
    return data


def _set_in_sections(data: dict) -> list[tuple[str, str, Any]]:
    """(old path, new path, value) of each FROM_GENERATION field the spec writes in its section."""
    found = []
    for dotted, new in FROM_GENERATION.items():
        *path, leaf = dotted.split(".")
        section = _section_data(data, tuple(path))
        if isinstance(section, dict) and leaf in section:
            found.append((dotted, new, section[leaf]))
    return found


def _with_default(data: dict, path: tuple[str, ...], key: str, value: Any) -> dict | None:
    """A copy of `data` with `data[path...][key] = value`; None when the spec set that key (or the
    section is not a mapping: validation reports that)."""
    head, rest = path[0], path[1:]
    section = data.get(head, {})
    if isinstance(section, BaseModel):
        section = section.model_dump(exclude_unset=True)
    if not isinstance(section, dict):
        return None
    inner = _with_default(section, rest, key, value) if rest else (None if key in section else {**section, key: value})
    return None if inner is None else {**data, head: inner}


class DomainSpec(BaseModel):
    """Everything the pipeline needs to know about one domain; each section belongs to a library."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    domain: str = Field(
        pattern=r"^[a-z0-9_-]+$",
        description="short domain name: lowercase letters, digits, '_' or '-' (e.g. retail)",
    )
    description: str = Field(default="", description="one line saying what the domain is")
    sources: list[SourceSpec] = Field(
        min_length=1, description="raw log sources to ingest (cleaning.config.SourceSpec); at least one"
    )
    cleaning: CleaningConfig = _section_field(
        CleaningConfig, "text cleaning, templating and dedup (cleaning.config.CleaningConfig)"
    )
    validation: ValidationConfig = _section_field(
        ValidationConfig, "Great Expectations checks on the clean rows (cleaning.config.ValidationConfig)"
    )
    verifiers: VerifierConfig = _section_field(
        VerifierConfig, "category -> verifier rules and reward weights (verifiers.config.VerifierConfig)"
    )
    curriculum: CurriculumConfig = _section_field(
        CurriculumConfig, "pass@k tiers, sampling weights, eval split (curriculum.config.CurriculumConfig)"
    )
    training: TrainingConfig = _section_field(
        TrainingConfig,
        "the model and how it trains: base model, SFT, GRPO or DPO, checkpoints, LoRA, precision, "
        "threads (training.config.TrainingConfig)",
    )
    eval: EvalConfig = _section_field(
        EvalConfig,
        "held-out evaluation of the SFT model and every checkpoint: sampling, pass@k, regression and "
        "robustness sets (training.config.EvalConfig)",
    )
    generation: GenerationConfig = Field(
        default_factory=GenerationConfig,
        description="how completions are sampled (max_new_tokens, temperature, top_p), one setting for tiering, "
        "GRPO rollouts and eval",
    )
    orchestration: OrchestrationConfig = Field(
        default_factory=OrchestrationConfig,
        description="task runner (threads | dask), fan-out chunking and retries (flows.config)",
    )
    drift: DriftConfig = Field(
        default_factory=DriftConfig,
        description="how far tonight's rows may move from the champion's before the run stops "
        "(cleaning.config.DriftConfig)",
    )
    promotion: PromotionConfig = Field(
        default_factory=PromotionConfig,
        description="when tonight's model replaces the champion in OUT/registry (flows.config, flows/promotion.py)",
    )
    registry: RegistryConfig = Field(
        default_factory=RegistryConfig,
        description="local (OUT/registry/ only) or mlflow (also MLflow's model registry; flows.config, "
        "flows/mlflow_registry.py)",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _resolve_generation(cls, data: Any, handler) -> "DomainSpec":
        """generation.* fills those fields of the GENERATION_TARGETS sections, which a spec may not set
        there itself (a `renamed_error` says where they went); the spec remembers what it filled
        (`spec_data` leaves it out again)."""
        if not isinstance(data, dict):  # a DomainSpec passed in is returned as it is, with its own record
            return handler(data)
        moved = _set_in_sections(data)
        if moved:
            raise renamed_error(moved)
        shared, filled = _generation(data), []
        for path in GENERATION_TARGETS if shared is not None else ():
            for name in GENERATION_FIELDS:
                new = _with_default(data, path, name, getattr(shared, name))
                if new is not None:
                    data, filled = new, [*filled, ".".join((*path, name))]
        spec = handler(data)
        spec._inherited = tuple(filled)
        return spec

    @model_validator(mode="after")
    def _episodes_playable(self) -> "DomainSpec":
        """GRPO on an environment's rows needs sync HF rollouts in one torch process: say so when the spec
        is read, not after the data stages and SFT (a launcher's several ranks are checked at the stage)."""
        from rlvrflow.training.grpo_episodes import check_supported

        if self.training.algorithm == "grpo" and self.training.episodes:
            if any(rule.environment is not None for rule in self.verifiers.rules):
                check_supported(self.training.grpo, distributed=False)
        return self

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _path: Path | None = PrivateAttr(default=None)
    _inherited: tuple[str, ...] = PrivateAttr(default=())

    @property
    def base_dir(self) -> Path:
        """The spec file's folder; relative paths in the spec resolve against it."""
        return self._base_dir

    @property
    def path(self) -> Path | None:
        """The YAML file this spec came from (None when built from a dict)."""
        return self._path

    def resolve(self, path: str | Path) -> Path:
        """A path from the spec, made absolute against `base_dir`."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self._base_dir / p).resolve()


def spec_data(spec: DomainSpec) -> dict:
    """The spec as JSON data that validates back to an equal spec, less the section values that
    generation.* filled in: change generation.temperature in it (a `--set` override) and those
    sections follow again."""
    data = spec.model_dump(mode="json")
    for dotted in spec._inherited:
        *parents, leaf = dotted.split(".")
        node = data
        for name in parents:
            node = node[name]
        node.pop(leaf, None)
    return data


def load_spec(path: str | Path) -> DomainSpec:
    """Read and validate a domain spec YAML file; raise `SpecError` on any problem."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: spec file not found (check the path; specs are YAML files)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(f"{where}: YAML syntax error: {problem}; fix the YAML at that line") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: YAML error: {exc}") from None
    spec = spec_from_dict(data, base_dir=path.resolve().parent, origin=str(path))
    spec._path = path.resolve()
    return spec


def spec_from_dict(data: Any, base_dir: str | Path, origin: str = "<spec>") -> DomainSpec:
    """Validate an already parsed spec; `origin` names it in error messages."""
    if not isinstance(data, dict):
        raise SpecError(
            f"{origin}: the spec must be a YAML mapping with keys like domain, sources, ...; got {type(data).__name__}"
        )
    try:
        spec = DomainSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, origin, DomainSpec)) from None
    spec._base_dir = Path(base_dir).resolve()
    return spec


# ----- error messages -------------------------------------------------------------------------


def format_validation_error(exc: ValidationError, origin: str, model: type[BaseModel]) -> str:
    """One block per failing field: path, rule broken (with the value seen), and the fix."""
    errors = exc.errors(include_url=False)
    lines = [f"{origin}: {len(errors)} problem(s) in the domain spec"]
    for err in errors:
        loc = err["loc"]
        path = _loc_to_path(loc)
        field, parent = _find_field(model, loc)
        rule = err["msg"]
        if err["type"] == "renamed":  # the message says what to write instead, one field a line
            lines += [f"  {path}: {part}" if path else f"  {part}" for part in rule.split("; ")]
            continue
        if err["type"] != "missing" and loc:  # at the top level the input is the whole spec
            rule += f" (got {_short(err.get('input'))})"
        lines.append(f"  {path or '<top level>'}: {rule}")
        fix = _fix_hint(err, field, parent, loc)
        if fix:
            lines.append(f"    fix: {fix}")
    return "\n".join(lines)


def _loc_to_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _find_field(model: type[BaseModel], loc: tuple):
    """Walk the models along `loc`: (FieldInfo of the last field, the model that holds it).

    For an unknown key (extra_forbidden) the field is None and the model is where it was found.
    """
    current: Any = model
    field = None
    parent: type[BaseModel] | None = None
    for part in loc:
        current = _unwrap(current, part)
        if _is_model(current) and isinstance(part, str):
            info = current.model_fields.get(part)
            if info is None:
                return None, current
            parent, field, current = current, info, info.annotation
        elif isinstance(part, int) or typing.get_origin(current) is dict:
            current = _element_type(current)
        # other parts (union member tags such as 'function-after[...]') keep `current`
    return field, parent


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _unwrap(tp: Any, part: Any) -> Any:
    """Strip Annotated and Optional; in a Union, pick the member that `part` names or holds."""
    import types

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0], part)
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        for m in members:
            if _is_model(m) and (part == m.__name__ or part in m.model_fields):
                return m
        return _unwrap(members[0], part) if len(members) == 1 else tp
    return tp


def _element_type(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return tp


def _allowed_values(annotation: Any) -> list[str]:
    for tp in [annotation, *typing.get_args(annotation)]:
        if typing.get_origin(tp) is typing.Literal:
            return [repr(v) for v in typing.get_args(tp)]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return [repr(m.value) for m in tp]
    return []


def _fix_hint(err: dict, field, parent: type[BaseModel] | None, loc: tuple) -> str:
    if err["type"] == "extra_forbidden":
        known = list(parent.model_fields) if _is_model(parent) else []
        hint = f"remove '{loc[-1]}'"
        near = difflib.get_close_matches(str(loc[-1]), known, n=1)
        if near:
            hint += f" (did you mean '{near[0]}'?)"
        if known:
            hint += f"; allowed keys here: {', '.join(known)}"
        return hint
    parts = ["add this key"] if err["type"] == "missing" else []
    if field is not None and field.description:
        parts.append(field.description)
    allowed = _allowed_values(field.annotation) if field is not None else []
    expected = (err.get("ctx") or {}).get("expected")
    if allowed:
        parts.append(f"allowed values: {', '.join(allowed)}")
    elif expected:
        parts.append(f"expected {expected}")
    return "; ".join(parts)
