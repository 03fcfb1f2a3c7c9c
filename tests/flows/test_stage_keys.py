"""The model stages' cache keys change with every training field that changes their output."""
from __future__ import annotations

import flows.model_stages as ms
from flows.spec import load_spec


class _M:
    digests = {"verified": "v", "train": "t", "eval": "e", "sft": "s", "tiers": "r"}


def _keys(spec, monkeypatch) -> dict[str, str]:
    seen = {}
    monkeypatch.setattr(ms, "build_stage", lambda root, name, key, build, force, **kw: seen.setdefault(name, key))
    ms.sft_stage(spec, None, _M(), _M())
    ms.grpo_stage(spec, None, _M(), _M(), _M())
    return seen


def test_prompt_format_dtype_and_lora_are_in_the_sft_and_grpo_keys(toy_spec, monkeypatch):
    spec = load_spec(toy_spec)
    base = _keys(spec, monkeypatch)
    for update in ({"prompt_format": "chat"}, {"dtype": "bfloat16"}, {"system_prompt": "Be brief."},
                   {"lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj"]}}):
        data = spec.model_dump(mode="json")
        data["training"].update(update)
        changed = _keys(type(spec).model_validate(data), monkeypatch)
        assert changed["sft"] != base["sft"] and changed["grpo"] != base["grpo"], update
