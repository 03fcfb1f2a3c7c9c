"""One rank of `train_grpo` on 2 gloo ranks (torchrun, CPU), on the copy task: `backend: deepspeed` with
ZeRO stage STAGE (2 or 3), or with STAGE 0 the data-parallel torch backend (no DeepSpeed needed).

    ds_loop_worker.py SFT_DIR OUT_DIR KILL_AFTER_STEP STAGE RECORD_JSON   (KILL_AFTER_STEP 0 = never)

Each rank writes RECORD_JSON.rank<N>: its metrics per step without the rank-local loss statistics, every
`sampler.report` call, how many times the rollout engine generated, and the run's evals. With
KILL_AFTER_STEP > 0 every rank SIGKILLs itself right after that step (torchrun then stops the job),
as a crashed multi-GPU run would. DS_LOOP_DEVICE=cuda runs it on GPUs (bench/gpu_smoke.py --loop).
"""

import importlib.util
import json
import os
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("toy_conftest", HERE.parent / "training" / "conftest.py")
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)

RANK_LOCAL = {
    "loss",
    "clip_fraction",
    "kl",
    "entropy",
    "step_seconds",
}  # this rank's shard statistics and its own clock


def main() -> None:
    from rlvrflow.curriculum import CurriculumConfig, StratifiedSampler
    from rlvrflow.engines import HFEngine
    from rlvrflow.training.config import EvalConfig
    from rlvrflow.training.distributed import leave_process_group
    from rlvrflow.training.grpo import train_grpo
    from rlvrflow.verifiers import RewardConfig

    sft, out, kill_after, stage, record_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    rank = int(os.environ.get("RANK", "0"))
    record = {"metrics": [], "reports": [], "generate_calls": 0}

    report = StratifiedSampler.report

    def recording_report(self, ids, rates):
        record["reports"].append([list(ids), [float(r) for r in rates]])
        return report(self, ids, rates)

    generate = HFEngine.generate

    def counting_generate(self, *args, **kwargs):
        record["generate_calls"] += 1
        return generate(self, *args, **kwargs)

    StratifiedSampler.report = recording_report
    if stage == 3:  # partition even this tiny model's parameters (the template keeps small ones whole)
        sys.path.insert(0, str(HERE))
        from ds_backend_worker import zero3_threshold_zero

        zero3_threshold_zero()
    HFEngine.generate = counting_generate
    device = os.environ.get("DS_LOOP_DEVICE", "cpu")  # bench/gpu_smoke.py sets cuda
    cfg = toy.training_cfg(
        device=device,
        grpo={
            "max_steps": 5,
            "gradient_accumulation_steps": 2,
            **({"backend": "deepspeed", "zero_stage": stage} if stage else {}),
        },
        checkpoint={"every": 2, "keep_last": 3},
    )

    def progress(step, total, metrics):
        record["metrics"].append({k: v for k, v in metrics.items() if k not in RANK_LOCAL})
        Path(f"{record_path}.rank{rank}").write_text(json.dumps(record))
        if step == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    result = train_grpo(
        sft,
        toy.copy_rows(60, 1),
        cfg,
        CurriculumConfig(dedup_window=1),
        RewardConfig(),
        toy.copy_rows(6, 3, split="eval"),
        EvalConfig(k=1, n_samples=2, max_new_tokens=12),
        out,
        seed=3,
        on_progress=progress,
    )
    record["evals"] = result["evals"]
    Path(f"{record_path}.rank{rank}").write_text(json.dumps(record))
    leave_process_group()


if __name__ == "__main__":
    main()
