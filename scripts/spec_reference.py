"""Write docs/spec.md, the domain spec reference, from the pydantic models that validate a spec.

    python scripts/spec_reference.py            # (re)write docs/spec.md
    python scripts/spec_reference.py --check    # exit 1 when docs/spec.md is not what this writes now

It walks `flows.spec.DomainSpec` in field order: one table per section (a nested model gets its own
table under its dotted path, `training.grpo`; a list of models `sources[]`), a row per field with
its type, default, field rules (>=, <, length, pattern, allowed values) and description; the fields
that `generation` sets for several sections are listed there only (flows.spec.FROM_GENERATION). Cross-field
rules live in the models' validators and are not listed; their errors say how to fix them.
tests/flows/test_spec_reference.py fails when the file is stale or a field has no description.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "docs" / "spec.md"
COMMAND = "python scripts/spec_reference.py"

HEADER = f"""# Domain spec reference

Every field of a domain spec (`rlvrflow spec-check SPEC` validates one; `examples/retail/spec.yaml`
is a full example), in spec order. Generated from the pydantic models' field descriptions by
`{COMMAND}`: edit the descriptions in the config modules, not this file.
Types and defaults are YAML (`null` is None); "required" fields have no default. Rules beyond the
ones listed (e.g. `k <= n_samples`) are checked across fields at load time, with the fix in the error.
"""


def _members(tp: Any) -> list[Any]:
    return [a for a in typing.get_args(tp) if a is not type(None)]


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def type_name(tp: Any) -> str:
    """A field's type as a reader of YAML thinks of it: int, list[str], 'a' | 'b', GRPOConfig | null."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "null"
    if tp is Any:
        return "any"
    if origin is typing.Annotated:
        return type_name(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(v) for v in typing.get_args(tp))
    if _is_union(tp):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple, set, frozenset):
        return f"list[{', '.join(type_name(a) for a in typing.get_args(tp) if a is not Ellipsis)}]"
    if origin is dict:
        return f"map[{', '.join(type_name(a) for a in typing.get_args(tp))}]"
    if _is_model(tp):
        return tp.__name__
    return getattr(tp, "__name__", str(tp))


RULES = (
    (at.Ge, "ge", ">= {}"),
    (at.Gt, "gt", "> {}"),
    (at.Le, "le", "<= {}"),
    (at.Lt, "lt", "< {}"),
    (at.MinLen, "min_length", "length >= {}"),
    (at.MaxLen, "max_length", "length <= {}"),
)


def rules(field: FieldInfo) -> str:
    """The field's own rules, from its metadata (bounds, lengths, pattern) and its Literal choices."""
    out = []
    for meta in field.metadata:
        for cls, attr, text in RULES:
            if isinstance(meta, cls):
                out.append(text.format(getattr(meta, attr)))
        if getattr(meta, "pattern", None):
            out.append(f"matches `{meta.pattern}`")
    literals = _literals(field.annotation)
    if literals:
        out.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in literals))
    return "; ".join(out)


def _literals(tp: Any) -> list[Any]:
    if typing.get_origin(tp) is typing.Literal:
        return list(typing.get_args(tp))
    if typing.get_origin(tp) is dict:  # Literal keys show in the type
        return []
    return [v for a in typing.get_args(tp) for v in _literals(a)]


def default(field: FieldInfo) -> str:
    """The default as YAML; a nested section built from its own defaults says so."""
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "its fields' defaults"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def nested(tp: Any) -> tuple[type[BaseModel], str] | None:
    """The model a field holds, with the path suffix that reaches it ("" itself, "[]" an element,
    ".<key>" a map value), or None for a plain value."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_model(tp):
        return tp, ""
    if origin is typing.Annotated:
        return nested(args[0])
    if _is_union(tp):
        return next((n for n in map(nested, _members(tp)) if n), None)
    if origin in (list, tuple, set, frozenset) and args:
        inner = nested(args[0])
        return (inner[0], "[]" + inner[1]) if inner else None
    if origin is dict and len(args) == 2:
        inner = nested(args[1])
        return (inner[0], ".<key>" + inner[1]) if inner else None
    return None


def anchor(path: str) -> str:
    """The id GitHub gives the heading of section `path` ("## `training.grpo`" -> "traininggrpo")."""
    return "".join(c for c in path.lower() if c.isalnum() or c in "_-")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def sections(model: type[BaseModel], path: str = "") -> list[tuple[str, type[BaseModel]]]:
    """(dotted path, model) of `model` and every model under it, depth first in field order."""
    out = [(path, model)]
    for name, field in model.model_fields.items():
        found = nested(field.annotation)
        if found is not None:
            out += sections(found[0], f"{path}.{name}{found[1]}" if path else f"{name}{found[1]}")
    return out


def table(path: str, model: type[BaseModel]) -> str:
    from rlvrflow.flows.spec import FROM_GENERATION

    module = model.__module__.removeprefix("rlvrflow.").replace(".", "/") + ".py"  # the file in this repository
    title = f"`{path}`" if path else "Top level"
    doc = " ".join((model.__doc__ or "").split())
    lines = [
        f"## {title}",
        "",
        f"`{model.__name__}` in `{module}`" + (f": {doc}" if doc else ""),
        "",
        "| field | type | default | rules | description |",
        "|---|---|---|---|---|",
    ]
    for name, field in model.model_fields.items():
        if f"{path}.{name}" in FROM_GENERATION:  # set once for all sections, in generation
            continue
        kind, found = type_name(field.annotation), nested(field.annotation)
        if found is not None:
            sub = f"{path}.{name}{found[1]}" if path else f"{name}{found[1]}"
            kind += f" ([`{sub}`](#{anchor(sub)}))"
        cells = (f"`{name}`", kind, default(field), rules(field), field.description or "")
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def undescribed(model: type[BaseModel]) -> list[str]:
    """Dotted paths of the fields under `model` that have no description."""
    return [
        f"{path}.{name}" if path else name
        for path, m in sections(model)
        for name, field in m.model_fields.items()
        if not (field.description or "").strip()
    ]


def reference() -> str:
    """docs/spec.md as the models describe the spec today."""
    from rlvrflow.flows.spec import DomainSpec

    return HEADER + "".join(f"\n{table(path, model)}\n" for path, model in sections(DomainSpec))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/spec.md is stale; write nothing")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.is_file() else ""
        if current != text:
            print(f"{TARGET.relative_to(REPO)} is stale; regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
