"""TrainingConfig's cross-field checks: each names the fields and the fix."""

import pytest
from pydantic import ValidationError

from rlvrflow.training.config import TrainingConfig


def test_lora_with_deepspeed_is_refused_for_grpo_only():
    """GRPO's DeepSpeed backend does not take peft adapters; DPO never runs on it, so its LoRA is fine."""
    with pytest.raises(ValidationError, match="lora is not supported with grpo.backend 'deepspeed'"):
        TrainingConfig(lora={"r": 8}, grpo={"backend": "deepspeed"})
    assert TrainingConfig(algorithm="dpo", lora={"r": 8}, grpo={"backend": "deepspeed"}).lora.r == 8
