"""Held-out episodes in the evaluate stage: the eval split's rows of an environment's category, one
greedy episode each, played through the engine the stage already holds for that model.

    result, samples = evaluate_episode_rows(engine, rows, max_new_tokens=96, seed=0, per_category=2)

`rows` are episodes.parquet rows (split eval): `verifier` is `episode` and `verifier_params` the
environment attach resolved (verifiers/environment.py), so the rows alone say how to run them, whatever
the spec says today. One success per prompt (the end state matched): `pass_at_1_greedy`, the
training.episodes.episode_stats figures, the same per category, and `by_prompt` (ids, greedy,
categories), what training.report.gain_interval pairs between models. Episodes have no sampled pass@1
or pass@k (one greedy episode per prompt), so they are reported apart from the single replies.

The engine generates from the conversation as the episode format renders it: `chat_format` when the
engine prompts in the chat template (a chat model), else `PLAIN` (the character model); the engine's
own stop ids and batching are kept, only its prompt encoding is swapped (`episode_view`).

Samples: per category the `per_category` rows with the lowest hash of (seed, id), each a SAMPLE_FIELDS
record (mode `episode`, the final reply as `response`, the layered episode reward) plus `turns`,
`stop` and the whole `transcript` (verifiers.episode.Episode.to_dict).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass

EPISODE_MODE = "episode"  # the `mode` of an episode's record in a samples file


@dataclass(frozen=True)
class _Rendered:
    """The prompt encoding for text the episode format already rendered: the chat template wrote its
    own special tokens (none added again); the plain format gets the tokenizer's (its BOS), as
    training.episode_format.plain_render puts it in front."""

    add_special_tokens: bool

    def encode(self, tokenizer, prompt: str) -> list[int]:
        return tokenizer(prompt, add_special_tokens=self.add_special_tokens).input_ids


def episode_view(engine):
    """(engine, EpisodeFormat): the same model, batching and stop ids, prompting with the episode's
    rendered conversation. An engine without a `prompt_format` (a custom RolloutEngine) is used as it
    is, with the plain format."""
    from rlvrflow.training.episode_format import PLAIN, chat_format

    fmt = getattr(engine, "prompt_format", None)
    if fmt is None:
        return engine, PLAIN
    chat = getattr(fmt, "kind", "raw") == "chat"
    view = copy.copy(engine)  # shares the model (HF) or the running vLLM engine: nothing loads again
    view.prompt_format = _Rendered(add_special_tokens=not chat)
    return view, chat_format(engine.tokenizer) if chat else PLAIN


def _environments(rows: list[dict]) -> list[tuple[object, list[int]]]:
    """(Environment, row indices) per distinct environment the rows carry."""
    from rlvrflow.verifiers.environment import Environment

    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(str(r["verifier_params"]), []).append(i)
    out = []
    for params, idx in groups.items():
        try:
            env = Environment.model_validate_json(params)
        except ValueError as exc:
            raise ValueError(
                f"episode row {rows[idx[0]]['id']!r} ({rows[idx[0]].get('category')}): its verifier_params "
                f"is not an environment ({str(exc).splitlines()[0]}); rerun attach"
            ) from None
        out.append((env, idx))
    return out


def _rates(episodes: list) -> dict:
    from rlvrflow.training.episodes import episode_stats

    stats = episode_stats(episodes)
    return {"pass_at_1_greedy": stats.pop("success_rate"), **stats}


def _pick(rows: list[dict], per_category: int, seed: int) -> list[int]:
    def key(i: int) -> bytes:
        return hashlib.blake2b(f"{seed}\x00episode\x00{rows[i]['id']}".encode(), digest_size=8).digest()

    by_cat: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_cat.setdefault(str(r.get("category") or ""), []).append(i)
    picked = [i for idx in by_cat.values() for i in sorted(idx, key=key)[:per_category]]
    return sorted(picked, key=lambda i: (str(rows[i].get("category") or ""), str(rows[i]["id"])))


def sample_record(row: dict, episode, reward_cfg=None) -> dict:
    """An episode as a samples-file record (see the module docstring); its `reward` under `reward_cfg`
    (the spec's verifiers.reward, as GRPO rewards episodes; the defaults for None)."""
    from rlvrflow.verifiers.episode import EpisodeRewardConfig, episode_reward

    return {
        "id": str(row["id"]),
        "category": str(row.get("category") or ""),
        "prompt": str(row["prompt"]),
        "mode": EPISODE_MODE,
        "response": episode.final_reply,
        "status": episode.verdict.status,
        "score": float(episode.verdict.score),
        "reward": float(episode_reward(episode, EpisodeRewardConfig.of(reward_cfg)).total),
        "n_tokens": None,
        "turns": episode.assistant_turns,
        "stop": episode.stop,
        "transcript": json.loads(json.dumps(episode.to_dict(), default=str)),
    }


def evaluate_episode_rows(
    engine, rows: list[dict], max_new_tokens: int, seed: int, per_category: int, reward_cfg=None
) -> tuple[dict | None, list[dict]]:
    """(result, sample records) of one greedy episode per row, rows in id order; (None, []) without
    rows. `max_new_tokens` bounds each assistant message; `reward_cfg` (verifiers.reward) gives the
    samples' rewards."""
    from rlvrflow.engines import SamplingParams
    from rlvrflow.training.episodes import play_episodes

    rows = sorted(rows, key=lambda r: str(r["id"]))
    if not rows:
        return None, []
    view, fmt = episode_view(engine)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    episodes: list = [None] * len(rows)
    for env, idx in _environments(rows):
        played = play_episodes(view, env, [rows[i] for i in idx], fmt, greedy, seed)
        for i, ep in zip(idx, played):
            episodes[i] = ep
    categories = [str(r.get("category") or "") for r in rows]
    per_cat = {}
    for c in sorted(set(categories)):
        mine = [e for e, k in zip(episodes, categories) if k == c]
        per_cat[c] = {"n": len(mine), **{k: v for k, v in _rates(mine).items() if not isinstance(v, dict)}}
    result = {
        "n_prompts": len(rows),
        **_rates(episodes),
        "per_category": per_cat,
        "by_prompt": {
            "ids": [str(r["id"]) for r in rows],
            "greedy": [int(e.verdict.status == "correct") for e in episodes],
            "categories": categories,
            "turns": [e.assistant_turns for e in episodes],
            "stops": [e.stop for e in episodes],
        },
    }
    return result, [sample_record(rows[i], episodes[i], reward_cfg) for i in _pick(rows, per_category, seed)]


MESSAGE_CHARS = 400  # a message longer than this is clipped in the middle on the markdown page
ROLES = {"system": "system", "user": "user", "assistant": "agent", "tool": "tool"}


def _clip(text: object, limit: int = MESSAGE_CHARS) -> str:
    import html

    text = str(text)
    if len(text) > limit:
        text = f"{text[: limit // 2]} … [{len(text) - limit} chars cut] … {text[-limit // 2 :]}"
    text = html.escape(text, quote=False).replace("\r", "").replace("\n", "<br>")  # <tool_call> shows as text
    return text if text.strip() else "∅"


def transcript_markdown(record: dict) -> list[str]:
    """One episode record as markdown lines: a line per message (role in bold, a tool result with its
    tool's name, long text clipped), then how it ended and the verdict on the end state."""
    t = record.get("transcript") or {}
    lines = []
    for m in t.get("messages") or []:
        role = ROLES.get(m.get("role"), str(m.get("role")))
        name = f" `{m['name']}`" if m.get("role") == "tool" and m.get("name") else ""
        lines.append(f"- **{role}**{name}: {_clip(m.get('content', ''))}")
    verdict = t.get("verdict") or {}
    lines.append(
        f"- *{record.get('status')}, {record.get('turns')} turns, stopped by {record.get('stop')}, "
        f"{t.get('bad_calls', 0)} malformed calls, reward {float(record.get('reward') or 0):.2f}; "
        f"end state {_clip(verdict.get('extracted', ''), 200)}*"
    )
    return lines


def episodes_markdown(before: list[dict], after: list[dict], before_name: str, after_name: str) -> list[str]:
    """Episode records of two evals as markdown: per category, per prompt, each side's transcript."""
    left = {r["id"]: r for r in before if r.get("mode") == EPISODE_MODE}
    right = {r["id"]: r for r in after if r.get("mode") == EPISODE_MODE}
    keys = sorted(set(left) | set(right), key=lambda k: ((left.get(k) or right[k])["category"], k))
    lines, category = [], None
    for k in keys:
        row = left.get(k) or right[k]
        if row["category"] != category:
            category = row["category"]
            lines += ["", f"## {category or '(no category)'} (episodes)", ""]
        lines += [f"### {_clip(k, 80)}: {_clip(row['prompt'], 200)}", ""]
        for name, rec in ((before_name, left.get(k)), (after_name, right.get(k))):
            lines += [f"**{name}**", ""] + (transcript_markdown(rec) if rec else ["(not evaluated)"]) + [""]
    return lines


def held_out_episode_rows(episodes, eval_cfg) -> list[dict]:
    """The eval split's rows of split's episodes.parquet (a polars frame); with eval.max_prompts, at most
    that many, chosen as the single-reply prompts are (select_eval_tasks: each category's share, by a
    hash of the id). Here, not in flows/, so that the evaluate and compare keys cover the choice."""
    import polars as pl

    from rlvrflow.training.eval import select_eval_tasks

    held = episodes.filter(pl.col("split") == "eval")
    chosen = {t.id for t in select_eval_tasks(held, eval_cfg)} if held.height else set()
    return [r for r in held.to_dicts() if str(r["id"]) in chosen]
