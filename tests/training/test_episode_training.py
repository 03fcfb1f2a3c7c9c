"""Training on episodes: the policy mask, the loss's gradient on tool results, zero advantages of an
all-equal group, SFT on transcripts, and the chain's GRPO on episode rows alone, resuming exactly."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rlvrflow.training.episode_format import PLAIN
from rlvrflow.verifiers.environment import Environment
from rlvrflow.verifiers.episode import ENVIRONMENT, POLICY, PROMPT, Episode

LOOKUP = '<tool_call>{"name":"get_order","arguments":{"order_id":7}}</tool_call>'
REFUND = '<tool_call>{"name":"refund","arguments":{"order_id":7,"amount":30}}</tool_call>'
RESULT = '{"columns": ["total"], "rows": [[30]]}'


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    return shop_env(tmp_path)


def shop_env(folder: Path) -> Environment:
    """Orders 7, 8 and 9 (totals 30, 45, 12) in `folder`/shop.db; tools get_order and refund; the
    outcome is the refunds table."""
    db = folder / "shop.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE orders(order_id INTEGER PRIMARY KEY, total INTEGER);"
        "CREATE TABLE refunds(order_id INTEGER, amount REAL);"
        "INSERT INTO orders VALUES (7, 30), (8, 45), (9, 12);"
    )
    con.commit()
    con.close()
    order = {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}
    return Environment.model_validate(
        {
            "database": str(db),
            "max_turns": 3,
            "tools": [
                {
                    "name": "get_order",
                    "description": "an order's total",
                    "parameters": order,
                    "sql": "SELECT total FROM orders WHERE order_id = :order_id",
                },
                {
                    "name": "refund",
                    "description": "refund an amount",
                    "parameters": {
                        "type": "object",
                        "required": ["order_id", "amount"],
                        "properties": {"order_id": {"type": "integer"}, "amount": {"type": "number"}},
                    },
                    "sql": "INSERT INTO refunds VALUES (:order_id, :amount)",
                },
            ],
            "outcome": {"query": "SELECT order_id, amount FROM refunds"},
        }
    )


def worked(order: int, total: int) -> Episode:
    call = LOOKUP.replace("7", str(order))
    refund = REFUND.replace("7", str(order)).replace("30", str(total))
    return Episode(
        [
            {"role": "user", "content": f"Refund order {order}."},
            {"role": "assistant", "content": call},
            {"role": "tool", "name": "get_order", "content": RESULT.replace("30", str(total))},
            {"role": "assistant", "content": refund},
            {"role": "tool", "name": "refund", "content": '{"rows_affected": 1}'},
            {"role": "assistant", "content": f"Refunded {total}."},
        ],
        [PROMPT, POLICY, ENVIRONMENT, POLICY, ENVIRONMENT, POLICY],
    )


@pytest.fixture(scope="module")
def tokenizer():
    from rlvrflow.training.tiny_model import build_tokenizer

    texts = [PLAIN.prompt(worked(o, t).messages) for o, t in ((7, 30), (8, 45), (9, 12))]
    return build_tokenizer(texts + ['0123456789 {}[]":,._-<>/' + "abcdefghijklmnopqrstuvwxyz"])


def tiny_model(tokenizer, seed: int = 0):
    import torch
    from transformers import LlamaForCausalLM

    from rlvrflow.training.config import TinyModelConfig
    from rlvrflow.training.tiny_model import tiny_llama_config

    torch.manual_seed(seed)
    dims = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=1, intermediate_size=64, max_positions=512)
    return LlamaForCausalLM(tiny_llama_config(dims, tokenizer))


def test_plain_render_masks_all_but_the_policys_text(tokenizer):
    ep = worked(7, 30)
    ids, mask = PLAIN.render(tokenizer, ep, [])
    assert len(ids) == len(mask) and ids[0] == tokenizer.bos_token_id
    own = tokenizer.decode([i for i, m in zip(ids, mask) if m])
    assert own == f"{LOOKUP}\n{REFUND}\nRefunded 30.\n"  # each message and the stop that ended it
    assert RESULT not in own and "agent:" not in own and "Refund order" not in own
    # the prompt text the engine continues is the rendering's prefix
    prefix = PLAIN.prompt(ep.messages[:3])
    assert tokenizer(prefix).input_ids == ids[: len(tokenizer(prefix).input_ids)]


def test_plain_render_refuses_a_newline_in_a_policy_message(tokenizer):
    ep = worked(7, 30)
    ep.messages[-1] = {"role": "assistant", "content": "two\nlines"}
    with pytest.raises(ValueError, match="newline"):
        PLAIN.render(tokenizer, ep, [])


def test_tool_result_tokens_get_zero_gradient(tokenizer, one_torch_thread):
    import torch

    from rlvrflow.training.episodes import masked_token_logprobs
    from rlvrflow.training.grpo_math import grpo_loss

    model = tiny_model(tokenizer)
    ids, mask = PLAIN.render(tokenizer, worked(7, 30), [])
    ids_t, mask_t = torch.tensor([ids]), torch.tensor([mask])
    logits = model(input_ids=ids_t).logits
    logits.retain_grad()
    logp, m = masked_token_logprobs(logits, ids_t, mask_t)
    loss, _ = grpo_loss(logp, logp.detach(), None, torch.tensor([1.5]), m, 0.2, 0.2, 0.0, "token")
    loss.backward()
    per_target = logits.grad[0, :-1].abs().sum(-1)  # position t predicts token t + 1
    target_mask = torch.tensor(mask[1:]).bool()
    text = "".join(tokenizer.convert_ids_to_tokens(ids))
    assert RESULT in text
    assert torch.all(per_target[~target_mask] == 0)  # prompt, tool results, role tags
    assert torch.all(per_target[target_mask] > 0)


class Scripted:
    """An engine that answers each conversation from a script keyed by its user prompt and turn."""

    def __init__(self, script: dict[str, list[str]]):
        self.script = script

    def generate(self, prompts, n, sampling, seed):
        from rlvrflow.engines.hf_engine import Completion

        outs = []
        for p in prompts:
            user = p.split("user: ", 1)[1].split("\n", 1)[0]
            turn = p.count("agent: ") - 1
            outs.append([Completion(self.script[user][turn], (), (), "stop")])
        return outs


class _Reports:
    def report(self, ids, rates):
        self.rates = dict(zip(ids, rates))


def test_all_equal_rewards_give_zero_advantage_and_no_update(env, tokenizer, one_torch_thread):
    import torch

    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.config import GRPOConfig
    from rlvrflow.training.grpo import update_policy
    from rlvrflow.training.grpo_episodes import EpisodeBatch, EpisodePlayer
    from rlvrflow.verifiers import RewardConfig

    rows = {
        r["id"]: {**r, "verifier_params": env.model_dump_json()}
        for r in (
            {"id": "a", "prompt": "Refund order 7.", "reference": "[[7, 30]]"},
            {"id": "b", "prompt": "Refund order 8.", "reference": "[[8, 45]]"},
        )
    }
    engine = Scripted({"Refund order 7.": [LOOKUP, REFUND, "Refunded 30."], "Refund order 8.": ["Sorry."]})
    g = GRPOConfig(prompts_per_step=2, num_generations=3, filter_zero_variance=False, beta=0.0, warmup_steps=0)
    player = EpisodePlayer(engine, rows, PLAIN, g, RewardConfig(), seed=0)
    reports = _Reports()
    assert player.take(["a", "b"], reports, step=0, rnd=0) == []
    info = player.info()
    assert info["episode_groups_zero_variance"] == 0 and len(player.kept) == 2  # kept: the filter is off
    assert reports.rates == {"a": 1.0, "b": 0.0}
    assert {grp.task_id: [e.verdict.correct for e in grp.episodes] for grp in player.kept} == {
        "a": [True] * 3,
        "b": [False] * 3,
    }
    model = tiny_model(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]

    def update():
        batch = EpisodeBatch(player.kept, tokenizer, PLAIN, g, "cpu")
        backend = make_backend(model, g, torch.float32)
        return update_policy(backend, None, [], g, tokenizer.pad_token_id, torch.device("cpu"), episodes=batch)

    assert update()["grad_norm"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    player.kept[1].rewards[0] += 1.0  # one differing episode in a group: the update moves the weights
    update()
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_sft_on_transcripts_learns_the_policy_turns(env, tokenizer, one_torch_thread):
    from rlvrflow.training.config import SFTConfig
    from rlvrflow.training.episode_sft import sft_on_transcripts

    model = tiny_model(tokenizer)
    log = sft_on_transcripts(
        model,
        tokenizer,
        [worked(7, 30), worked(8, 45)],
        env.schemas(),
        SFTConfig(max_steps=60, learning_rate=1e-2, batch_size=2, warmup_steps=0, logging_steps=10),
        seed=0,
    )
    assert log[-1]["loss"] < 0.5 * log[0]["loss"]
    bad = worked(7, 30)
    bad.sources = [PROMPT] * len(bad.sources)
    with pytest.raises(ValueError, match="no assistant message"):
        sft_on_transcripts(model, tokenizer, [bad], env.schemas(), SFTConfig(max_steps=1), seed=0)


def test_sft_on_transcripts_stops_on_the_clock_it_is_given_and_logs_its_last_step(env, tokenizer, one_torch_thread):
    # the bench's control arm trains for the CPU seconds GRPO took: any clock, read once before each step
    from rlvrflow.training.config import SFTConfig
    from rlvrflow.training.episode_sft import sft_on_transcripts

    ticks = iter(range(1000))
    sc = SFTConfig(max_steps=50, learning_rate=1e-3, batch_size=2, warmup_steps=0, logging_steps=3)
    log = sft_on_transcripts(
        tiny_model(tokenizer), tokenizer, [worked(7, 30)], env.schemas(), sc, 0, max_time_s=6, clock=lambda: next(ticks)
    )
    # the clock reads 0 at the start, 1 before the first step and one more after each: 6 after step 5
    assert [r["step"] for r in log] == [1, 4, 5]
    args = (tiny_model(tokenizer), tokenizer, [worked(7, 30)], env.schemas())
    assert sft_on_transcripts(*args, sc, 0, max_time_s=0) == []
    assert [r["step"] for r in sft_on_transcripts(*args, sc.model_copy(update={"max_steps": 7}), 0)] == [1, 4, 7]


def _start_model(tmp_path, env, tokenizer) -> Path:
    from rlvrflow.training.config import SFTConfig
    from rlvrflow.training.episode_sft import sft_on_transcripts

    model = tiny_model(tokenizer)
    sft_on_transcripts(
        model,
        tokenizer,
        [worked(7, 30), worked(8, 45)],
        env.schemas(),
        SFTConfig(max_steps=40, learning_rate=1e-2, batch_size=2, warmup_steps=0),
        seed=0,
    )
    out = tmp_path / "sft"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _episode_frame(env, orders):
    """Episode rows as GRPO takes them (tiered, DESIGN.md columns), all in one tier."""
    import polars as pl

    from rlvrflow.verifiers.config import EPISODE

    return pl.DataFrame(
        [
            {
                "id": f"r{o}",
                "prompt": f"Refund order {o}.",
                "reference": f"[[{o}, {t}]]",
                "verifier": EPISODE,
                "verifier_params": env.model_dump_json(),
                "category": "refunds",
                "tier": "learnable",
                "pass_at_1": 0.5,
            }
            for o, t in orders
        ]
    )


def _grpo(start, rows, out, seed: int, on_progress=None, **grpo):
    """The chain's GRPO (training/grpo.py) on episode rows alone, the first two held out as episodes."""
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig, TrainingConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    cfg = TrainingConfig(
        model=str(start),
        torch_threads=1,
        grpo={"warmup_steps": 0, "beta": 0.0, "max_refill_rounds": 0, **grpo},
        checkpoint={"every": 2, "keep_last": 3},
    )
    eval_cfg = EvalConfig(k=1, n_samples=1, episode_max_new_tokens=grpo.get("episode_max_new_tokens", 40))
    held = rows.head(2).to_dicts()
    return train_grpo(
        start,
        rows,
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        rows.head(0),
        eval_cfg,
        out,
        seed,
        on_progress=on_progress,
        eval_episodes=held,
    )


