"""Reward layers: turn a verdict (and the response's length) into one scalar for GRPO.

    format      = 1 if the verifier read an answer in the expected form (status correct or wrong,
                  and not hedging), else 0 (unparsed, error, timeout, hedged)
    correctness = verdict.score                      (in [0, 1]; partial credit where enabled)
    process     = score of cfg.process_verifier on the whole response with cfg.process_params as
                  its reference (e.g. keyword: "mentions the return-policy link"), else 0
    length_pen  = max_penalty * tanh(max(0, n - target) / scale)       (one-sided, default)
                  max_penalty * tanh(|n - target| / scale)             (two_sided)
                  0 when disabled; scale = scale_tokens or target_tokens; bounded by max_penalty
    total       = format_weight * format + correctness_weight * correctness
                  + process_weight * process - length_pen

The process verifier runs in this process: keep it cheap (keyword or regex), not code or sql.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from .config import LengthPenaltyConfig, RewardConfig
from .verdict import CORRECT, WRONG, Verdict


@dataclass(frozen=True)
class RewardParts:
    total: float
    format: float
    correctness: float
    process: float
    length_penalty: float


def format_score(verdict: Verdict) -> float:
    if verdict.status not in (CORRECT, WRONG) or verdict.hedged:
        return 0.0
    return 1.0


def length_penalty(n_tokens: int, cfg: LengthPenaltyConfig) -> float:
    if not cfg.enabled:
        return 0.0
    over = n_tokens - cfg.target_tokens
    over = abs(over) if cfg.two_sided else max(0, over)
    return cfg.max_penalty * math.tanh(over / cfg.scale)


def process_score(response: str, cfg: RewardConfig) -> float:
    if not cfg.process_verifier or cfg.process_weight == 0:
        return 0.0
    from .pool import verify

    return verify(cfg.process_verifier, response, json.dumps(cfg.process_params), {}).score


def reward(verdict: Verdict, response: str, n_tokens: int, cfg: RewardConfig) -> RewardParts:
    """The layered reward of one completion; see the module docstring for the formulas."""
    fmt = format_score(verdict)
    correctness = float(verdict.score)
    process = process_score(response, cfg)
    pen = length_penalty(int(n_tokens), cfg.length_penalty)
    total = cfg.format_weight * fmt + cfg.correctness_weight * correctness + cfg.process_weight * process - pen
    return RewardParts(total, fmt, correctness, process, pen)
