"""DPO: the loss by hand, batches, encoding like SFT, resume, LoRA + chat, and learning from tiering's samples."""

import json
import math
import shutil

import pytest
import torch

from rlvrflow.training.config import EvalConfig
from rlvrflow.training.dpo import batch_indices, dpo_loss, encode_pairs, train_dpo

EVAL = EvalConfig(k=1, n_samples=4, max_new_tokens=8)


def test_dpo_loss_matches_hand_computed_numbers():
    pc = torch.tensor([-1.0, -2.0], requires_grad=True)
    pr = torch.tensor([-3.0, -1.0])
    ref_c, ref_r = torch.tensor([-2.0, -2.0]), torch.tensor([-2.0, -2.0])
    loss, st = dpo_loss(pc, pr, ref_c, ref_r, beta=0.5)
    # pair 1: 0.5 * ((-1 + 2) - (-3 + 2)) = 1.0; pair 2: 0.5 * ((-2 + 2) - (-1 + 2)) = -0.5
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 2
    assert loss.item() == pytest.approx(expected) == pytest.approx(0.6436693)
    assert st == pytest.approx({"reward_chosen": 0.25, "reward_rejected": 0.0, "margin": 0.25, "accuracy": 0.5})
    loss.backward()
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    # d/d pc_i of -log sigmoid(m_i) / B = -beta * sigmoid(-m_i) / B
    assert pc.grad.tolist() == pytest.approx([-0.5 * sig(-1.0) / 2, -0.5 * sig(0.5) / 2])


def test_equal_policy_and_reference_give_log_2():
    x = torch.tensor([-4.0, -7.5, -1.0])
    loss, st = dpo_loss(x, x - 1, x, x - 1, beta=0.1)
    assert loss.item() == pytest.approx(math.log(2)) and st["accuracy"] == 0.0


def test_batches_visit_every_pair_once_per_epoch_and_repeat_by_seed():
    epoch = [i for s in range(5) for i in batch_indices(10, 2, s, seed=1)]
    assert sorted(epoch) == list(range(10))
    assert epoch != list(range(10))
    assert batch_indices(10, 4, 2, seed=1) == [epoch[8], epoch[9]] + batch_indices(10, 4, 2, seed=1)[2:]
    assert batch_indices(10, 3, 7, 1) == batch_indices(10, 3, 7, 1) != batch_indices(10, 3, 7, 2)


def test_pairs_encode_like_sft_and_end_only_where_the_sample_ended(base_model):
    from transformers import AutoTokenizer

    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.modeling import encode_completion

    tok = AutoTokenizer.from_pretrained(base_model)
    fmt = PromptFormat()
    pairs = [{"prompt": "Copy 3\n", "chosen": "Answer: 3", "rejected": "Answer: 33333", "rejected_finish": "length"}]
    ((p, c, r),) = encode_pairs(tok, pairs, fmt, max_length=64)[0]
    assert p == fmt.encode(tok, "Copy 3\n")
    assert c == encode_completion(tok, "Answer: 3", add_eos=True)  # SFT's target: text + EOS
    assert r == encode_completion(tok, "Answer: 33333", add_eos=False)  # cut off by the length cap: no EOS
    ((p2, c2, r2),) = encode_pairs(tok, pairs, fmt, max_length=12)[0]
    assert len(p2) + max(len(c2), len(r2)) <= 12 and p2 == p[-len(p2) :]


def _pairs(n: int) -> list[dict]:
    return [
        {"prompt": f"Copy {d}\n", "chosen": f"Answer: {d}", "rejected": f"Answer: {(d + 3) % 10}"} for d in range(n)
    ]


