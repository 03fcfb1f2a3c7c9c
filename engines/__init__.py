"""Rollout engines: n completions per prompt, with token ids and log-probs, behind one interface.

    engine = make_engine("hf", "runs/demo/sft", field="curriculum.engine")      # or "vllm"
    groups = engine.generate(prompts, n=8, sampling=SamplingParams(temperature=1.0), seed=0)

`HFEngine` (hf_engine.py) decodes with a live transformers model, which the GRPO trainer shares with
its policy; `VLLMEngine` (vllm_engine.py) is the same interface over vLLM's offline engine and is
loaded on first access, so `import rlvrflow.engines` needs neither vllm nor torch. Tiering, GRPO's
rollouts and the evaluation all sample through here (factory.py builds one from a model folder).
chat.py renders an agent's episode with the tokenizer's chat template and its tools:
`render_episode(tokenizer, transcript, tools) -> (input_ids, policy_mask)`, `render_prompt`.
"""

from rlvrflow.engines.chat import render_episode, render_prompt
from rlvrflow.engines.factory import make_engine
from rlvrflow.engines.hf_engine import Completion, HFEngine, PromptFormat, RolloutEngine, SamplingParams

__all__ = [
    "Completion",
    "HFEngine",
    "PromptFormat",
    "RolloutEngine",
    "SamplingParams",
    "VLLMEngine",
    "make_engine",
    "render_episode",
    "render_prompt",
]


def __getattr__(name: str):
    if name == "VLLMEngine":
        from rlvrflow.engines.vllm_engine import VLLMEngine

        return VLLMEngine
    raise AttributeError(f"module 'rlvrflow.engines' has no attribute {name!r}")
