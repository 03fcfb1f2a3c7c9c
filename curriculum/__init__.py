"""Curriculum: rollout engines, pass@k tiers of the SFT model, and the stratified deduplicated sampler.

Heavy dependencies (torch, transformers, vllm) are imported inside the functions that use them, so
`import curriculum` is cheap. See docs/DESIGN.md for where this sits in the pipeline.
"""

from curriculum.config import CurriculumConfig, TierBoundaries, TierWeights
from curriculum.engines import Completion, HFEngine, RolloutEngine, SamplingParams

__all__ = [
    "Completion",
    "CurriculumConfig",
    "HFEngine",
    "RolloutEngine",
    "SamplingParams",
    "TierBoundaries",
    "TierWeights",
]
