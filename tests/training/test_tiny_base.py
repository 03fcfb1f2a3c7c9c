"""The pretrained tiny base: its generic corpus, the shipped weights, and adapting it to a domain."""

import json
import random
import re
from fractions import Fraction

import pytest
from pydantic import ValidationError

from rlvrflow.training.config import TrainingConfig
from rlvrflow.training.tiny_base import (
    BASE_DIR,
    CALC_PROMPT,
    CUES,
    EN_WORDS,
    adapt_base,
    arithmetic_line,
    base_corpus,
    build_base_model,
    held_out,
    reading_example,
)
from rlvrflow.training.tiny_model import resolve_base_model


def _value(expr: str) -> Fraction:
    """Left-to-right value of a compact expression (`4*12-5`, `200*80%`, `1500/1000`), * and / first."""
    terms = re.findall(r"[+-]?[^+-]+", expr)
    total = Fraction(0)
    for term in terms:
        sign = -1 if term.startswith("-") else 1
        factors = re.split(r"([*/])", term.lstrip("+-"))
        v = Fraction(factors[0].rstrip("%")) / (100 if factors[0].endswith("%") else 1)
        for op, f in zip(factors[1::2], factors[2::2]):
            x = Fraction(f.rstrip("%")) / (100 if f.endswith("%") else 1)
            v = v * x if op == "*" else v / x
        total += sign * v
    return total


def test_every_chain_in_the_corpus_is_true_arithmetic():
    for prompt, reply in base_corpus(3000, seed=0):
        chain = reply.split("\n")[0]
        sides = chain.split("=")
        values = {_value(s) for s in sides}
        assert len(values) == 1, (prompt, reply)  # every side of the chain has the same value
        if prompt != CALC_PROMPT:
            assert Fraction(reply.rsplit(" ", 1)[-1]) == values.pop()


def test_reading_examples_hold_the_chain_numbers_in_order_and_a_cue_per_operation():
    rng = random.Random(3)
    for _ in range(500):
        text, reply = reading_example(rng)
        left = reply.split("=")[0]
        numbers, ops = re.findall(r"\d+", left), re.findall(r"[+*-]", left)
        assert re.findall(r"\d+", text) == numbers
        zh = "答案" in reply
        for op in ops:
            assert any(cue in text for cue in CUES[op][1 if zh else 0])
        words = set(re.findall(r"[a-z]+", text))
        cue_words = {w for op in CUES.values() for cue in op[0] for w in cue.split()}
        assert words <= set(EN_WORDS) | cue_words  # word salad from the generic list, no domain text


def test_corpus_is_seeded_and_half_arithmetic():
    a, b = base_corpus(400, seed=1), base_corpus(400, seed=1)
    assert a == b and a != base_corpus(400, seed=2)
    assert sum(p == CALC_PROMPT for p, _ in a) == 200
    rng = random.Random(0)
    lines = [arithmetic_line(rng) for _ in range(400)]
    for form in (
        r"^\d+\+\d+=\d+$",
        r"^\d+-\d+=\d+$",
        r"^[\d.]+\*[\d.]+=[\d.]+$",  # sums, differences, products
        r"^\d+\*\d+%=[\d.]+$",
        r"^\d+/\d+=[\d.]+$",  # percentages, divisions
        r"^\d+\*\d+[+-]\d+=\d+[+-]\d+=\d+$",
        r"^\d+\*\d+\+\d+\*\d+=\d+\+\d+=\d+$",  # two-step chains
        r"^\d+\+\d+\+\d+=\d+$",  # three-term sums
        r"^\d+\*\d+\+\d+\*\d+\+\d+=\d+\+\d+\+\d+=\d+$",  # three-step chains
        r"^\d+\*\d+\*\d+%=\d+\*\d+%=[\d.]+$",
    ):  # a percentage of a product
        assert any(re.search(form, line) for line in lines), form


