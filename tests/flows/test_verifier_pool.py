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