def test_resume_from_a_checkpoint_matches_the_uninterrupted_run(sft_model, toy, tmp_path):
    from safetensors.torch import load_file

    cfg = toy.cfg(
        algorithm="dpo",
        dpo={"max_steps": 4, "learning_rate": 3e-3, "batch_size": 4, "warmup_steps": 0},
        checkpoint={"every": 2, "keep_last": 3},
    )
    eval_rows = toy.copy_rows(4, 3, split="eval")
    straight = train_dpo(sft_model, _pairs(6), cfg, eval_rows, EVAL, tmp_path / "a", seed=0)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "b" / "step_000004")  # as if killed after the step-2 checkpoint
    resumed = train_dpo(sft_model, _pairs(6), cfg, eval_rows, EVAL, tmp_path / "b", seed=0)
    a, b = (load_file(tmp_path / d / "step_000004" / "model.safetensors") for d in "ab")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed["evals"] == straight["evals"] and [e["step"] for e in straight["evals"]] == [0, 2, 4]
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4]
    assert (tmp_path / "a" / "metrics.jsonl").read_text().splitlines() == lines
    step = tmp_path / "a" / "step_000004"
    assert {"meta.json", "state.pt", "samples.jsonl", "rlvrflow_prompt.json"} <= {p.name for p in step.iterdir()}
    assert (tmp_path / "a" / "samples" / "step_000000.jsonl").is_file()  # the SFT baseline's samples
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["final_checkpoint"] == str(step)
    # the loop's own eval of that checkpoint, kept whole, is what the evaluate stage would compute anew,
    # in the uninterrupted run and in the resumed one
    from rlvrflow.training.eval import evaluate, read_loop_eval

    fresh = evaluate(step, eval_rows, EVAL, seed=0, device="cpu", samples_path=tmp_path / "fresh.jsonl")
    for run in ("a", "b"):
        kept = read_loop_eval(tmp_path / run, "step_000004")
        assert kept is not None and {"model": str(step), **kept["result"]} == fresh, run
        assert kept["samples"] == (tmp_path / "fresh.jsonl").read_text(encoding="utf-8"), run
    baseline = read_loop_eval(tmp_path / "a", "sft")  # step 0: the model DPO started from
    assert baseline is not None and {"model": str(sft_model), **baseline["result"]} == evaluate(
        sft_model, eval_rows, EVAL, seed=0, device="cpu"
    )


def test_retention_removes_a_deleted_checkpoints_kept_eval(sft_model, toy, tmp_path):
    cfg = toy.cfg(
        algorithm="dpo",
        dpo={"max_steps": 4, "learning_rate": 3e-3, "batch_size": 4, "warmup_steps": 0},
        checkpoint={"every": 2, "keep_last": 1},
    )
    train_dpo(sft_model, _pairs(6), cfg, toy.copy_rows(4, 3, split="eval"), EVAL, tmp_path, seed=0)
    assert not (tmp_path / "step_000002").exists() and (tmp_path / "step_000004").is_dir()
    assert sorted(p.name for p in (tmp_path / "evals").iterdir()) == ["step_000000.json", "step_000004.json"]


def test_reference_cache_is_not_reused_when_sft_is_retrained_into_the_same_folder(sft_model, toy, tmp_path):
    """The cached reference log-probs belong to one set of SFT weights, not to a folder name."""
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.dpo import REFERENCE_FILE, _data_key, _load_reference
    from rlvrflow.training.modeling import load_model_and_tokenizer

    sft = tmp_path / "sft"
    shutil.copytree(sft_model, sft)
    cfg = toy.cfg(algorithm="dpo", dpo={"max_steps": 1, "batch_size": 3})
    cpu = torch.device("cpu")

    def reference():
        model, tok = load_model_and_tokenizer(sft, cpu, trainable=False)
        data, _ = encode_pairs(tok, _pairs(3), PromptFormat(), 64)
        return model, _load_reference(
            tmp_path / "out",
            _data_key(sft, data, cfg),
            model,
            sft,
            False,
            data,
            tok.pad_token_id,
            cpu,
            torch.float32,
            cfg,
        )

    (tmp_path / "out").mkdir()
    model, first = reference()
    cached = (tmp_path / "out" / REFERENCE_FILE).stat().st_mtime_ns
    assert torch.equal(reference()[1], first)  # same weights: read back from the cache, not rewritten
    assert (tmp_path / "out" / REFERENCE_FILE).stat().st_mtime_ns == cached
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(sft)  # "SFT retrained": new weights, same folder
    _, again = reference()
    assert not torch.allclose(again, first)
    (tmp_path / "out" / REFERENCE_FILE).unlink()  # no cache: computed from the retrained weights
    assert torch.allclose(again, reference()[1], atol=1e-6)


def test_no_pairs_is_an_error_that_says_where_to_look(sft_model, toy, tmp_path):
    with pytest.raises(ValueError, match="rejected_by_reason"):
        train_dpo(sft_model, [], toy.cfg(algorithm="dpo"), toy.copy_rows(2, 3, split="eval"), EVAL, tmp_path, 0)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory, toy):
    from rlvrflow.training.qwen_model import Qwen2Dims, build_qwen2_model

    return build_qwen2_model(
        toy.corpus() * 20, tmp_path_factory.mktemp("qwen") / "model", seed=0, dims=Qwen2Dims(vocab_size=512)
    )