def test_held_out_rows_have_a_reference_the_math_verifier_reads_and_skip_the_corpus():
    corpus = base_corpus(20000, seed=0)
    rows = held_out(200, seed=0, corpus=corpus)
    seen = {p + r for p, r in corpus}
    assert not any(r["prompt"] + r["reference"] in seen for r in rows if r["category"] == "calc")
    assert not any(r["prompt"] in {p for p, _ in corpus} for r in rows if r["category"] == "reading")
    # short sums repeat: without the corpus some of the same draw would be lines it holds
    assert any(r["prompt"] + r["reference"] in seen for r in held_out(200, seed=0) if r["category"] == "calc")
    assert {r["category"] for r in rows} == {"calc", "reading"}
    for r in rows:
        assert re.fullmatch(r"-?\d+(\.\d+)?", r["reference"]), r
        if r["category"] == "calc":
            assert r["prompt"].startswith(CALC_PROMPT) and r["prompt"].endswith("=")


@pytest.mark.slow
def test_the_shipped_base_loads_and_does_what_its_card_says():
    """The committed weights: built by `rlvrflow make-model --arch tiny-base` with the default recipe, and
    checked here on fresh held-out rows (not the card's own figures)."""
    import polars as pl

    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.eval import evaluate

    card = json.loads((BASE_DIR / "rlvrflow_model.json").read_text())
    assert card["kind"] == "embedded-tiny-base" and card["recipe"]["steps"] == 20000
    assert min(card["held_out_greedy"].values()) >= 0.8  # 94% calc, 81% reading as built
    rows = held_out(120, seed=7, corpus=base_corpus(card["recipe"]["corpus_size"], card["recipe"]["seed"]))
    df = pl.DataFrame(
        [{**r, "solution": None, "verifier": "math", "verifier_params": "{}", "split": "eval"} for r in rows]
    )
    m = evaluate(BASE_DIR, df, EvalConfig(k=1, n_samples=1, max_new_tokens=40, max_prompts=len(rows)), 0, device="cpu")
    by = {k: v["pass_at_1_greedy"] for k, v in m["per_category"].items()}
    assert by["calc"] >= 0.75 and by["reading"] >= 0.75, by  # 92% and 80% as built (a random model: ~0)