def test_grpo_on_episodes_alone_runs_and_resumes_exactly(env, tokenizer, tmp_path, one_torch_thread):
    """Agent-only rows through the chain's one GRPO trainer: the held-out episodes are the evals' headline,
    and a run cut at step 2 resumes to the same metrics, evals and weights as the whole run."""
    import torch
    from safetensors.torch import load_file

    start = _start_model(tmp_path, env, tokenizer)
    rows = _episode_frame(env, ((7, 30), (8, 45), (9, 12)))
    settings = dict(
        max_steps=4,
        prompts_per_step=2,
        num_generations=4,
        learning_rate=1e-3,
        episode_max_new_tokens=40,
        temperature=0.5,
        filter_zero_variance=False,
    )
    whole = _grpo(start, rows, tmp_path / "whole", 3, **settings)

    def crash(step, total, metrics):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _grpo(start, rows, tmp_path / "cut", 3, on_progress=crash, **settings)
    resumed = _grpo(start, rows, tmp_path / "cut", 3, **settings)

    metrics = [json.loads(x) for x in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 4 and any("skipped" not in m for m in metrics)  # some steps trained
    assert all(m["episode_groups_seen"] == 2 and "episode_malformed_rate" in m for m in metrics)
    for name in ("metrics.jsonl", "evals.jsonl"):
        assert (tmp_path / "whole" / name).read_text() == (tmp_path / "cut" / name).read_text()
    a = load_file(tmp_path / "whole" / "step_000004" / "model.safetensors")
    b = load_file(tmp_path / "cut" / "step_000004" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert whole["groups_seen"] == resumed["groups_seen"] == 8
    assert [e["step"] for e in whole["evals"]] == [0, 2, 4]
    assert whole["final"]["headline_scope"] == "episodes" and whole["final"]["n_prompts"] == 2
    assert "turns_mean" in whole["final"] and "pass_at_1_greedy" in whole["final"]
    samples = (tmp_path / "whole" / "samples" / "step_000004.jsonl").read_text().splitlines()
    assert samples and all(json.loads(x)["mode"] == "episode" for x in samples)

    def crash_early(step, total, metrics):  # before the first checkpoint: the rerun starts from step 0
        if step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _grpo(start, rows, tmp_path / "early", 3, on_progress=crash_early, **settings)
    _grpo(start, rows, tmp_path / "early", 3, **settings)
    for step in ("step_000000", "step_000002"):  # each eval's transcripts once, not once per attempt
        name = f"samples/{step}.jsonl"
        assert (tmp_path / "early" / name).read_text() == (tmp_path / "whole" / name).read_text()


def test_a_chat_model_plays_and_trains_on_episodes_through_its_template(env, tmp_path, one_torch_thread):
    """The in-project Qwen2 test model (ChatML, `<|im_end|>`, a BPE tokenizer) through `chat_format`: its
    played episodes render back to ids whose policy-masked spans decode to exactly its messages, each
    with the `<|im_end|>` it stopped on, and GRPO on episodes runs on it (random weights: what it writes
    is noise, the plumbing is what is tested)."""
    from rlvrflow.engines import HFEngine, SamplingParams
    from rlvrflow.training.episode_format import chat_format
    from rlvrflow.training.episodes import play_episodes
    from rlvrflow.training.modeling import load_model_and_tokenizer
    from rlvrflow.training.qwen_model import build_qwen2_model

    corpus = [json.dumps(worked(o, t).messages) for o, t in ((7, 30), (8, 45), (9, 12))] * 10
    start = build_qwen2_model(corpus, tmp_path / "qwen", seed=0)
    model, tok = load_model_and_tokenizer(start, "cpu", trainable=False)
    fmt = chat_format(tok)
    assert fmt.stop == ("<|im_end|>",)
    rows = [
        {"id": f"r{o}", "prompt": f"Refund order {o}.", "reference": f"[[{o}, {t}]]"} for o, t in ((7, 30), (8, 45))
    ]
    episodes = play_episodes(
        HFEngine(model, tok), env, rows, fmt, SamplingParams(temperature=1.0, max_new_tokens=12), seed=0
    )
    for ep in episodes:
        ids, mask = fmt.render(tok, ep, env.schemas())
        assert len(ids) == len(mask)
        spans, run = [], []
        for i, m in zip(ids + [None], mask + [0]):
            if m:
                run.append(i)
            elif run:
                spans.append(tok.decode(run))
                run = []
        assert spans == [m["content"] + "<|im_end|>" for m in ep.messages if m["role"] == "assistant"]
        assert "get_order" in tok.decode(ids)  # the tools are in what the model read
    frame = _episode_frame(env, ((7, 30), (8, 45)))
    settings = dict(max_steps=1, prompts_per_step=2, num_generations=2, episode_max_new_tokens=12)
    summary = _grpo(start, frame, tmp_path / "grpo", 0, filter_zero_variance=False, **settings)
    assert summary["prompt_format"] == "chat"  # the template's: GRPO played and trained through chat_format
    assert summary["groups_seen"] == 2 and (tmp_path / "grpo" / "step_000001" / "model.safetensors").is_file()


def test_an_episode_longer_than_the_models_positions_is_an_error_that_names_the_limit(env, tokenizer, tmp_path):
    from rlvrflow.training.episodes import conversation_logprobs
    from rlvrflow.training.modeling import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(_start_model(tmp_path, env, tokenizer), "cpu", trainable=False)
    limit = model.config.max_position_embeddings
    with pytest.raises(ValueError, match=f"renders to {limit + 1} tokens, over the model's {limit} positions"):
        conversation_logprobs(model, [([1] * (limit + 1), [0] * limit + [1])], 0, "cpu")


def test_held_out_episodes_beside_single_replies_are_reported_apart(env, tokenizer, toy, tmp_path, one_torch_thread):
    """With single-reply held-out rows the headline stays theirs; the episodes' figures go under `episodes`
    in every eval record and beside them in curves.png."""
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig, TrainingConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    start = _start_model(tmp_path, env, tokenizer)
    rows = _episode_frame(env, ((7, 30), (8, 45), (9, 12)))
    cfg = TrainingConfig(
        model=str(start),
        torch_threads=1,
        grpo={"max_steps": 1, "prompts_per_step": 2, "num_generations": 2, "episode_max_new_tokens": 40, "beta": 0.0},
        checkpoint={"every": 1},
    )
    summary = train_grpo(
        start,
        rows,
        cfg,
        CurriculumConfig(dedup_window=0),
        RewardConfig(),
        toy.copy_rows(3, 1, split="eval"),
        EvalConfig(k=1, n_samples=1, max_new_tokens=8, episode_max_new_tokens=40),
        tmp_path / "grpo",
        seed=0,
        eval_episodes=rows.head(2).to_dicts(),
    )
    for record in summary["evals"]:
        assert "headline_scope" not in record and record["n_prompts"] == 3
        assert record["episodes"]["n_prompts"] == 2 and "pass_at_1_greedy" in record["episodes"]
    modes = {
        json.loads(x)["mode"] for x in (tmp_path / "grpo" / "samples" / "step_000001.jsonl").read_text().splitlines()
    }
    assert "episode" in modes and len(modes) > 1  # the replies' samples and the episodes' transcripts, one file
    assert (tmp_path / "grpo" / "curves.png").is_file()

    # TensorBoard: the episodes' figures one level down
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "grpo" / "tb"))
    acc.Reload()
    assert "eval/episodes/pass_at_1_greedy" in acc.Tags()["scalars"]

    # the loop keeps the episodes' result beside the replies' for the evaluate stage to reuse: the same
    # as the stage's own engine (training.eval.eval_engine) playing them again on the saved checkpoint
    from rlvrflow.flows.stage_calls import loop_episodes
    from rlvrflow.training.eval import eval_engine, read_loop_eval
    from rlvrflow.training.eval_episodes import evaluate_episode_rows

    held = rows.head(2).to_dicts()
    loop = read_loop_eval(tmp_path / "grpo", "step_000001")
    engine = eval_engine(tmp_path / "grpo" / "step_000001", EvalConfig(), "cpu", "auto", 0)
    again, records = evaluate_episode_rows(engine, held, 40, 0, 4, RewardConfig())
    assert loop["episodes"] == again and loop["episode_samples"] == records and records
    samples = tmp_path / "evaluate.samples.jsonl"
    reused = loop_episodes(loop, held, samples)
    assert reused == {**again, "reused_from": str(loop["path"])}
    assert [json.loads(x) for x in samples.read_text().splitlines()] == records
    assert loop_episodes(loop, held[:1], samples) is None  # other rows: evaluate plays them itself
    step0 = read_loop_eval(tmp_path / "grpo", "sft")  # the model GRPO started from, at step 0
    assert loop_episodes(step0, held, samples)["by_prompt"]["ids"] == sorted(r["id"] for r in held)
