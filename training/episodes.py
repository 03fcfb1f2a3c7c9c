"""Episodes as training data: play them in batches with a rollout engine, and the log-probs of a whole
conversation with only the policy's own tokens in the loss (held-out episodes: training/eval_episodes.py).

    episodes = play_episodes(engine, env, rows, PLAIN, SamplingParams(temperature=1.0), seed=0)
    logp, mask = conversation_logprobs(model, [PLAIN.render(tok, ep, tools) for ep in episodes], pad_id, dev)

`play_episodes` runs `verifiers.episode.run_episodes` with a policy that renders every live
conversation (`EpisodeFormat.prompt`) and asks the engine for all their next messages in one
`generate` call per turn, seeded per turn; each episode's `truncated_turns` lists its messages the
engine cut at `max_new_tokens`. A conversation whose prompt plus one message
(`max_new_tokens` and the stop's tokens) would pass the model's positions (`context_limit`) is not
continued: it ends with stop `context_full`, so a growing episode never runs the model past its
positions (a RoPE model would generate there silently) nor fails the loss later. The loss side renders each finished transcript once more
(`EpisodeFormat.render`: token ids and a per-token policy mask) and scores every token of it in one
forward pass; the mask keeps the policy's own tokens (its messages and the stop that ended each) and
drops the prompt, the tool results and the format's scaffolding. Re-rendering gives back the sampled
tokens for a tokenizer without merges and a message that ended on its stop string; one cut at
`max_new_tokens` or on EOS gets the stop string appended, so its last token is not the one sampled.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from rlvrflow.training.episode_format import EpisodeFormat


def context_limit(engine) -> int | None:
    """The positions the engine's model holds: an HF model's `max_position_embeddings`, a vLLM engine's
    `max_model_len`; None when the engine does not say (a custom RolloutEngine)."""
    config = getattr(getattr(engine, "model", None), "config", None)
    limit = getattr(config, "max_position_embeddings", None)
    if limit is None:
        llm_engine = getattr(getattr(engine, "llm", None), "llm_engine", None)
        limit = getattr(getattr(llm_engine, "model_config", None), "max_model_len", None)
    return int(limit) if limit else None


def _prompt_length(engine):
    """prompt text -> the number of token ids the engine feeds for it (None without a tokenizer)."""
    tokenizer, fmt = getattr(engine, "tokenizer", None), getattr(engine, "prompt_format", None)
    if tokenizer is None:
        return None
    if fmt is None:
        return lambda text: len(tokenizer(text).input_ids)
    return lambda text: len(fmt.encode(tokenizer, text))


def stop_length(tokenizer, fmt: EpisodeFormat) -> int:
    """Tokens of the format's longest stop string: the room a message needs after its own tokens."""
    return max((len(tokenizer(s, add_special_tokens=False).input_ids) for s in fmt.stop), default=0)


def play_episodes(engine, env, rows: Sequence[dict], fmt: EpisodeFormat, sampling, seed: int) -> list:
    """One episode per row (`prompt`, `reference`), every live conversation's next message drawn in one
    `engine.generate` call per turn; turn t samples with seed `seed + 7919 * t`. `sampling` is the
    engine's SamplingParams; the format's stop strings are added to it. A conversation without room
    for one more message in the model's positions ends with stop `context_full` (module docstring)."""
    from dataclasses import replace

    from rlvrflow.verifiers.episode import run_episodes

    sampling = replace(sampling, stop=tuple(dict.fromkeys(sampling.stop + fmt.stop)))
    tools, turn = env.schemas(), [0]
    limit, length = context_limit(engine), _prompt_length(engine)
    if limit is not None and length is not None:
        room = (
            limit - sampling.max_new_tokens - stop_length(engine.tokenizer, fmt)
        )  # the longest prompt that takes a message
    else:
        room = None

    cut: dict[int, list[int]] = {}  # id of a conversation's message list -> its messages cut at max_new_tokens

    def policy(conversations: list[list[dict]]) -> list[str | None]:
        prompts = [fmt.prompt(m, tools) for m in conversations]
        fits = [room is None or length(p) <= room for p in prompts]
        asked = [p for p, ok in zip(prompts, fits) if ok]
        outs = iter(engine.generate(asked, 1, sampling, seed=seed + 7919 * turn[0]) if asked else [])
        turn[0] += 1
        replies = []
        for messages, ok in zip(conversations, fits):
            out = next(outs)[0] if ok else None
            if getattr(out, "finish_reason", None) == "length":
                cut.setdefault(id(messages), []).append(sum(m["role"] == "assistant" for m in messages))
            replies.append(out.text if ok else None)
        return replies

    episodes = run_episodes(env, list(rows), policy)
    for e in episodes:
        e.truncated_turns = cut.get(id(e.messages), [])
    return episodes


