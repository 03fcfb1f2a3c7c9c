"""Curriculum: pass@k tiers of the SFT model, and the samplers GRPO draws from.

    rows = assign_split(rows, cfg.eval_fraction, seed)
    tiered = tier_to_dir(rows.filter(split == "train"), sft_dir, cfg, out_dir, seed)   # or tier_rows(...)
    sampler = make_sampler(tiered, cfg, seed, batch_size, group_size)   # quota, adaptive or uniform (cfg.sampler)

Tiering samples through a rollout engine (`rlvrflow.engines`). Heavy dependencies (torch,
transformers, matplotlib) are imported inside the functions that use them, so `import
rlvrflow.curriculum` is cheap. See docs/DESIGN.md for where this sits in the pipeline.
"""

from rlvrflow.curriculum.adaptive import AdaptiveSampler, make_sampler
from rlvrflow.curriculum.config import AdaptiveSampling, CurriculumConfig, TierBoundaries, TierWeights
from rlvrflow.curriculum.passk import pass_at_k, pass_at_k_array, pass_at_k_by_category
from rlvrflow.curriculum.report import tier_report
from rlvrflow.curriculum.sampler import StratifiedSampler, UniformSampler
from rlvrflow.curriculum.split import assign_split
from rlvrflow.curriculum.tiering import tier_rows, tier_to_dir, tier_with_rollouts

__all__ = [
    "AdaptiveSampler",
    "AdaptiveSampling",
    "CurriculumConfig",
    "StratifiedSampler",
    "TierBoundaries",
    "TierWeights",
    "UniformSampler",
    "assign_split",
    "make_sampler",
    "pass_at_k",
    "pass_at_k_array",
    "pass_at_k_by_category",
    "tier_report",
    "tier_rows",
    "tier_to_dir",
    "tier_with_rollouts",
]
