"""generation.max_new_tokens: set once, resolved into tiering, GRPO and eval before the stages see the spec."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.flows.cache import stage_key
from rlvrflow.flows.runner import section
from rlvrflow.flows.spec import SpecError, load_spec, spec_data, spec_from_dict
from rlvrflow.flows.stages import STAGES
from rlvrflow.training.config import EvalConfig, GRPOConfig, SFTConfig

RETAIL = Path(__file__).resolve().parents[2] / "examples" / "retail" / "spec.yaml"
GENERATING = ("tier", "grpo", "dpo", "evaluate")


def _caps(spec) -> tuple[int, int, int]:
    return spec.curriculum.max_new_tokens, spec.training.grpo.max_new_tokens, spec.eval.max_new_tokens


def _section_keys(spec) -> dict[str, str]:
    """Each generating stage's key over the spec sections it declares (upstream digests left out)."""
    return {name: str(stage_key(name, {d: section(spec, d) for d in STAGES[name].sections}, []))
            for name in GENERATING}


def _retail_without_caps(**generation) -> dict:
    data = yaml.safe_load(RETAIL.read_text(encoding="utf-8"))
    data.pop("generation", None)  # the retail spec sets its one cap there, and none in the sections
    if generation:
        data["generation"] = generation
    return data


def _retail_explicit_caps(value: int) -> dict:
    data = _retail_without_caps()
    data["curriculum"]["max_new_tokens"] = data["training"]["grpo"]["max_new_tokens"] = value
    data["eval"]["max_new_tokens"] = value
    return data


def test_the_retail_spec_keeps_its_caps():
    spec = load_spec(RETAIL)
    assert _caps(spec) == (40, 40, 40) and spec.generation.max_new_tokens == 40


def test_one_shared_value_resolves_into_the_sections_and_their_cache_keys():
    explicit = spec_from_dict(_retail_explicit_caps(40), RETAIL.parent)
    shared = spec_from_dict(_retail_without_caps(max_new_tokens=40), RETAIL.parent)
    assert _caps(shared) == (40, 40, 40)
    assert _section_keys(shared) == _section_keys(explicit)  # the stages cannot tell the two specs apart
    other = spec_from_dict(_retail_without_caps(max_new_tokens=32), RETAIL.parent)
    assert _caps(other) == (32, 32, 32)
    assert all(a != b for a, b in zip(_section_keys(other).values(), _section_keys(shared).values()))


def test_a_section_that_sets_its_own_cap_keeps_it():
    data = _retail_without_caps(max_new_tokens=40)
    data["eval"]["max_new_tokens"] = 64
    data["training"]["grpo"] = {**data["training"]["grpo"], "max_new_tokens": 16}
    assert _caps(spec_from_dict(data, RETAIL.parent)) == (40, 16, 64)


def test_without_generation_each_section_keeps_its_default():
    spec = spec_from_dict(_retail_without_caps(), RETAIL.parent)
    defaults = (CurriculumConfig().max_new_tokens, GRPOConfig().max_new_tokens, EvalConfig().max_new_tokens)
    assert _caps(spec) == defaults


def test_a_spec_without_the_sections_gets_them_built_from_generation():
    data = _retail_without_caps(max_new_tokens=12)
    del data["curriculum"], data["eval"]
    data["training"] = {"seed": 3}
    spec = spec_from_dict(data, RETAIL.parent)
    assert _caps(spec) == (12, 12, 12) and spec.training.seed == 3
    assert spec.training.sft == SFTConfig()


@pytest.mark.parametrize("bad", [0, "long", 2.5])
def test_a_bad_shared_cap_is_reported_where_it_was_written(bad):
    with pytest.raises(SpecError) as err:
        spec_from_dict(_retail_without_caps(max_new_tokens=bad), RETAIL.parent)
    assert "generation.max_new_tokens" in str(err.value)
    assert "curriculum.max_new_tokens" not in str(err.value).split("fix:")[0]


def test_spec_data_round_trips_and_lets_an_override_of_generation_reach_the_sections_again():
    data = _retail_without_caps(max_new_tokens=40)
    data["eval"]["max_new_tokens"] = 64
    spec = spec_from_dict(data, RETAIL.parent)
    assert spec_from_dict(spec_data(spec), RETAIL.parent) == spec
    changed = spec_data(spec)
    changed["generation"]["max_new_tokens"] = 32  # what `--set generation.max_new_tokens=32` does to it
    assert _caps(spec_from_dict(changed, RETAIL.parent)) == (32, 32, 64)  # the spec's own eval cap stays
    explicit = spec_from_dict(_retail_explicit_caps(40), RETAIL.parent)
    assert spec_data(explicit) == explicit.model_dump(mode="json")  # nothing inherited, nothing left out