def episode_stats(episodes: list, rewards: list[float] | None = None) -> dict:
    """What a batch of episodes did: success, format, turns, malformed calls, how they stopped, and
    success by the number of assistant turns taken (`success_by_turns`: {turns: [episodes, successes]})."""
    from rlvrflow.verifiers.episode import CONTEXT_FULL, MAX_TURNS

    n = max(1, len(episodes))
    ok = [e.verdict.status == "correct" for e in episodes]
    by_turns: dict[int, list[int]] = {}
    for e, good in zip(episodes, ok):
        cell = by_turns.setdefault(e.assistant_turns, [0, 0])
        cell[0] += 1
        cell[1] += good
    tools = Counter(r.name for e in episodes for r in e.tool_runs)
    out = {
        "success_rate": sum(ok) / n,
        "format_rate": sum(e.stop == "final_reply" and e.bad_calls == 0 for e in episodes) / n,
        "malformed_rate": sum(e.bad_calls > 0 for e in episodes) / n,
        "max_turns_rate": sum(e.stop == MAX_TURNS for e in episodes) / n,
        "context_full_rate": sum(e.stop == CONTEXT_FULL for e in episodes) / n,
        "turns_mean": sum(e.assistant_turns for e in episodes) / n,
        "tool_calls_mean": sum(len(e.tool_runs) for e in episodes) / n,
        "success_by_turns": {str(k): v for k, v in sorted(by_turns.items())},
        "tool_calls": dict(sorted(tools.items())),
    }
    if rewards is not None:
        out["reward_mean"] = sum(rewards) / n
    return out


def masked_token_logprobs(logits, ids, policy_mask, temperature: float = 1.0, entropy: str | None = None):
    """(B, L, V) logits of (B, L) ids -> (B, L-1) log-probs of tokens 1..L-1 at `temperature` and the
    (B, L-1) bool mask of those the policy wrote (`policy_mask` (B, L), 0 on padding); with `entropy`
    ("value" or "grad", as `modeling.completion_logprobs` takes it) a third (B, L-1) tensor, the entropy
    of the distribution each of those tokens was drawn from."""
    from rlvrflow.training.modeling import _scored

    return _scored(logits[:, :-1], ids[:, 1:], policy_mask[:, 1:].bool(), entropy, temperature)


def conversation_logprobs(
    model,
    rendered: list[tuple[list[int], list[int]]],
    pad_id: int,
    device,
    temperature: float = 1.0,
    entropy: str | None = None,
):
    """Right-pad rendered conversations ((ids, mask) each) and score every token in one forward pass:
    (B, L-1) log-probs and the (B, L-1) policy mask (`masked_token_logprobs`, and its entropy)."""
    import torch

    width = max(len(ids) for ids, _ in rendered)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit is not None and width > limit:  # past it, a model's positions are untrained or out of range
        raise ValueError(
            f"an episode renders to {width} tokens, over the model's {limit} positions; lower the "
            "environment's max_turns or the per-message max_new_tokens, or use a model with a longer context"
        )
    ids = torch.full((len(rendered), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rendered), width), dtype=torch.long)
    mask = torch.zeros((len(rendered), width), dtype=torch.long)
    for i, (row, m) in enumerate(rendered):
        if len(row) != len(m):
            raise ValueError(f"conversation {i}: {len(row)} token ids but {len(m)} mask values")
        ids[i, : len(row)], attn[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1, torch.tensor(m)
    ids, attn, mask = ids.to(device), attn.to(device), mask.to(device)
    logits = model(input_ids=ids, attention_mask=attn).logits  # (B, L, V)
    return masked_token_logprobs(logits, ids, mask, temperature, entropy)
