"""One rank of the 2-process check of `training.backends.DeepSpeedBackend` itself (torchrun, gloo, CPU).

Runs the real `update_policy` through the backend on fixed GRPO groups (3 prompts x G=2 = 6 rows, plus
a step with only 2 groups, as after zero-variance filtering) under ZeRO-2 and ZeRO-3, each with
grad_accum 1 (a rank's micro-batch holds both completions of a prompt, so the shared-prompt forward
runs through the engine) and 2, then (rank 0) the same with the one-process `TorchBackend`. Writes to the
JSON file argv[1]: per run the rows and micro-batch sizes each rank trained on, the grad norms and the
final weights' distance to the torch run. ZeRO-3's parameter persistence threshold is set to 0 here so
that even this tiny model's parameters are really partitioned; after the updates rank 0's generation
replica is refreshed (`sync_generation_module`) and compared with the gathered weights.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from ds_worker import tiny_model  # noqa: E402

STEPS = 3


def groups():
    from rlvrflow.training.grpo import Group

    g = torch.Generator().manual_seed(5)
    out = []
    for p, rewards in enumerate(([1.0, 0.0], [0.2, 0.9], [0.0, 0.5])):
        prompt = torch.randint(4, 24, (3 + p,), generator=g).tolist()
        comps = [torch.randint(4, 24, (4 + p + j,), generator=g).tolist() for j in range(2)]
        out.append(Group(f"p{p}", prompt, comps, rewards, [r > 0.5 for r in rewards]))
    return out


def grpo_cfg(ga: int, backend: str = "deepspeed", stage: int = 2):
    from rlvrflow.training.config import GRPOConfig

    return GRPOConfig(
        max_steps=STEPS,
        prompts_per_step=3,
        num_generations=2,
        gradient_accumulation_steps=ga,
        learning_rate=1e-2,
        warmup_steps=1,
        max_grad_norm=1.0,
        backend=backend,
        zero_stage=stage,
        num_iterations=1,
    )


def schedule_of_groups(step: int):
    full = groups()
    return full if step != 1 else full[:2]  # step 1 kept only 2 groups: 4 rows, padded differently


def train(backend, g) -> dict:
    from rlvrflow.training.grpo import update_policy

    rows, norms = [], []
    for step in range(STEPS):
        grp = schedule_of_groups(step)
        n = sum(len(x.completion_ids) for x in grp)
        mine, _ = backend.rows_for_this_rank(n)
        rows.append(
            [len(mine), [len(mine[k :: g.gradient_accumulation_steps]) for k in range(g.gradient_accumulation_steps)]]
        )
        stats = update_policy(backend, None, grp, g, pad_id=0, device=torch.device("cpu"))
        norms.append(stats["grad_norm"])
    return {"rows": rows, "grad_norms": norms, "lr": backend.lr()}


def zero3_threshold_zero():
    import rlvrflow.training.distributed as D

    original = D.deepspeed_config

    def patched(*args, **kwargs):
        cfg = original(*args, **kwargs)
        if cfg["zero_optimization"]["stage"] == 3:
            cfg["zero_optimization"]["stage3_param_persistence_threshold"] = 0
        return cfg

    D.deepspeed_config = patched


def main() -> None:
    import torch.distributed as dist

    from rlvrflow.training.backends import DeepSpeedBackend, TorchBackend
    from rlvrflow.training.trainer import Optim
    from rlvrflow.training.distributed import dist_env, gathered_state_dict, leave_process_group

    if os.environ.get("DS_Z3_PERSIST") != "1":
        zero3_threshold_zero()
    env = dist_env()
    result = {}
    finals = {}
    runs = [
        r.split(":")
        for r in os.environ.get("DS_BACKEND_RUNS", "zero2_ga1:2:1,zero2_ga2:2:2,zero3_ga1:3:1,zero3_ga2:3:2").split(",")
    ]
    for name, stage, ga in ((n, int(s), int(a)) for n, s, a in runs):
        g = grpo_cfg(ga, stage=stage)
        backend = DeepSpeedBackend(tiny_model(0), g)
        rec = train(backend, g)
        if stage == 3:
            params = list(backend.engine.module.parameters())
            rec["partitioned"] = all(p.ds_tensor.numel() < p.ds_numel for p in params if p.ds_numel > 1)
            backend.sync_generation_module()
        state = gathered_state_dict(backend.engine, is_main=env.is_main)
        if env.is_main and stage == 3:
            replica = dict(backend.generation_module.named_parameters())
            rec["replica_diff"] = max((replica[k] - state[k]).abs().max().item() for k in state)
        per_rank = [None] * env.world_size
        dist.all_gather_object(per_rank, rec["rows"])
        rec["rows"] = per_rank
        result[name] = rec
        finals[name] = state
        dist.barrier()
    if env.is_main:
        for name, ga in (("torch_ga1", 1), ("torch_ga2", 2)):
            model = tiny_model(0)
            g = grpo_cfg(ga, backend="torch")
            result[name] = train(TorchBackend(model, Optim.of(g, g.num_iterations)), g)
            finals[name] = {k: v.detach().clone() for k, v in model.named_parameters()}
        init = dict(tiny_model(0).named_parameters())
        ref = finals["torch_ga1"]
        result["moved"] = max((ref[k] - init[k].detach()).abs().max().item() for k in ref)
        for name in finals:
            result[name]["max_diff_vs_torch_ga1"] = max((finals[name][k] - ref[k]).abs().max().item() for k in ref)
        Path(sys.argv[1]).write_text(json.dumps(result, indent=1))
    dist.barrier()
    leave_process_group()


if __name__ == "__main__":
    main()
