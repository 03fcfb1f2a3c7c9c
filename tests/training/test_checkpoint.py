"""Checkpoints: atomic writes, HF round trip, resume discovery that ignores half-written saves, retention."""

import os

import pytest
import torch

from rlvrflow.training import checkpoint as ck


def _save(run_dir, step, model, tok, score):
    return ck.save_checkpoint(
        run_dir, step, model, tok, {"step": step, "x": torch.tensor([step])}, {"eval": {"pass_at_1_greedy": score}}
    )


@pytest.fixture
def model_and_tok(base_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(base_model), AutoTokenizer.from_pretrained(base_model)


def test_checkpoint_round_trip_with_auto_classes(tmp_path, model_and_tok):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = model_and_tok
    with torch.no_grad():
        next(model.parameters()).add_(0.5)  # differ from the base so the load is really of this save
    path = _save(tmp_path, 3, model, tok, 0.5)
    assert path.name == "step_000003" and (path / "model.safetensors").exists()
    loaded = AutoModelForCausalLM.from_pretrained(path)
    for (n, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), n
    assert AutoTokenizer.from_pretrained(path).get_vocab() == tok.get_vocab()
    assert ck.load_state(path)["x"].item() == 3
    assert ck.read_meta(path) == {"step": 3, "eval": {"pass_at_1_greedy": 0.5}}


def test_half_written_checkpoints_are_ignored_and_cleaned(tmp_path, model_and_tok):
    model, tok = model_and_tok
    _save(tmp_path, 2, model, tok, 0.1)
    (tmp_path / f".tmp-step_000004.{os.getpid() + 1}").mkdir()  # a save killed before its rename
    (tmp_path / "step_000006").mkdir()  # a directory without state.pt is not a checkpoint
    assert ck.latest_checkpoint(tmp_path).name == "step_000002"
    _save(tmp_path, 3, model, tok, 0.1)
    assert not list(tmp_path.glob(".tmp-*"))
    assert [s for s, _ in ck.list_checkpoints(tmp_path)] == [2, 3]


def test_retention_keeps_last_k_and_the_best(tmp_path, model_and_tok):
    model, tok = model_and_tok
    for step, score in [(1, 0.2), (2, 0.9), (3, 0.4), (4, 0.3), (5, 0.5)]:
        _save(tmp_path, step, model, tok, score)
    deleted = ck.apply_retention(tmp_path, keep_last=2, keep_best=True, metric="pass_at_1_greedy")
    assert sorted(p.name for p in deleted) == ["step_000001", "step_000003"]
    assert [s for s, _ in ck.list_checkpoints(tmp_path)] == [2, 4, 5]
    assert ck.best_checkpoint(tmp_path, "pass_at_1_greedy").name == "step_000002"
    ck.apply_retention(tmp_path, keep_last=1, keep_best=False, metric="pass_at_1_greedy")
    assert [s for s, _ in ck.list_checkpoints(tmp_path)] == [5]


def test_rng_capture_restore_replays_draws():
    state = ck.capture_rng()
    a = torch.rand(3)
    ck.restore_rng(state)
    assert torch.equal(torch.rand(3), a)
