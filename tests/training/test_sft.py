"""Cold-start SFT lowers the solution loss, skips rows without a solution (counted), and reuses its output."""

import json
from pathlib import Path

import polars as pl

from rlvrflow.training.sft import _batch_loss, _encode, run_sft, sft_examples


def sft_loss(model_path, train_df, max_length: int = 512) -> float:
    """Mean solution-token NLL of a saved model on `train_df`."""
    import torch

    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.modeling import load_model_and_tokenizer

    dev = torch.device("cpu")
    model, tokenizer = load_model_and_tokenizer(model_path, dev, trainable=False)
    data, _ = _encode(
        tokenizer, sft_examples(train_df)[0], max_length, PromptFormat.for_model_dir(model_path, tokenizer)
    )
    with torch.no_grad():
        return float(_batch_loss(model, data, tokenizer.pad_token_id, dev))


def test_sft_lowers_loss_and_counts_skipped_rows(base_model, sft_model, toy):
    rows = toy.copy_rows(64, 7)
    before, after = sft_loss(base_model, rows), sft_loss(sft_model, rows)
    assert after < 0.5 * before, (before, after)
    stats = json.loads((sft_model / "sft_stats.json").read_text())
    assert stats["rows_in"] == 200 and stats["skipped_empty_solution"] == 0 and stats["steps"] == 40
    lines = (sft_model / "sft_metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["step"] == 39


def test_empty_solutions_are_skipped_and_counted(toy):
    rows = toy.copy_rows(5, 0).with_columns(
        pl.Series("solution", ["Answer: 1", "", "  ", None, "Answer: 2"], dtype=pl.String)
    )
    pairs, skipped = sft_examples(rows)
    assert [s for _, s in pairs] == ["Answer: 1", "Answer: 2"] and skipped == 3


def test_rerun_with_same_inputs_reuses_the_checkpoint(tmp_path, base_model, toy):
    cfg = toy.cfg(sft={"max_steps": 2})
    out = run_sft(base_model, toy.copy_rows(20, 0), cfg, tmp_path / "sft", seed=0)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    run_sft(base_model, toy.copy_rows(20, 0), cfg, tmp_path / "sft", seed=0)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    run_sft(base_model, toy.copy_rows(20, 1), cfg, tmp_path / "sft", seed=0)  # new data: retrain
    assert (out / "model.safetensors").stat().st_mtime_ns != stamp


def test_zero_steps_saves_the_base_weights(tmp_path, base_model, toy):
    import torch
    from transformers import AutoModelForCausalLM

    out = run_sft(base_model, toy.copy_rows(10, 0), toy.cfg(sft={"max_steps": 0}), tmp_path / "s0", seed=0)
    a = AutoModelForCausalLM.from_pretrained(base_model).state_dict()
    b = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_prompts_cut_by_max_length_are_counted_and_warned_about(tmp_path, base_model, toy, caplog):
    """A prompt longer than sft.max_length loses its start in training: say so, with the length that fits."""
    import logging

    long = "Copy 7 " + "and ignore this padding text " * 3 + "\n"
    rows = toy.copy_rows(6, 0).with_columns(pl.Series("prompt", [long] * 2 + ["Copy 1\n"] * 4))
    cfg = toy.cfg(sft={"max_steps": 1, "max_length": 40})
    with caplog.at_level(logging.WARNING, logger="rlvrflow.training"):
        out = run_sft(base_model, rows, cfg, tmp_path / "sft", seed=0)
    stats = json.loads((out / "sft_stats.json").read_text())
    assert stats["prompts_truncated"] == 2 and stats["solutions_truncated"] == 0
    assert stats["longest_prompt_tokens"] > 40
    assert "training.sft.max_length=40 cut the start of 2 of 6 prompts" in caplog.text
    assert stats["longest_pair_tokens"] > stats["longest_prompt_tokens"]
    positions = json.loads((Path(base_model) / "config.json").read_text())["max_position_embeddings"]
    assert stats["longest_pair_tokens"] > positions  # the toy model has fewer positions than the longest row,
    # so the suggestion is the cap (the uncapped message is checked in the next test)
    assert f"Raise training.sft.max_length to at most {positions} (the model's max positions" in caplog.text
    assert "cut the end" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlvrflow.training"):
        run_sft(base_model, rows, toy.cfg(sft={"max_steps": 1, "max_length": 512}), tmp_path / "sft2", seed=0)
    assert "cut the start" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlvrflow.training"):
        out = run_sft(base_model, rows, toy.cfg(sft={"max_steps": 1, "max_length": 8}), tmp_path / "sft3", seed=0)
    assert json.loads((out / "sft_stats.json").read_text())["solutions_truncated"] == 6
    assert "training.sft.max_length=8 cut the end of 6 solutions" in caplog.text


def test_max_length_suggestion_is_capped_at_the_models_positions():
    """Rows longer than the model's positions: the message names the cap instead of an unusable length."""
    from rlvrflow.training.sft import cut_warnings

    cut = {"prompts_truncated": 3, "solutions_truncated": 0, "longest_prompt_tokens": 600, "longest_pair_tokens": 652}

    def text(max_length, max_positions):
        found = cut_warnings(cut, 100, max_length, max_positions=max_positions)
        assert [w["kind"] for w in found] == ["prompts_truncated"]
        return found[0]["message"]

    capped = text(420, 512)
    assert "to at most 512 (the model's max positions; the longest rows need 652" in capped
    assert "to 652" not in capped
    assert "Raise training.sft.max_length to 652 if" in text(420, 1024)
    at_cap = text(512, 512)  # already at the cap: nothing left to raise
    assert "max_length is already at the model's 512 positions (the longest rows need 652)" in at_cap
    assert "Raise" not in at_cap


def test_no_worked_rows_is_a_warning_in_the_stats(tmp_path, base_model, toy):
    """All rows outcome-only: SFT is skipped, and its stats carry the warning with the choices, for report.json."""
    df = toy.copy_rows(2, 0).with_columns(pl.Series("solution", [None, ""], dtype=pl.String))
    out = run_sft(base_model, df, toy.cfg(), tmp_path / "sft", seed=0)
    stats = json.loads((out / "sft_stats.json").read_text())
    assert stats["rows_used"] == 0 and stats["steps"] == 0
    (w,) = stats["warnings"]
    assert w["kind"] == "sft_skipped"
    assert "none of the 2 train rows has a worked solution" in w["message"]
    assert "verifiers.answer_only_targets: true" in w["message"] and "training.model" in w["message"]
