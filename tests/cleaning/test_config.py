"""The config models: defaults build, unknown keys and bad values fail with a usable message."""

import pytest
from pydantic import ValidationError

from rlvrflow.cleaning import CleaningConfig, SourceSpec, ValidationConfig
from rlvrflow.cleaning.config import TemplateConfig


def test_defaults_build_and_are_frozen():
    cfg = CleaningConfig()
    assert cfg.dedup.threshold == 0.85 and cfg.fix_mojibake and "<|im_end|>" in cfg.special_tokens.all_tokens
    with pytest.raises(ValidationError):
        cfg.latex = False  # type: ignore[misc]
    assert ValidationConfig().min_rows == 1


def test_source_spec_maps_fields_and_lists_paths():
    spec = SourceSpec(
        name="t",
        path="raw/*.jsonl",
        format="jsonl",
        fields={"question": "body", "reference": "answer"},
        defaults={"category": "math"},
    )
    assert spec.paths == ["raw/*.jsonl"] and spec.fields.question == "body" and spec.fields.category == "category"


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"format": "xml"}, "format"),
        ({"encoding": "no-such-codec"}, "encoding"),
        ({"defaults": {"question": "x"}}, "defaults"),
        ({"colour": "red"}, "colour"),
        ({"max_row_bytes": 0}, "max_row_bytes"),
    ],
)
def test_source_spec_rejects_bad_values(bad, where):
    args = {"name": "t", "path": "x.jsonl", "format": "jsonl", **bad}
    with pytest.raises(ValidationError) as info:
        SourceSpec(**args)
    assert where in str(info.value)


def test_template_layout_needs_the_three_placeholders():
    with pytest.raises(ValidationError, match="format_example"):
        TemplateConfig(layout="{question} {requirements}")
    assert TemplateConfig(layout="Q: {question} {{literal}} R: {requirements} F: {format_example}")


def test_field_descriptions_exist_for_every_field():
    from rlvrflow.cleaning import config

    for model in (
        config.SourceSpec,
        config.FieldMap,
        config.WidthConfig,
        config.SpecialTokensConfig,
        config.TemplatePart,
        config.TemplateConfig,
        config.DedupConfig,
        config.CleaningConfig,
        config.ValidationConfig,
    ):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
