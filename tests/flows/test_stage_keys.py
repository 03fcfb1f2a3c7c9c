"""The stage table's cache keys: the model stages' keys change with every training field that changes
their output, and every stage's key follows exactly the spec sections its row declares."""

from __future__ import annotations

from rlvrflow.flows.cache import Manifest
from rlvrflow.flows.runner import stage_key_of
from rlvrflow.flows.spec import load_spec, spec_data, spec_from_dict
from rlvrflow.flows.stages import STAGES


def _m(name: str) -> Manifest:
    outputs = {
        "rows": "r",
        "train": "t",
        "eval": "e",
        "episodes": "ep",
        "model": "m",
        "summary": "s",
        "rollouts": "o",
        "stats": "st",
        "matrix": "mx",
        "profile": "p",
    }
    return Manifest(name, "k", None, outputs, {k: f"{name}-{k}" for k in outputs})


# the registry's champion and its data profile feed the drift and compare stages
UPSTREAM = {
    name: _m(name)
    for name in ("prepare", "attach", "split", "sft", "tier", "grpo", "evaluate", "champion", "champion_data")
}


def _keys(spec) -> dict[str, str]:
    return {name: stage_key_of(STAGES[name], spec, UPSTREAM) for name in ("sft", "grpo")}


def _with(spec, section: str, update: dict):
    data = spec_data(spec)  # the spec less what generation.* fills in, as --set overrides edit it
    data[section].update(update)
    return type(spec).model_validate(data)


def test_prompt_format_dtype_and_lora_are_in_the_sft_and_grpo_keys(toy_spec):
    spec = load_spec(toy_spec)
    base = _keys(spec)
    for update in (
        {"prompt_format": "chat"},
        {"dtype": "bfloat16"},
        {"system_prompt": "Be brief."},
        {"lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj"]}},
    ):
        changed = _keys(_with(spec, "training", update))
        assert changed["sft"] != base["sft"] and changed["grpo"] != base["grpo"], update


def test_verifier_timeout_is_in_the_attach_and_tier_keys_and_pool_size_in_none(toy_spec):
    spec = load_spec(toy_spec)
    other_timeout = _with(spec, "verifiers", {"timeout_s": 3.0})
    other_workers = _with(spec, "verifiers", {"workers": 1})
    for name in ("attach", "tier"):
        base = stage_key_of(STAGES[name], spec, UPSTREAM)
        assert stage_key_of(STAGES[name], other_timeout, UPSTREAM) != base, name
        assert stage_key_of(STAGES[name], other_workers, UPSTREAM) == base, name  # same verdicts, any pool


def test_every_declared_input_changes_the_key(toy_spec):
    spec = load_spec(toy_spec)
    for stage in STAGES.values():
        for ref in stage.inputs:
            name, output = ref.split(".", 1)
            moved = dict(UPSTREAM)
            changed = _m(name)
            moved[name] = Manifest(name, "k", None, changed.outputs, {**changed.digests, output: "other"})
            if stage.name in ("evaluate",):
                continue  # its extra key reads model folders on disk (tested end to end in test_cli)
            assert stage_key_of(stage, spec, moved) != stage_key_of(stage, spec, UPSTREAM), (stage.name, ref)


def test_a_file_the_verifiers_read_is_in_every_scoring_stage_key(toy_spec):
    """The rows carry only a database's path: a changed database must rebuild tiering and training too,
    not only attach (the same rows can pass attach's self-check against both versions)."""
    db = toy_spec.parent / "facts.db"
    db.write_bytes(b"version 1")
    data = spec_data(load_spec(toy_spec))
    data["verifiers"]["rules"][0]["params"] = {"database": "facts.db"}
    spec = spec_from_dict(data, toy_spec.parent)
    before = {name: stage_key_of(STAGES[name], spec, UPSTREAM) for name in ("attach", "tier", "grpo", "dpo")}
    db.write_bytes(b"version 2")
    after = {name: stage_key_of(STAGES[name], spec, UPSTREAM) for name in ("attach", "tier", "grpo", "dpo")}
    assert all(before[n] != after[n] for n in before), (before, after)


