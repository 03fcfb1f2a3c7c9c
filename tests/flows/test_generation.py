"""generation.*: how completions are sampled, set once and resolved into tiering, GRPO and eval (and so
into DPO, which trains on tiering's samples and evaluates with eval) before the stages see the spec."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlvrflow.flows.cache import stage_key
from rlvrflow.flows.common import with_overrides
from rlvrflow.flows.runner import section
from rlvrflow.flows.spec import FROM_GENERATION, GenerationConfig, SpecError, load_spec, spec_data, spec_from_dict
from rlvrflow.flows.stages import STAGES
from rlvrflow.training.config import SFTConfig

RETAIL = Path(__file__).resolve().parents[2] / "examples" / "retail" / "spec.yaml"
GENERATING = ("tier", "grpo", "dpo", "evaluate")


def _sampling(spec, name: str) -> tuple:
    """`name` as tiering, GRPO rollouts and eval read it."""
    return tuple(getattr(cfg, name) for cfg in (spec.curriculum, spec.training.grpo, spec.eval))


def _section_keys(spec) -> dict[str, str]:
    """Each generating stage's key over the spec sections it declares (upstream digests left out)."""
    return {name: str(stage_key(name, {d: section(spec, d) for d in STAGES[name].sections}, [])) for name in GENERATING}


def _retail(**generation) -> dict:
    data = yaml.safe_load(RETAIL.read_text(encoding="utf-8"))
    data.pop("generation", None)
    if generation:
        data["generation"] = generation
    return data


def test_the_retail_spec_sets_its_cap_once():
    spec = load_spec(RETAIL)
    assert _sampling(spec, "max_new_tokens") == (40, 40, 40) and spec.generation.max_new_tokens == 40


@pytest.mark.parametrize(
    ("name", "value"), [("temperature", 0.7), ("top_p", 0.9), ("max_new_tokens", 32), ("episode_max_new_tokens", 200)]
)
def test_each_generation_field_reaches_tiering_grpo_and_eval_and_their_stage_keys(name, value):
    spec = spec_from_dict(_retail(**{name: value}), RETAIL.parent)
    assert _sampling(spec, name) == (value, value, value)
    base = spec_from_dict(_retail(), RETAIL.parent)
    assert _sampling(base, name) == (getattr(GenerationConfig(), name),) * 3
    before, after = _section_keys(base), _section_keys(spec)
    assert all(before[n] != after[n] for n in GENERATING), name  # DPO's too: it evaluates with eval's sampling


@pytest.mark.parametrize("dotted", sorted(FROM_GENERATION))
def test_a_generation_field_written_in_its_section_names_where_it_went(dotted):
    data = _retail()
    *path, leaf = dotted.split(".")
    node = data
    for name in path:
        node = node.setdefault(name, {})
    node[leaf] = 0.5 if leaf != "max_new_tokens" else 16
    with pytest.raises(SpecError) as err:
        spec_from_dict(data, RETAIL.parent)
    assert f"{dotted} is now generation.{leaf}: write generation.{leaf}: {node[leaf]}" in str(err.value)


def test_a_spec_without_the_sections_gets_them_built_from_generation():
    data = _retail(max_new_tokens=12, temperature=0.8)
    del data["curriculum"], data["eval"]
    data["training"] = {"seed": 3}
    spec = spec_from_dict(data, RETAIL.parent)
    assert _sampling(spec, "max_new_tokens") == (12, 12, 12) and _sampling(spec, "temperature") == (0.8,) * 3
    assert spec.training.seed == 3 and spec.training.sft == SFTConfig()


@pytest.mark.parametrize(
    ("name", "bad"), [("max_new_tokens", 0), ("max_new_tokens", "long"), ("temperature", 0), ("top_p", 1.5)]
)
def test_a_bad_generation_value_is_reported_where_it_was_written(name, bad):
    with pytest.raises(SpecError) as err:
        spec_from_dict(_retail(**{name: bad}), RETAIL.parent)
    assert f"generation.{name}" in str(err.value)
    assert f"curriculum.{name}" not in str(err.value).split("fix:")[0]


def test_spec_data_round_trips_and_an_override_of_generation_reaches_the_sections_again():
    spec = spec_from_dict(_retail(max_new_tokens=40), RETAIL.parent)
    assert spec_from_dict(spec_data(spec), RETAIL.parent) == spec
    assert "temperature" not in spec_data(spec)["curriculum"]  # filled by generation, so left out again
    changed = with_overrides(spec, {"generation.temperature": 0.6, "generation.max_new_tokens": 32})
    assert _sampling(changed, "temperature") == (0.6,) * 3 and _sampling(changed, "max_new_tokens") == (32,) * 3
    with pytest.raises(SpecError, match="eval.top_p is now generation.top_p"):
        with_overrides(spec, {"eval.top_p": 0.9})
