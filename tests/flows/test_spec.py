"""load_spec: a valid spec loads with its folder as base_dir; every error names file, field, rule and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvrflow.flows.common import SMOKE_OVERRIDES, load_run_spec, with_overrides
from rlvrflow.flows.spec import SpecError, load_spec


def test_valid_spec_loads_with_base_dir(toy_spec: Path):
    spec = load_spec(toy_spec)
    assert spec.domain == "toy"
    assert spec.base_dir == toy_spec.parent.resolve()
    assert spec.resolve("raw/x.jsonl") == toy_spec.parent.resolve() / "raw" / "x.jsonl"
    assert spec.orchestration.runner == "threads"
    with pytest.raises(Exception):
        spec.domain = "other"  # frozen


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_bad_enum_names_path_rule_and_allowed_values(tmp_path, toy_spec):
    msg = _error(tmp_path, toy_spec.read_text().replace("format: jsonl", "format: xml"))
    assert "bad.yaml" in msg
    assert "sources[0].format" in msg
    assert "'xml'" in msg  # the value seen
    assert "allowed values: 'jsonl', 'csv', 'parquet', 'hf_disk'" in msg


def test_unknown_key_suggests_the_near_name(tmp_path, toy_spec):
    msg = _error(tmp_path, toy_spec.read_text().replace("curriculum:", "curiculum:"))
    assert "curiculum: Extra inputs are not permitted" in msg
    assert "did you mean 'curriculum'" in msg


def test_grpo_fields_carry_trls_names_and_an_old_name_says_the_new_one(tmp_path, toy_spec):
    old = "training:\n  grpo: {group_size: 4, eps_high: 0.3, std_normalize: false}\n"
    msg = _error(tmp_path, toy_spec.read_text() + old)
    assert "training.grpo" in msg and "group_size is now num_generations: write num_generations: 4" in msg
    assert "eps_high is now epsilon_high" in msg and "write scale_rewards: none" in msg
    path = tmp_path / "new.yaml"
    path.write_text(
        toy_spec.read_text() + "training:\n  grpo: {num_generations: 4, epsilon_high: 0.3, "
        "scale_rewards: false, mask_truncated_completions: true}\n"
    )
    g = load_spec(path).training.grpo
    assert (g.num_generations, g.epsilon_high, g.scale_rewards, g.mask_truncated_completions) == (4, 0.3, "none", True)


@pytest.mark.parametrize("section", ["sft", "dpo", "grpo"])
def test_sft_dpo_and_grpo_carry_trls_training_argument_names(tmp_path, toy_spec, section):
    old = f"training:\n  {section}: {{steps: 7, lr: 0.001, log_every: 3}}\n"
    msg = _error(tmp_path, toy_spec.read_text() + old)
    for line in (
        "steps is now max_steps: write max_steps: 7",
        "lr is now learning_rate: write learning_rate: 0.001",
        "log_every is now logging_steps: write logging_steps: 3",
    ):
        assert f"training.{section}: {line}" in msg
    path = tmp_path / "new.yaml"
    path.write_text(
        toy_spec.read_text() + f"training:\n  {section}: {{max_steps: 7, learning_rate: 0.001, logging_steps: 3}}\n"
    )
    cfg = getattr(load_spec(path).training, section)
    assert (cfg.max_steps, cfg.learning_rate, cfg.logging_steps) == (7, 0.001, 3)


def test_grpos_iterations_and_accumulation_carry_trls_names(tmp_path, toy_spec):
    msg = _error(tmp_path, toy_spec.read_text() + "training:\n  grpo: {updates_per_batch: 2, grad_accum: 4}\n")
    assert "updates_per_batch is now num_iterations: write num_iterations: 2" in msg
    assert "grad_accum is now gradient_accumulation_steps: write gradient_accumulation_steps: 4" in msg


@pytest.mark.parametrize(
    ("section", "old", "line"),
    [
        (
            "training:\n  grpo:\n",
            "    reward_workers: 3\n",
            "training.grpo: reward_workers is now verifiers.workers: write verifiers.workers: 3",
        ),
        ("eval:\n", "  workers: 3\n", "eval: workers is now verifiers.workers: write verifiers.workers: 3"),
        ("orchestration:\n", "  workers: 3\n", "orchestration: workers is now task_workers: write task_workers: 3"),
    ],
)
def test_an_old_worker_count_names_the_one_it_became(tmp_path, toy_spec, section, old, line):
    text = toy_spec.read_text()
    text = text.replace(section, section + old) if section in text else text + section + old
    assert line in _error(tmp_path, text)


def test_dpo_is_not_validated_against_grpos_backend(tmp_path, toy_spec):
    path = tmp_path / "dpo.yaml"
    path.write_text(toy_spec.read_text() + "training: {algorithm: dpo, grpo: {backend: deepspeed}}\n")
    assert load_spec(path).training.algorithm == "dpo"  # GRPO's DeepSpeed setting does not reach DPO


def test_null_means_all_and_zero_says_so(tmp_path, toy_spec):
    """ "All rows" was 0 in orchestration.max_rows and eval.max_prompts and null in curriculum.max_rows:
    null everywhere now, and a 0 left in an older spec says what to write instead."""
    spec = load_spec(toy_spec)
    assert spec.orchestration.max_rows is None and spec.eval.max_prompts is None and spec.curriculum.max_rows is None
    msg = _error(
        tmp_path,
        toy_spec.read_text().replace("orchestration:\n", "orchestration:\n  max_rows: 0\n")
        + "eval: {max_prompts: 0}\n",
    )
    assert "orchestration.max_rows" in msg and "0 no longer means all rows: write null" in msg
    assert "eval.max_prompts" in msg and "0 no longer means all prompts: write null" in msg


def test_nested_range_error_gives_the_field_description(tmp_path, toy_spec):
    msg = _error(tmp_path, toy_spec.read_text() + "training:\n  sft: {max_steps: -1}\n")
    assert "training.sft.max_steps" in msg and "greater than or equal to 0" in msg
    assert "fix: Optimizer steps" in msg


def test_missing_required_key_says_add_it(tmp_path):
    msg = _error(tmp_path, "domain: toy\n")
    assert "sources: Field required" in msg and "add this key" in msg


def test_yaml_syntax_error_names_the_line(tmp_path):
    msg = _error(tmp_path, "domain: toy\nsources:\n  - {name: a\n  b: 1\n")
    assert "bad.yaml:4:" in msg and "YAML syntax error" in msg


def test_not_a_mapping_and_missing_file(tmp_path):
    assert "must be a YAML mapping" in _error(tmp_path, "- a\n- b\n")
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")


def test_smoke_overrides_validate_and_keep_base_dir(toy_spec):
    spec = load_run_spec(toy_spec, smoke=True, runner="dask")
    assert spec.training.grpo.max_steps == SMOKE_OVERRIDES["training.grpo.max_steps"]
    assert spec.orchestration.runner == "dask"
    assert spec.base_dir == toy_spec.parent.resolve()
    with pytest.raises(SpecError, match="training.sft.max_steps"):
        with_overrides(spec, {"training.sft.max_steps": -5})


def test_caller_overrides_apply_after_the_smoke_budget(toy_spec):
    spec = load_run_spec(toy_spec, smoke=True, overrides={"training.grpo.max_steps": 7, "curriculum.k": 2})
    assert spec.training.grpo.max_steps == 7 and spec.curriculum.k == 2
    assert spec.training.sft.max_steps == SMOKE_OVERRIDES["training.sft.max_steps"]
