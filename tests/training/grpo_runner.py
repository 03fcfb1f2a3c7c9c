"""Runs a small GRPO job in its own process for the kill -9 / resume test.

    python grpo_runner.py SFT_DIR OUT_DIR KILL_AFTER_STEP [lora | adaptive]   (0 = never kill)

With KILL_AFTER_STEP > 0 the process SIGKILLs itself right after that step finishes: no cleanup, no
atomic-save grace, exactly what `kill -9` does. With `lora` the run trains LoRA adapters with a KL
term (reference: the adapter switched off) on chat-formatted prompts. With `adaptive` the prompts come
from the adaptive sampler (curriculum.sampler: adaptive) over made-up offline counts.
"""

import importlib.util
import os
import signal
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("toy_conftest", Path(__file__).with_name("conftest.py"))
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)


def main() -> None:
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    sft, out, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = toy.training_cfg(grpo={"max_steps": 5}, checkpoint={"every": 2, "keep_last": 3})
    if sys.argv[4:] == ["lora"]:
        cfg = toy.training_cfg(
            grpo={"max_steps": 5, "beta": 0.1, "learning_rate": 1e-2},
            checkpoint={"every": 2, "keep_last": 3},
            lora={"r": 4, "alpha": 8},
            prompt_format="chat",
        )

    def progress(step, total, metrics):
        if step == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    rows, cur = toy.copy_rows(60, 1), CurriculumConfig(dedup_window=1)
    if sys.argv[4:] == ["adaptive"]:
        import polars as pl

        rows = rows.with_columns(pl.Series("n_correct", [i % 5 for i in range(60)]), pl.lit(4).alias("n_samples"))
        cur = CurriculumConfig(dedup_window=1, sampler="adaptive")
    train_grpo(
        sft,
        rows,
        cfg,
        cur,
        RewardConfig(),
        toy.copy_rows(6, 3, split="eval"),
        EvalConfig(k=1, n_samples=2, max_new_tokens=12),
        out,
        seed=3,
        on_progress=progress,
    )


if __name__ == "__main__":
    main()
