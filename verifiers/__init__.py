"""Verifiers: turn a model response into a trusted, explained verdict and a reward.

    from rlvrflow.verifiers import verify, score_many
    verify("math", "so the answer is \\boxed{36}", "36", {})   # Verdict(1.0, 'correct', '36', ...)

Public names are loaded lazily so `import verifiers` pulls in neither sympy nor polars; see
docs/verifiers.md for the built-ins, the math voting rule, the sandbox and the reward formulas.
"""

from __future__ import annotations

import importlib

__all__ = [
    "Verdict",
    "get_verifier",
    "verify",
    "score_many",
    "attach",
    "register",
    "RewardConfig",
    "reward",
    "VerifierConfig",
    "VerifierRule",
    "LengthPenaltyConfig",
    "RewardParts",
    "AttachResult",
    "UnknownVerifier",
    "available",
    "Environment",
    "run_episodes",
    "episode_reward",
    "EpisodeRewardConfig",
    "check_environment",
]

_WHERE = {
    "Verdict": "verdict",
    "get_verifier": "registry",
    "register": "registry",
    "UnknownVerifier": "registry",
    "available": "registry",
    "verify": "pool",
    "score_many": "pool",
    "attach": "attaching",
    "AttachResult": "attaching",
    "reward": "shaping",
    "RewardParts": "shaping",
    "RewardConfig": "config",
    "VerifierConfig": "config",
    "VerifierRule": "config",
    "LengthPenaltyConfig": "config",
    "Environment": "environment",
    "run_episodes": "episode",
    "episode_reward": "episode",
    "EpisodeRewardConfig": "episode",
    "check_environment": "episode_canary",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'verifiers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
