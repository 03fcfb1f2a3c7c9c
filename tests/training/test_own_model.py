"""Your own model: the in-project Qwen2 test model, chat templates, bf16 on CPU, LoRA and export.

The model is `rlvrflow make-model`'s (random Qwen2, byte-level BPE trained on the copy task's texts,
ChatML template), small enough that SFT and a few GRPO steps run in seconds on two cores.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from rlvrflow.curriculum import CurriculumConfig
from rlvrflow.engines.hf_engine import HFEngine, PromptFormat, SamplingParams
from rlvrflow.training.config import EvalConfig, TrainingConfig
from rlvrflow.verifiers import RewardConfig

SYSTEM = "You copy digits."
EVAL = EvalConfig(k=1, n_samples=2, max_new_tokens=12)


def _corpus(toy):
    return toy.corpus() * 20 + [SYSTEM] * 5


def _cfg(toy, **over):
    """The toy config with room for chat-rendered prompts (~30 BPE tokens); lr 1e-2 is too high here."""
    sft = {"max_length": 96, "max_steps": 200, "learning_rate": 3e-3, **over.pop("sft", {})}
    return toy.cfg(sft=sft, **over)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory, toy):
    from rlvrflow.training.qwen_model import Qwen2Dims, build_qwen2_model

    return build_qwen2_model(
        _corpus(toy), tmp_path_factory.mktemp("qwen") / "model", seed=0, dims=Qwen2Dims(vocab_size=512)
    )


@pytest.fixture(scope="module")
def chat_sft(tmp_path_factory, qwen, toy):
    from rlvrflow.training.sft import run_sft

    cfg = _cfg(toy, prompt_format="chat", system_prompt=SYSTEM)
    return run_sft(qwen, toy.copy_rows(200, 1), cfg, tmp_path_factory.mktemp("chat_sft") / "model", seed=0)


def _tok(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


# ----- item 1: make-model ----------------------------------------------------------------------


def test_make_model_builds_a_qwen2_dir_that_auto_classes_load(tmp_path, toy):
    from transformers import AutoModelForCausalLM

    from rlvrflow.training.qwen_model import Qwen2Dims, make_model

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"body": t, "n": 1}) + "\n" for t in _corpus(toy)) + "{broken line\n")
    card = make_model("qwen2", tmp_path / "m", [corpus], dims=Qwen2Dims(vocab_size=400))
    assert card["texts"] == len(_corpus(toy)) + 1  # the damaged line counts as text
    model, tok = AutoModelForCausalLM.from_pretrained(tmp_path / "m"), _tok(tmp_path / "m")
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tok) <= 400
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention
    text = tok.apply_chat_template([{"role": "user", "content": "Copy 7"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nCopy 7<|im_end|>\n<|im_start|>assistant\n"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token == "<|im_end|>" and im_end in model.generation_config.eos_token_id
    assert tok("Copy 7").input_ids == tok("Copy 7", add_special_tokens=False).input_ids  # no BOS, as Qwen
    assert tok.decode(tok("退款 12 yuan").input_ids) == "退款 12 yuan"  # byte-level: nothing is unknown
    card = json.loads((tmp_path / "m" / "rlvrflow_model.json").read_text())
    assert card["params"] == sum(p.numel() for p in model.parameters())
    assert sum(f.stat().st_size for f in (tmp_path / "m").iterdir()) < 5_000_000


def test_make_model_without_text_fails_with_the_fix(tmp_path):
    from rlvrflow.training.qwen_model import make_model

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="holds no text"):
        make_model("qwen2", tmp_path / "m", [empty])
    with pytest.raises(ValueError, match="only qwen2"):
        make_model("llama", tmp_path / "m", [empty])


# ----- item 2: prompt formats ------------------------------------------------------------------


def test_prompt_format_auto_is_chat_with_a_template_and_raw_without(qwen, base_model):
    assert PromptFormat.for_tokenizer(_tok(qwen)).kind == "chat"
    assert PromptFormat.for_tokenizer(_tok(base_model)).kind == "raw"  # the embedded model: as before
    assert PromptFormat.for_tokenizer(_tok(qwen), "raw").kind == "raw"
    with pytest.raises(ValueError, match="prompt_format is 'chat'.*no chat template"):
        PromptFormat.for_tokenizer(_tok(base_model), "chat")
    with pytest.raises(ValueError, match="system_prompt is set"):
        PromptFormat.for_tokenizer(_tok(base_model), "auto", SYSTEM)
    with pytest.raises(ValueError, match="system_prompt.*prompt_format is 'raw'"):
        TrainingConfig(prompt_format="raw", system_prompt=SYSTEM)
    with pytest.raises(ValueError, match="prompt_format"):
        TrainingConfig(prompt_format="jinja")


def test_chat_sft_trains_on_the_rendered_prompt_and_stops_on_im_end(chat_sft, qwen, toy):
    from rlvrflow.training.sft import _encode

    tok = _tok(qwen)
    fmt = PromptFormat.for_model_dir(chat_sft, tok)
    assert fmt == PromptFormat("chat", SYSTEM)  # recorded in the SFT model for tiering and eval
    rendered = tok.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Copy 3\n"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ((prompt, completion),) = _encode(tok, [("Copy 3\n", "Answer: 3")], 96, fmt)[0]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert prompt == tok(rendered, add_special_tokens=False).input_ids
    assert completion == tok("Answer: 3", add_special_tokens=False).input_ids + [im_end]
    stats = json.loads((chat_sft / "sft_stats.json").read_text())
    assert stats["prompt_format"] == "chat" and stats["prompts_truncated"] == 0
    # generation reads the same rendering (from_pretrained finds the format) and ends on <|im_end|>
    engine = HFEngine.from_pretrained(str(chat_sft))
    assert engine.prompt_format == fmt and im_end in engine.eos_token_ids
    out = engine.generate(["Copy 3\n", "Copy 8\n"], 1, SamplingParams(temperature=0.0, max_new_tokens=12), seed=0)
    assert [g[0].text for g in out] == ["Answer: 3", "Answer: 8"]
    assert all(g[0].token_ids[-1] == im_end and g[0].finish_reason == "stop" for g in out)


def test_grpo_on_chat_prompts_sees_the_rendered_prompt(chat_sft, qwen, toy, tmp_path):
    from rlvrflow.training.grpo import collect_groups, train_grpo
    from rlvrflow.training.scoring import tasks_from_df

    class Recorder:  # an engine that answers right half the time and remembers what it was asked
        def generate(self, prompts, n, sampling, seed):
            from rlvrflow.engines import Completion

            self.prompts = prompts
            return [
                [Completion(f"Answer: {p.split()[1] if j % 2 else 0}", (5, 6), (0.0, 0.0), "stop") for j in range(n)]
                for p in prompts
            ]

    tok, fmt = _tok(chat_sft), PromptFormat("chat", SYSTEM)
    rows = toy.copy_rows(2, 0, digits=(4,))
    sampler = type("S", (), {"next_batch": lambda self, n: rows["id"].to_list()[:n], "report": lambda *a: None})()
    cfg = _cfg(toy, prompt_format="chat", system_prompt=SYSTEM)
    groups, _ = collect_groups(
        Recorder(),
        sampler,
        {t.id: t for t in tasks_from_df(rows)},
        tok,
        cfg.grpo,
        RewardConfig(),
        0,
        0,
        prompt_format=fmt,
    )
    assert groups[0].prompt_ids == fmt.encode(tok, "Copy 4\n")  # what the loss conditions on
    result = train_grpo(
        chat_sft,
        toy.copy_rows(40, 1),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(4, 3, split="eval"),
        EVAL,
        tmp_path,
        seed=0,
    )
    assert result["prompt_format"] == "chat" and result["steps"] == 4
    assert result["baseline"]["pass_at_1_greedy"] == 1.0  # eval renders as SFT did (raw text would not pass)
    saved = PromptFormat.for_model_dir(result["final_checkpoint"], tok)
    assert saved == fmt


# ----- item 3: precision -----------------------------------------------------------------------


def test_bf16_on_cpu_loss_is_finite_fp32_and_a_step_lowers_it(qwen, toy):
    from rlvrflow.training.modeling import completion_logprobs, load_model_and_tokenizer, load_policy
    from rlvrflow.training.precision import autocast, resolve_dtype
    from rlvrflow.training.sft import _batch_loss, _encode

    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32 and resolve_dtype("bfloat16", cpu) == torch.bfloat16
    policy, tok = load_policy(qwen, cpu, torch.bfloat16)
    assert all(p.dtype == torch.float32 for p in policy.parameters())  # master weights stay fp32
    ref, _ = load_model_and_tokenizer(qwen, cpu, trainable=False, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in ref.parameters())  # frozen weights are stored in bf16
    data, _ = _encode(tok, [(f"Copy {d}\n", f"Answer: {d}") for d in range(8)], 96, PromptFormat("chat"))
    with autocast(cpu, torch.bfloat16):
        logp, _ = completion_logprobs(policy, [p for p, _ in data], [c for _, c in data], tok.pad_token_id, cpu)
        ref_logp, _ = completion_logprobs(ref, [p for p, _ in data], [c for _, c in data], tok.pad_token_id, cpu)
        hidden = policy(input_ids=torch.tensor([data[0][0]])).logits
    assert hidden.dtype == torch.bfloat16  # the forward really ran in bf16
    assert logp.dtype == torch.float32 and ref_logp.dtype == torch.float32
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    with autocast(cpu, torch.bfloat16):
        before = _batch_loss(policy, data, tok.pad_token_id, cpu)
    assert before.dtype == torch.float32 and torch.isfinite(before)
    before.backward()
    opt.step()
    with torch.no_grad(), autocast(cpu, torch.bfloat16):
        after = _batch_loss(policy, data, tok.pad_token_id, cpu)
    assert torch.isfinite(after) and after < before


def test_bf16_sft_and_grpo_run_end_to_end(qwen, toy, tmp_path):
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.training.sft import run_sft

    cfg = _cfg(
        toy,
        dtype="bfloat16",
        sft={"max_steps": 30},
        grpo={"max_steps": 2, "beta": 0.1, "entropy_coef": 0.01},
        checkpoint={"every": 2},
    )
    sft = run_sft(qwen, toy.copy_rows(100, 1), cfg, tmp_path / "sft", seed=0)
    stats = json.loads((sft / "sft_stats.json").read_text())
    first = json.loads((sft / "sft_metrics.jsonl").read_text().splitlines()[0])["loss"]
    assert stats["dtype"] == "bfloat16" and stats["final_loss"] < first
    result = train_grpo(
        sft,
        toy.copy_rows(40, 1),
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(4, 3, split="eval"),
        EVAL,
        tmp_path / "grpo",
        seed=0,
    )
    metrics = [json.loads(x) for x in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert result["dtype"] == "bfloat16"
    assert all(torch.isfinite(torch.tensor(m.get("loss", 0.0))) for m in metrics)
    updates = [m for m in metrics if "entropy" in m]  # the bonus through bf16 autocast on the BPE vocabulary
    assert updates and all(0 < m["entropy"] < math.log(len(AutoTokenizer.from_pretrained(sft))) for m in updates)


# ----- item 4: LoRA ----------------------------------------------------------------------------


def test_lora_reference_is_the_base_model_exactly(qwen):
    from rlvrflow.training.config import LoRAConfig
    from rlvrflow.training.lora import AdapterDisabled, parameter_counts
    from rlvrflow.training.modeling import completion_logprobs, load_model_and_tokenizer, load_policy

    cpu = torch.device("cpu")
    policy, tok = load_policy(qwen, cpu, torch.float32, LoRAConfig(r=4, alpha=8))
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # a trained adapter: the policy now differs from the base
    base, _ = load_model_and_tokenizer(qwen, cpu, trainable=False)
    prompts, comps = [tok("Copy 3\n").input_ids] * 2, [tok("Answer: 3").input_ids, tok("Answer: 5").input_ids]
    with torch.no_grad():
        ref_lp, _ = completion_logprobs(AdapterDisabled(policy), prompts, comps, tok.pad_token_id, cpu)
        base_lp, _ = completion_logprobs(base, prompts, comps, tok.pad_token_id, cpu)
        pol_lp, _ = completion_logprobs(policy, prompts, comps, tok.pad_token_id, cpu)
    assert torch.equal(ref_lp, base_lp)
    assert not torch.allclose(pol_lp, base_lp)
    counts = parameter_counts(policy)
    lora_params = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n)
    assert counts["trainable_params"] == lora_params < counts["total_params"] / 5


def test_lora_sft_changes_only_what_the_adapters_touch(qwen, toy, tmp_path):
    from safetensors.torch import load_file

    from rlvrflow.training.sft import run_sft

    cfg = _cfg(toy, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}, sft={"max_steps": 10})
    sft = run_sft(qwen, toy.copy_rows(50, 1), cfg, tmp_path / "sft", seed=0)
    stats = json.loads((sft / "sft_stats.json").read_text())
    assert 0 < stats["trainable_params"] < stats["total_params"]
    assert not (sft / "adapter_config.json").exists()  # saved merged: a plain model for tiering and GRPO
    before, after = load_file(qwen / "model.safetensors"), load_file(sft / "model.safetensors")
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in changed), changed


def _run(sft, out, kill_after):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, str(Path(__file__).with_name("grpo_runner.py")), str(sft), str(out), str(kill_after), "lora"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_lora_grpo_saves_the_adapter_unmerged_resumes_after_kill_9_and_exports(chat_sft, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from rlvrflow.training.export import export_checkpoint
    from rlvrflow.training.modeling import load_model_and_tokenizer

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert _run(chat_sft, straight, 0).returncode == 0
    crash = _run(chat_sft, killed, 3)
    assert crash.returncode == -9, crash.stderr[-2000:]
    resumed = _run(chat_sft, killed, 0)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    final = killed / "step_000005"
    assert {"adapter_config.json", "adapter_model.safetensors", "state.pt"} <= {p.name for p in final.iterdir()}
    assert not (final / "model.safetensors").exists()  # the adapter only, unmerged
    a = load_file(straight / "step_000005" / "adapter_model.safetensors")
    b = load_file(final / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.endswith("lora_B.weight") and a[k].abs().sum() > 0 for k in a)  # the adapters trained
    lines = lambda d: (d / "metrics.jsonl").read_text().splitlines()  # noqa: E731
    assert lines(straight) == lines(killed) and all(json.loads(x)["kl"] >= 0 for x in lines(killed)[1:])
    summary = json.loads((straight / "summary.json").read_text())
    assert 0 < summary["trainable_params"] < summary["total_params"]

    # the base weights never moved: the checkpoint's model = the SFT model + its adapter
    peft_model, tok = load_model_and_tokenizer(final, torch.device("cpu"), trainable=False)
    sft_weights = load_file(chat_sft / "model.safetensors")
    base = {
        k.replace("base_model.model.", "").replace(".base_layer", ""): v
        for k, v in peft_model.state_dict().items()
        if "lora_" not in k
    }
    assert all(torch.equal(base[k], sft_weights[k]) for k in sft_weights)

    # export: merged -> AutoModelForCausalLM with the adapter model's logits; plain -> the adapter alone
    assert export_checkpoint(final, tmp_path / "merged", merge=True)["kind"] == "merged"
    assert export_checkpoint(final, tmp_path / "adapter")["kind"] == "adapter"
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    ids = torch.tensor([PromptFormat("chat").encode(tok, "Copy 6\n") + tok("Answer: 6").input_ids])
    with torch.no_grad():
        want, got = peft_model(input_ids=ids).logits, merged(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-4), (want - got).abs().max()
    assert not any((tmp_path / name / "state.pt").exists() for name in ("merged", "adapter"))
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()
    assert PromptFormat.for_model_dir(tmp_path / "merged", tok).kind == "chat"


def test_fp16_steps_go_through_loss_scaling_and_lower_the_loss(qwen):
    from rlvrflow.training.modeling import load_policy
    from rlvrflow.training.precision import LossScaler, autocast
    from rlvrflow.training.sft import _batch_loss, _encode

    cpu = torch.device("cpu")
    policy, tok = load_policy(qwen, cpu, torch.float16)
    data, _ = _encode(tok, [(f"Copy {d}\n", f"Answer: {d}") for d in range(8)], 96, PromptFormat("chat"))
    params = [p for p in policy.parameters() if p.requires_grad]
    opt, scaler = torch.optim.AdamW(params, lr=1e-2), LossScaler(cpu, torch.float16)
    losses = []
    for _ in range(3):
        with autocast(cpu, torch.float16):
            loss = _batch_loss(policy, data, tok.pad_token_id, cpu)
        opt.zero_grad()
        scaler.backward(loss)
        scaler.step(opt, params, 1.0)
        losses.append(float(loss.detach()))
    assert scaler.state_dict()["scale"] > 1  # the loss was scaled (and unscaled before clipping)
    assert all(x == x for x in losses) and losses[-1] < losses[0]