def test_adapt_adds_the_domain_characters_and_keeps_what_the_base_learned(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = ["顾客退回4个陶瓷杯，单价12元，应退款多少元？", "4*12=48\n答案: 48", "Refund: 3 x mug ü"]
    out = adapt_base(BASE_DIR, texts, tmp_path / "a", seed=0)
    base_tok, tok = AutoTokenizer.from_pretrained(BASE_DIR), AutoTokenizer.from_pretrained(out)
    new = {ch for t in texts for ch in t} - set(base_tok.get_vocab())
    assert new and new <= set(tok.get_vocab())
    assert all(tok.get_vocab()[k] == v for k, v in base_tok.get_vocab().items())  # old ids unchanged
    assert tok.unk_token_id not in tok(texts[0]).input_ids
    base, model = AutoModelForCausalLM.from_pretrained(BASE_DIR), AutoModelForCausalLM.from_pretrained(out)
    n = len(base_tok)
    emb = model.get_input_embeddings().weight
    assert emb.shape[0] == len(tok) and model.lm_head.weight.data_ptr() == emb.data_ptr()  # still tied
    assert torch.equal(emb[:n], base.get_input_embeddings().weight)
    assert torch.equal(model.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight)
    card = json.loads((out / "rlvrflow_model.json").read_text())
    assert card["characters_added"] == len(new) and card["kind"] == "embedded-tiny-base-adapted"
    # reused when nothing changed; the same seed gives the same new rows
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert adapt_base(BASE_DIR, texts, tmp_path / "a", seed=0) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    again = AutoModelForCausalLM.from_pretrained(adapt_base(BASE_DIR, texts, tmp_path / "b", seed=0))
    assert torch.equal(again.get_input_embeddings().weight, emb)


def test_a_rebuilt_base_is_another_model_for_adapt_and_for_the_stage_keys(tmp_path):
    """Another build of the base with the same card (a new torch, another machine) must not reuse the
    model adapted from the old one, and must change the run's model identity (flows.stage_calls)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from rlvrflow.training.tiny_base import base_digest

    other = tmp_path / "other_base"
    shutil.copytree(BASE_DIR, other)
    model = AutoModelForCausalLM.from_pretrained(other)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.5)
    model.save_pretrained(other)
    assert base_digest(other) != base_digest(BASE_DIR)
    texts = ["退货 ü"]
    first = AutoModelForCausalLM.from_pretrained(adapt_base(BASE_DIR, texts, tmp_path / "a"))
    second = AutoModelForCausalLM.from_pretrained(adapt_base(other, texts, tmp_path / "a"))
    assert torch.equal(second.model.norm.weight, first.model.norm.weight * 0.5)


def test_the_code_digest_leaves_assets_out(tmp_path):
    from rlvrflow.flows.cache import tree_digest

    (tmp_path / "assets").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "assets" / "card.json").write_text("{}")
    before = tree_digest(tmp_path, {".py", ".json"}, frozenset({"assets"}))
    (tmp_path / "assets" / "card.json").write_text('{"steps": 1}')
    assert tree_digest(tmp_path, {".py", ".json"}, frozenset({"assets"})) == before
    assert tree_digest(tmp_path, {".py", ".json"}) != tree_digest(tmp_path, {".py", ".json"}, frozenset({"assets"}))
    (tmp_path / "a.py").write_text("x = 2\n")
    assert tree_digest(tmp_path, {".py", ".json"}, frozenset({"assets"})) != before


def test_make_model_tiny_base_refuses_what_it_does_not_use(tmp_path, capsys):
    from rlvrflow.flows.cli import main

    out = str(tmp_path / "b")
    assert main(["make-model", "--arch", "tiny-base", "--out", out, "--vocab-size", "100"]) == 2
    assert main(["make-model", "--arch", "tiny-base", "--out", out, "--corpus", str(tmp_path)]) == 2
    assert main(["make-model", "--arch", "tiny-base", "--out", out, "--steps", "0"]) == 2
    assert main(["make-model", "--arch", "qwen2", "--out", out, "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert "--vocab-size" in err and "--corpus" in err and "--steps 0" in err and "qwen2 builds" in err
    assert not (tmp_path / "b").exists()


def test_embedded_base_through_resolve_base_model(tmp_path):
    from transformers import AutoTokenizer

    cfg = TrainingConfig(model="embedded-base")
    assert cfg.is_embedded
    out = resolve_base_model(cfg, ["退货费 ü"], tmp_path / "base", seed=0)
    assert {"退", "货", "费", "ü"} <= set(AutoTokenizer.from_pretrained(out).get_vocab())


def test_embedded_base_refuses_other_dimensions():
    with pytest.raises(ValidationError, match="remove training.tiny"):
        TrainingConfig.model_validate({"model": "embedded-base", "tiny": {"num_layers": 3}})
    TrainingConfig.model_validate({"model": "embedded", "tiny": {"num_layers": 3}})
    # a spec dumped whole and read back (overrides do that) carries the default or the base's dimensions
    for dims in ({}, {"num_layers": 2}):
        assert TrainingConfig.model_validate({"model": "embedded-base", "tiny": dims}).tiny.num_layers in (2, 4)


def test_build_base_model_small(tmp_path):
    out = build_base_model(tmp_path / "b", steps=3, corpus_size=200, check_rows=10)
    card = json.loads((out / "rlvrflow_model.json").read_text())
    assert card["recipe"]["steps"] == 3 and set(card["held_out_greedy"]) == {"calc", "reading"}
    assert isinstance(card["build_seconds"], int) and card["build_seconds"] >= 0
    assert not (tmp_path / "b.init").exists()
    assert adapt_base(out, ["新字"], tmp_path / "c").is_dir()


def test_a_missing_base_names_the_files_and_the_fix(tmp_path, monkeypatch):
    from pathlib import Path

    from rlvrflow.flows.stage_calls import model_identity
    from rlvrflow.flows.spec import load_spec

    partial = tmp_path / "tiny_base"  # a partial checkout: the config came along, the rest did not
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    monkeypatch.setattr("rlvrflow.training.tiny_base.BASE_DIR", partial)
    spec = load_spec(Path(__file__).resolve().parents[2] / "examples/retail/spec.yaml")
    with pytest.raises(FileNotFoundError) as err:
        model_identity(spec)  # the first thing a run asks of the base (its stage keys)
    msg = str(err.value)
    assert (
        "embedded-base" in msg
        and "lacks model.safetensors, tokenizer.json, tokenizer_config.json, rlvrflow_model.json." in msg
    )
    assert "make-model --arch tiny-base" in msg and "reinstall rlvrflow" in msg
    with pytest.raises(FileNotFoundError, match="lacks model.safetensors"):
        adapt_base(partial, ["abc"], tmp_path / "adapted")
