"""SFT on worked transcripts: the whole conversation is read, the loss is on the assistant's own tokens.

    lines = sft_on_transcripts(model, tokenizer, transcripts, tools, SFTConfig(max_steps=300), seed=0)

A transcript is anything with `messages` and `sources` (verifiers.episode.Episode, or a worked
conversation from the logs with `prompt`, `policy` and `environment` sources). Each is rendered by an
`EpisodeFormat` (training/episode_format.py) to token ids and a policy mask; the loss is the mean
negative log-likelihood of the masked tokens (the assistant's messages and the stop after each),
so tool results and scaffolding are read, never imitated. The loop is training/sft.py's: AdamW with
warmup and cosine (`Optim.of(sc)`), length-bucketed batches, the step log. `max_time_s` stops early
(the bench's control arm: SFT for the seconds GRPO took). Left out: truncation (a transcript longer
than `sc.max_length` is an error naming it), LoRA and mixed precision.
"""

from __future__ import annotations

import time

from collections import Counter

from rlvrflow.training.episode_format import PLAIN, EpisodeFormat


def worked_transcripts(rows, one_line: bool = False) -> tuple[list[tuple], dict[str, int]]:
    """(episode, tools) of each episode row (DESIGN.md row schema, verifier `episode`) with a worked
    transcript in `solution`, and the rows dropped by reason. Each is replayed on the row's environment
    (its `verifier_params`), so the conversation holds the instructions, the ticket and the tool
    results exactly as a played episode does; a replay that does not end on the last message at the
    reference's end state is dropped (`replay_failed`). `one_line`: newlines in the assistant's
    messages become spaces first (PLAIN ends a message at a newline; a tool call's JSON reads the same)."""
    from rlvrflow.verifiers.environment import Environment
    from rlvrflow.verifiers.episode import FINAL, run_episode
    from rlvrflow.verifiers.episode_rows import transcript_messages

    envs: dict[str, Environment] = {}
    out, dropped = [], Counter()
    for row in rows:
        if not str(row.get("solution") or "").strip():
            continue
        params = row["verifier_params"]
        env = envs.get(params) or envs.setdefault(params, Environment.model_validate_json(params))
        try:
            replies = [m["content"] for m in transcript_messages(row["solution"]) if m["role"] == "assistant"]
        except ValueError:
            dropped["bad_transcript"] += 1
            continue
        if one_line:
            replies = [r.replace("\n", " ") for r in replies]
        left = iter(replies)
        episode = run_episode(env, row, lambda messages: next(left, ""))
        if episode.stop != FINAL or episode.assistant_turns != len(replies) or not episode.verdict.correct:
            dropped["replay_failed"] += 1
            continue
        out.append((episode, env.schemas()))
    return out, dict(dropped)


def transcript_data(tokenizer, transcripts, tools: list[dict], fmt: EpisodeFormat, max_length: int) -> list:
    """Rendered (ids, mask) of each transcript; ValueError naming one that is too long or has no policy token."""
    data = []
    for i, t in enumerate(transcripts):
        ids, mask = fmt.render(tokenizer, t, tools)
        if len(ids) > max_length:
            raise ValueError(
                f"transcript {i} renders to {len(ids)} tokens, over sft.max_length={max_length}; "
                "raise max_length or shorten the transcript"
            )
        if not any(mask):
            raise ValueError(f"transcript {i} has no assistant message to learn from")
        data.append((ids, mask))
    return data


def masked_nll(model, batch: list[tuple[list[int], list[int]]], pad_id: int, device):
    """Mean negative log-likelihood of the policy's tokens of a batch of rendered conversations."""
    from rlvrflow.training.episodes import conversation_logprobs

    logp, mask = conversation_logprobs(model, batch, pad_id, device)  # (B, L-1) each
    m = mask.to(logp.dtype)
    return -(logp * m).sum() / m.sum().clamp(min=1.0)


def sft_on_transcripts(
    model,
    tokenizer,
    transcripts,
    tools: list[dict],
    sc,
    seed: int,
    device="cpu",
    fmt: EpisodeFormat = PLAIN,
    max_time_s: float | None = None,
    clock=time.perf_counter,
) -> list[dict]:
    """Train `model` in place for `sc.max_steps` steps (`training.config.SFTConfig`), or until `clock()`
    has moved `max_time_s` (wall seconds by default; the bench's control arm passes a CPU clock);
    returns the step log's records (step, loss, lr, grad_norm, tokens, seconds), the last step's always."""
    import torch

    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.sft import _length_bucketed_batches
    from rlvrflow.training.trainer import Optim

    data = transcript_data(tokenizer, transcripts, tools, fmt, sc.max_length)
    torch.manual_seed(seed)
    model.train()
    backend = TorchBackend(model, Optim.of(sc))
    batches = _length_bucketed_batches(data, sc.batch_size, seed)
    records, t0, c0 = [], time.perf_counter(), clock()

    def out_of_time() -> bool:
        return max_time_s is not None and clock() - c0 >= max_time_s

    done = sc.max_steps <= 0 or out_of_time()  # the clock is read once before the first step and once after each
    step = 0
    while not done:
        batch = [data[i] for i in next(batches)]
        loss = masked_nll(model, batch, tokenizer.pad_token_id, torch.device(device))
        backend.zero_grad()
        backend.backward(loss)
        lr = backend.lr()
        grad_norm = backend.step()
        done = step == sc.max_steps - 1 or out_of_time()
        if step % sc.logging_steps == 0 or done:
            records.append(
                {
                    "step": step + 1,
                    "loss": float(loss.detach()),
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens": sum(len(ids) for ids, _ in batch),
                    "seconds": round(time.perf_counter() - t0, 2),
                }
            )
        step += 1
    model.eval()
    return records
