"""Runs a small async GRPO job in its own process for the kill -9 tests of async rollouts.

    python async_rollouts_runner.py SFT_DIR OUT_DIR KILL_AFTER_STEP trainer|generator   (0 = never kill)

`trainer`: the process SIGKILLs itself right after that step, once the generator has written at least
one result that the run will not consume (what `kill -9` of the trainer does; its generator must die
with it, and the rerun must discard those results). `generator`: it SIGKILLs the generator process after that step and
trains on (the trainer restarts the generator). The summary goes to OUT_DIR/summary.json as usual.
"""

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

spec = importlib.util.spec_from_file_location("toy_conftest", Path(__file__).with_name("conftest.py"))
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)

STEPS = 6


def generator_pid(out: Path) -> int:
    (pid_file,) = (Path(out) / "rollout_queue").glob("*/generator.pid")
    return int(pid_file.read_text())


def wait_for_a_result(out: Path) -> None:
    """Until the queue's results/ holds a result file (the generator is working on the pending requests)."""
    while not list((Path(out) / "rollout_queue").glob("*/results/r*.json")):
        time.sleep(0.01)


def main() -> None:
    from rlvrflow.curriculum import CurriculumConfig
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    sft, out, kill_after, who = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cfg = toy.training_cfg(
        grpo={"max_steps": STEPS, "learning_rate": 1e-2, "rollout_mode": "async", "max_staleness": 2},
        checkpoint={"every": 2, "keep_last": 4},
    )

    def progress(step, total, metrics):
        if step == kill_after:
            if who == "trainer":
                wait_for_a_result(out)
            os.kill(os.getpid() if who == "trainer" else generator_pid(out), signal.SIGKILL)

    train_grpo(
        sft,
        toy.copy_rows(60, 1),
        cfg,
        CurriculumConfig(dedup_window=1, retier_window=1000),
        RewardConfig(),
        toy.copy_rows(6, 3, split="eval"),
        EvalConfig(k=1, n_samples=2, max_new_tokens=12),
        out,
        seed=3,
        on_progress=progress,
    )


if __name__ == "__main__":
    main()