def test_lora_chat_dpo_uses_the_base_as_reference_and_saves_the_adapter(qwen, toy, tmp_path):
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.dpo import REFERENCE_FILE, reference_logps
    from rlvrflow.training.modeling import load_model_and_tokenizer

    cfg = toy.cfg(
        algorithm="dpo",
        prompt_format="chat",
        lora={"r": 4, "alpha": 8},
        dpo={"max_steps": 2, "learning_rate": 1e-2, "batch_size": 3, "max_length": 96},
        checkpoint={"every": 2},
    )
    result = train_dpo(qwen, _pairs(3), cfg, toy.copy_rows(2, 3, split="eval"), EVAL, tmp_path, seed=0)
    assert result["prompt_format"] == "chat" and 0 < result["trainable_params"] < result["total_params"]
    step = tmp_path / "step_000002"
    assert (step / "adapter_config.json").is_file() and not (step / "model.safetensors").exists()
    assert json.loads((step / "rlvrflow_prompt.json").read_text())["kind"] == "chat"
    base, tok = load_model_and_tokenizer(qwen, torch.device("cpu"), trainable=False)
    data, _ = encode_pairs(tok, _pairs(3), PromptFormat("chat"), 96)
    assert data[0][0] == PromptFormat("chat").encode(tok, "Copy 0\n")  # the chat template's user turn
    expected = reference_logps(base, data, tok.pad_token_id, torch.device("cpu"), 3, lambda: torch.no_grad())
    saved = torch.load(tmp_path / REFERENCE_FILE, weights_only=True)["logps"]
    assert torch.allclose(saved, expected, atol=1e-5)  # adapter disabled == the base model


@pytest.mark.slow  # ~45 s alone on one thread (base model, SFT, tiering, DPO), ~11 s beside the other tests
def test_dpo_on_tiering_samples_raises_held_out_pass_at_1_over_sft(base_model, toy, tmp_path):
    """SFT on noisy demonstrations, tier with the SFT model, export pairs, DPO: held-out pass@1 rises."""
    import datasets

    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.curriculum.tiering import tier_to_dir
    from rlvrflow.training.config import DPOConfig
    from rlvrflow.training.dpo_data import export_dpo, read_pairs
    from rlvrflow.training.eval import evaluate, read_samples, samples_markdown
    from rlvrflow.training.sft import run_sft

    digits = (7,)
    sft = run_sft(base_model, toy.copy_rows(200, 1, noise=0.9, digits=digits), toy.cfg(), tmp_path / "sft", seed=0)
    cur = CurriculumConfig(n_samples=8, k=1, max_new_tokens=8)
    tier_to_dir(toy.copy_rows(60, 1, digits=digits), sft, cur, tmp_path / "tier", seed=0, workers=1)
    dpo = DPOConfig(max_steps=20, learning_rate=3e-3, batch_size=8, warmup_steps=0, max_pairs_per_prompt=2)
    stats = export_dpo(tmp_path / "tier", tmp_path / "pairs", dpo, seed=0)
    ds = datasets.load_from_disk(str(tmp_path / "pairs" / "dataset"))
    assert {"prompt", "chosen", "rejected", "chosen_status", "rejected_status"} <= set(ds.column_names)
    assert ds.num_rows == stats["pairs"] >= 10
    assert set(ds["chosen_status"]) == {"correct"} and "correct" not in set(ds["rejected_status"])

    cfg = toy.cfg(algorithm="dpo", dpo=dpo.model_dump(), checkpoint={"every": 20})
    held_out = toy.copy_rows(40, 3, split="eval", digits=digits)
    result = train_dpo(sft, read_pairs(tmp_path / "pairs"), cfg, held_out, EVAL, tmp_path / "dpo", seed=0)
    base, final = result["baseline"], result["final"]
    assert final["pass_at_1_sampled"] > base["pass_at_1_sampled"] + 0.15, (base, final)
    assert final["pass_at_1_greedy"] >= base["pass_at_1_greedy"]
    # the checkpoint reads back through the ordinary eval, with the same numbers as in the loop
    again = evaluate(result["final_checkpoint"], held_out, EVAL, seed=0, device="cpu")
    assert again["pass_at_1_sampled"] == pytest.approx(final["pass_at_1_sampled"])
    md = samples_markdown(
        read_samples(tmp_path / "dpo" / "samples" / "step_000000.jsonl"),
        read_samples(tmp_path / "dpo" / "step_000020" / "samples.jsonl"),
        "sft",
        "step_000020",
    )
    assert "| Copy 7<br> | greedy |" in md
