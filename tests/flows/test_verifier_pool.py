"""The one verifier-pool section: `verifiers.workers` and `verifiers.timeout_s` each change what the
pipeline's main path does (the attach stage through the stage runner, as `rlvrflow run` runs it)."""

from __future__ import annotations

import textwrap

import polars as pl
import pytest

from rlvrflow.flows import stages
from rlvrflow.flows.spec import load_spec
from rlvrflow.verifiers import pool

SLOW_PLUGIN = textwrap.dedent('''
    """A verifier that takes 6 s: what verifiers.timeout_s exists for."""
    import time

    from rlvrflow.verifiers.verdict import Verdict


    def slow_math(response, reference, params):
        time.sleep(6)
        ok = response.strip().endswith(reference.strip())
        return Verdict(float(ok), "correct" if ok else "wrong", response[-8:], "slow check")
''')


def _spec(toy_spec, tmp_path, monkeypatch, verifier: str, **fields):
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    (tmp_path / "plugins").mkdir(exist_ok=True)
    (tmp_path / "plugins" / "verifier_pool_slow_plugin.py").write_text(SLOW_PLUGIN)
    extra = "".join(f"\n  {k}: {v}" for k, v in fields.items())
    text = toy_spec.read_text().replace("verifier: math}", f"verifier: '{verifier}'}}")
    text = text.replace("verifiers:\n", f"verifiers:\n  canaries: {{enabled: false}}{extra}\n")
    path = toy_spec.with_name(f"spec-{len(list(toy_spec.parent.glob('spec-*.yaml')))}.yaml")
    path.write_text(text)
    return load_spec(path)


def _attach(spec, root):
    return stages.run("attach", spec, root, {"prepare": stages.run("prepare", spec, root, {})}, echo=None)


def test_verifiers_workers_sizes_the_pool_the_attach_stage_uses(toy_spec, tmp_path, monkeypatch):
    for workers in (1, 2):
        spec = _spec(toy_spec, tmp_path, monkeypatch, "math", workers=workers)
        m = _attach(spec, tmp_path / f"root-{workers}")
        assert m.stats["rows_kept"] == 40
        assert pool._POOL is not None and pool._POOL.n == workers


@pytest.mark.slow
def test_verifiers_timeout_s_decides_whether_a_slow_verifier_passes_attach(toy_spec, tmp_path, monkeypatch):
    raw = toy_spec.parent / "raw" / "part-0.jsonl"
    raw.write_text("\n".join(raw.read_text().splitlines()[:2]) + "\n")  # two rows, 6 s each, in parallel
    # attach allows a self-check at least 5 s (verifiers/attaching.py), so 1 s means 5 s here: still too short
    spec = _spec(toy_spec, tmp_path, monkeypatch, "verifier_pool_slow_plugin:slow_math", workers=2, timeout_s=1)
    short = _attach(spec, tmp_path / "short")
    assert short.stats["rows_kept"] == 0 and short.stats["rejected_by_reason"] == {"reference_self_check": 2}
    details = pl.read_parquet(short.path("rejects"))["detail"].to_list()
    assert all(d.startswith("timeout") for d in details), details

    spec = _spec(toy_spec, tmp_path, monkeypatch, "verifier_pool_slow_plugin:slow_math", workers=2, timeout_s=10)
    long = _attach(spec, tmp_path / "long")
    assert long.stats["rows_kept"] == 2 and long.key != short.key


def test_one_workers_reaches_every_stages_verifier_pool(toy_spec, tmp_path, monkeypatch):
    """Each stage's library call gets verifiers.workers as its pool size: attach, its canaries, tiering,
    GRPO, DPO and evaluate (its models and the constant baseline). The libraries are stubbed to record it."""
    import json

    from rlvrflow.curriculum import tiering
    from rlvrflow.engines import factory
    from rlvrflow.flows import stage_calls
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data
    from rlvrflow.training import baseline, dpo, dpo_data, eval as eval_lib, grpo
    from rlvrflow.verifiers import attaching, canary

    seen: dict[str, object] = {}

    def record(name, result):
        def call(*args, workers="missing", **kwargs):
            seen[name] = workers
            return result

        return call

    rows = pl.DataFrame(
        {
            "id": ["a"],
            "prompt": ["1+1?"],
            "reference": ["2"],
            "category": ["arithmetic"],
            "verifier": ["math"],
            "verifier_params": ["{}"],
            "split": ["train"],
        }
    )
    path = tmp_path / "rows.parquet"
    rows.write_parquet(path)
    monkeypatch.setattr(attaching, "attach", record("attach", (rows, rows.head(0), {})))
    monkeypatch.setattr(canary, "probe", record("canaries", {"ok": True, "rules": [], "max_share": 0.01}))
    monkeypatch.setattr(canary, "prior_probe", record("priors", []))
    monkeypatch.setattr(tiering, "default_score_fn", lambda workers, timeout_s: seen.setdefault("tier", workers))
    monkeypatch.setattr(tiering, "tier_with_rollouts", lambda *a, **k: (rows, rows))
    monkeypatch.setattr(factory, "make_engine", lambda *a, **k: None)
    monkeypatch.setattr(factory, "release", lambda engine: None)
    monkeypatch.setattr(grpo, "train_grpo", record("grpo", {}))
    monkeypatch.setattr(
        dpo_data,
        "build_pairs",
        lambda *a: ([{"prompt": "p", "chosen": "c", "rejected": "r"}], {"rejected_by_reason": {}}),
    )
    monkeypatch.setattr(dpo, "train_dpo", record("dpo", {}))
    monkeypatch.setattr(eval_lib, "eval_engine", lambda *a: None)
    monkeypatch.setattr(eval_lib, "evaluate", record("evaluate", {}))
    monkeypatch.setattr(baseline, "constant_baseline", record("constant", {}))

    spec = load_spec(toy_spec)
    data = spec_data(spec)
    data["verifiers"]["workers"] = 3
    none = tmp_path / "episodes.parquet"  # split's episodes.parquet of a spec without an environment: empty
    rows.head(0).with_columns(pl.lit("train").alias("split")).write_parquet(none)
    files = {"rows": str(path), "train": str(path), "eval": str(path), "model": str(tmp_path), "rollouts": str(path)}
    files["episodes"] = str(none)
    inputs = {name: files for name in ("prepare", "attach", "split", "sft", "tier")}

    def job(name, item=None):
        out = tmp_path / name
        out.mkdir(exist_ok=True)
        return Job(name, json.dumps(data), str(spec.base_dir), str(tmp_path), str(out), inputs, item)

    stage_calls.attach(job("attach", {"offset": 0, "rows": 1}))
    rows.write_parquet(tmp_path / "attach" / "attach.parquet")
    stage_calls.attach_canaries(job("attach"), {})
    stage_calls.tier(job("tier", {"ids": ["a"]}))
    stage_calls.grpo(job("grpo"))
    stage_calls.dpo(job("dpo"))
    stage_calls.measure_model(job("evaluate").spec, "sft", str(tmp_path), rows, tmp_path / "s.jsonl")
    assert seen == {name: 3 for name in ("attach", "canaries", "priors", "tier", "grpo", "dpo", "evaluate")}