def _with_environment(toy_spec):
    """(the environment's database, the toy spec with a `desk` category on it): version 1 of the file."""
    db = toy_spec.parent / "shop.db"
    db.write_bytes(b"version 1")
    data = spec_data(load_spec(toy_spec))
    env = {
        "database": "shop.db",
        "tools": [{"name": "look", "description": "d", "parameters": {"type": "object"}, "sql": "SELECT 1"}],
        "outcome": {"query": "SELECT 1"},
    }
    data["verifiers"]["rules"].append({"category": "desk", "environment": env})
    return db, spec_from_dict(data, toy_spec.parent)


def test_the_evaluate_key_covers_the_held_out_episodes_and_the_environment_database(toy_spec, tmp_path):
    """Evaluate scores the episodes split set aside against the environment's database: either changing
    must evaluate again (the rows carry only the database's path)."""
    import polars as pl

    db, spec = _with_environment(toy_spec)
    sft = tmp_path / "sft"
    sft.mkdir()
    pl.DataFrame({"x": [1]}).write_parquet(sft / "model.parquet")
    upstream = {
        **UPSTREAM,
        "sft": Manifest("sft", "k", sft, {"model": "."}, {"model": "m"}),
        "policy": Manifest("grpo", "k", tmp_path / "grpo", {"summary": "s"}, {"summary": "s"}),
    }
    evaluate = STAGES["evaluate"]
    before = stage_key_of(evaluate, spec, upstream)
    split = upstream["split"]
    moved = {**upstream, "split": Manifest("split", "k", None, split.outputs, {**split.digests, "episodes": "other"})}
    assert stage_key_of(evaluate, spec, moved) != before
    db.write_bytes(b"version 2")
    assert stage_key_of(evaluate, spec, upstream) != before


def test_training_episodes_is_in_the_sft_and_tier_keys(toy_spec):
    """Whether the episode rows are trained on changes SFT's data and tiering's pool."""
    spec = load_spec(toy_spec)
    off = _with(spec, "training", {"episodes": False})
    for name in ("sft", "tier"):
        assert stage_key_of(STAGES[name], off, UPSTREAM) != stage_key_of(STAGES[name], spec, UPSTREAM), name


def test_the_sft_key_covers_the_environment_database_and_both_keys_the_episode_code(toy_spec):
    """SFT trains on the tool results its replay of the worked transcripts gets from the environment's
    database, and tiering plays episodes with training/episodes.py: a new database must train SFT again,
    and each key must follow the code that makes its output."""
    db, spec = _with_environment(toy_spec)
    sft = stage_key_of(STAGES["sft"], spec, UPSTREAM)
    db.write_bytes(b"version 2")
    assert stage_key_of(STAGES["sft"], spec, UPSTREAM) != sft
    assert "code:verifiers" in sft.parts
    assert "code:training" in stage_key_of(STAGES["tier"], spec, UPSTREAM).parts


def test_the_tier_key_follows_what_tiering_reads_and_the_grpo_key_every_curriculum_field(toy_spec):
    """A run that changes only how GRPO draws (sampler, weights, window...) reuses the tiers; a change to
    what tiering samples or keeps retiers. GRPO reads the whole curriculum, so its key moves either way."""
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.flows.stages import SAMPLER_ONLY

    assert set(SAMPLER_ONLY) <= set(CurriculumConfig.model_fields)  # a renamed field would stay in the key
    spec = load_spec(toy_spec)
    base = {name: stage_key_of(STAGES[name], spec, UPSTREAM) for name in ("tier", "grpo")}
    drawing_only = (
        {"sampler": "uniform"},
        {"sampler": "adaptive"},
        {"weights": {"learnable": 1.0, "too_hard": 0.2, "too_easy": 0.0}},
        {"dedup_window": 9},
        {"retier_window": 2},
        {"fallback": "tier_first"},
    )
    for update in drawing_only:
        moved = _with(spec, "curriculum", update)
        assert stage_key_of(STAGES["tier"], moved, UPSTREAM) == base["tier"], update
        assert stage_key_of(STAGES["grpo"], moved, UPSTREAM) != base["grpo"], update
    for update in (
        {"n_samples": 3, "k": 2},
        {"max_rows": 7},
        {"boundaries": {"too_hard_max": 0.25, "too_easy_min": 1.0}},
    ):
        assert stage_key_of(STAGES["tier"], _with(spec, "curriculum", update), UPSTREAM) != base["tier"], update
    more_tokens = _with(spec, "generation", {"max_new_tokens": 7})
    assert stage_key_of(STAGES["tier"], more_tokens, UPSTREAM) != base["tier"]
