"""Tier episode rows (an environment's category) by pass@k, as tiering.py tiers single replies: play
`n_samples` episodes of each row with the SFT model and count those that reach the reference's end state.

    tiered, rollouts = tier_episodes(rows, engine, cfg, seed=0, fmt=PLAIN)

The rows' environment is their `verifier_params` (attach writes it there). Rows are played in
tiering's call order (`call_order` on their ids), PROMPTS_PER_CALL rows per `play_episodes` call (each
row's n episodes in it, every live conversation's next message in one engine call per turn), each
call seeded from (seed, its first id) and, in a chunk of several environments, each one's place: the
tier stage cuts episode rows into chunks of whole calls of their own, so the tiers are the same for
any chunk_rows. `cfg.episode_max_new_tokens` bounds each assistant message. The rollouts table has
tiering's ROLLOUT_COLUMNS, one row per episode: `response` is the transcript after the prompt (JSON
messages), `status` its verdict, `n_tokens` the policy's messages' tokens (the engine's tokenizer;
characters for an engine without one), `finish_reason` how the episode stopped (`final_reply`,
`max_turns`, or `context_full`: the model's positions had no room for another message).
"""

from __future__ import annotations

import json

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.curriculum.tiering import PROMPTS_PER_CALL, call_order, call_seed

# seed offset between the environments played in one chunk: a prime, so no turn's seed (+7919 per turn,
# training/episodes.py) of one environment meets another's
ENV_SEED_STRIDE = 104_729


def _record(index: int, episode, count) -> dict:
    from rlvrflow.verifiers.episode import POLICY, PROMPT

    own = [m for m, s in zip(episode.messages, episode.sources) if s != PROMPT]
    return {
        "sample": index,
        "response": json.dumps(own, ensure_ascii=False, default=str),
        "score": float(episode.verdict.score),
        "status": episode.verdict.status,
        "extracted": episode.verdict.extracted,
        "correct": episode.verdict.correct,
        "n_tokens": sum(count(m["content"]) for m, s in zip(episode.messages, episode.sources) if s == POLICY),
        "finish_reason": episode.stop,
    }


def sample_episodes(rows: list[dict], engine, cfg: CurriculumConfig, seed: int, fmt) -> list[list[dict]]:
    """Each row's cfg.n_samples episode records, in row order (played in call order)."""
    from rlvrflow.engines.hf_engine import SamplingParams
    from rlvrflow.training.episodes import play_episodes
    from rlvrflow.verifiers.environment import Environment

    sampling = SamplingParams(cfg.temperature, cfg.top_p, cfg.episode_max_new_tokens)
    order = call_order([r["id"] for r in rows], seed)
    ordered = [rows[i] for i in order]
    n, envs, samples = cfg.n_samples, {}, []
    tokenizer = getattr(engine, "tokenizer", None)
    count = (lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)) if tokenizer is not None else len
    for start in range(0, len(ordered), PROMPTS_PER_CALL):
        chunk = ordered[start : start + PROMPTS_PER_CALL]
        for params in dict.fromkeys(r["verifier_params"] for r in chunk):  # one play per environment
            envs.setdefault(params, Environment.model_validate_json(params))
        by_row: dict[int, list] = {}
        played = 0  # the environments played in this chunk: each samples apart from the others
        for params, env in envs.items():
            mine = [k for k, r in enumerate(chunk) if r["verifier_params"] == params]
            if not mine:
                continue
            chunk_seed = call_seed(seed, chunk[0]["id"]) + ENV_SEED_STRIDE * played
            played += 1
            episodes = play_episodes(engine, env, [chunk[k] for k in mine for _ in range(n)], fmt, sampling, chunk_seed)
            for j, k in enumerate(mine):
                by_row[k] = [_record(s, e, count) for s, e in enumerate(episodes[j * n : (j + 1) * n])]
        samples.extend(by_row[k] for k in range(len(chunk)))
    in_row_order: list[list[dict]] = [[] for _ in rows]
    for position, row_samples in zip(order, samples):
        in_row_order[position] = row_samples
    return in_row_order


def tier_episodes(df, engine, cfg: CurriculumConfig, seed: int, fmt):
    """(the rows with tiering's TIER_COLUMNS, one rollout row per episode), as `tier_with_rollouts`."""
    from rlvrflow.curriculum.tiering import TIER_COLUMNS, tiered_from_samples

    base = df.drop([c for c in TIER_COLUMNS if c in df.columns])
    samples = sample_episodes(base.to_dicts(), engine, cfg, seed, fmt) if base.height else []
    return tiered_from_samples(base, samples, cfg)
