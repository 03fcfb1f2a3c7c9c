"""docs/spec.md is what scripts/spec_reference.py writes from the spec models today, and every field
of the spec has a description for it to show."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from rlvrflow.flows.spec import FROM_GENERATION, DomainSpec

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("spec_reference", REPO / "scripts" / "spec_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_spec_md_is_current():
    gen = _generator()
    current = gen.TARGET.read_text(encoding="utf-8") if gen.TARGET.is_file() else ""
    assert current == gen.reference(), (
        f"docs/spec.md is stale (a spec field, default, rule or description changed); "
        f"regenerate it with `{gen.COMMAND}` and commit it"
    )


def test_every_spec_field_has_a_description():
    missing = _generator().undescribed(DomainSpec)
    assert missing == [], f"spec fields without a description (add Field(description=...)): {missing}"


def test_every_section_and_field_is_in_the_reference_in_spec_order():
    gen = _generator()
    text = gen.reference()
    paths = [path for path, _ in gen.sections(DomainSpec)]
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Top level"] + [f"## `{p}`" for p in paths[1:]]
    assert paths[:3] == ["", "sources[]", "sources[].fields"] and "training.grpo" in paths
    for path, model in gen.sections(DomainSpec):
        body = text.split(f"## `{path}`\n" if path else "## Top level\n", 1)[1].split("\n## ", 1)[0]
        rows = [line.split(" | ")[0].strip("|` ") for line in body.splitlines() if line.startswith("| `")]
        assert rows == [f for f in model.model_fields if f"{path}.{f}" not in FROM_GENERATION], path
    assert "| `temperature` |" in text.split("## `generation`\n", 1)[1].split("\n## ", 1)[0]


class _Inner(BaseModel):
    """An inner section."""

    rate: float = Field(0.5, gt=0, le=1, description="a share | with a pipe")


class _Outer(BaseModel):
    mode: Literal["a", "b"] = Field("a", description="which one")
    items: list[_Inner] = Field(default_factory=list, min_length=1, description="inner sections")
    by_name: dict[str, _Inner] = Field(default_factory=dict, description="named inner sections")
    plain: int | None = None


def test_rows_show_type_default_and_rules_and_missing_descriptions_are_found():
    gen = _generator()
    outer = gen.table("", _Outer)
    assert '| `mode` | "a" \\| "b" | `"a"` | one of `"a"`, `"b"` | which one |' in outer
    assert "| `items` | list[_Inner] ([`items[]`](#items)) | `[]` | length >= 1 | inner sections |" in outer
    assert [p for p, _ in gen.sections(_Outer)] == ["", "items[]", "by_name.<key>"]
    inner = gen.table("items[]", _Inner)
    assert "| `rate` | float | `0.5` | > 0; <= 1 | a share \\| with a pipe |" in inner
    assert gen.undescribed(_Outer) == ["plain"]


def test_spec_check_prints_every_section_in_full_as_the_stages_see_it(toy_spec, capsys):
    import yaml

    from rlvrflow.flows.cli import main
    from rlvrflow.flows.spec import load_spec

    long_params = {"note": "x" * 400}
    text = toy_spec.read_text().replace("verifier: math}", f"verifier: math, params: {json.dumps(long_params)}}}")
    toy_spec.write_text(text + "generation: {max_new_tokens: 17}\n")
    assert main(["spec-check", str(toy_spec)]) == 0
    out = capsys.readouterr().out
    head, body = out.split("\n", 1)
    printed = yaml.safe_load(body.rsplit("\n", 2)[0])  # the sections, without the closing pointer line
    spec = load_spec(toy_spec)
    assert list(printed) == [n for n in type(spec).model_fields if n not in ("domain", "description")]
    assert printed == {n: v for n, v in spec.model_dump(mode="json").items() if n in printed}
    assert printed["verifiers"]["rules"][0]["params"] == long_params  # nothing cut short
    assert printed["curriculum"]["max_new_tokens"] == printed["eval"]["max_new_tokens"] == 17  # resolved
    assert head.endswith(f"base_dir {spec.base_dir})") and "docs/spec.md" in out
