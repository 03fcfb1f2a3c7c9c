"""Optimizer backends for the GRPO loop: plain torch (one process) or DeepSpeed ZeRO (several GPUs).

Both expose the same few calls, so `training/grpo.py` reads the same either way:
`module` (the HF model for forwards), `rows_for_this_rank(n)` (which of the step's n sequences this
process trains on, plus a 0/1 weight that zeroes data-parallel padding), `loss_denominator(tokens)`,
`backward(loss)`, `step() -> grad norm`, `lr()`, `named_parameters()` (full tensors, for vLLM sync)
and `state_dict()/load_state_dict()` of the optimizer and schedule.

The DeepSpeed path follows `training/distributed.py`: every rank draws the same prompts and rollouts
(same seeds, same weights), the step's rows are padded to a multiple of the data-parallel size with
zero-weight copies and each rank trains on its contiguous shard. Generation is therefore repeated on
every rank; splitting rollouts across ranks is left out. It needs GPUs and is not exercised by the
CPU test suite (`bench/gpu_smoke.sh` is the smoke test).
"""

from __future__ import annotations

from training.config import GRPOConfig
from training.grpo_math import warmup_cosine


class TorchBackend:
    """AdamW + warmup/cosine LambdaLR on a single process."""

    is_main = True
    world_size = 1

    def __init__(self, model, g: GRPOConfig) -> None:
        import torch

        self.module = model
        self.max_grad_norm = g.max_grad_norm
        total = g.steps * g.updates_per_batch
        warm = g.warmup_steps * g.updates_per_batch
        self.opt = torch.optim.AdamW(model.parameters(), lr=g.lr, weight_decay=g.weight_decay)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: warmup_cosine(s, warm, total, g.min_lr_ratio)
        )

    def rows_for_this_rank(self, n: int) -> tuple[list[int], list[float]]:
        return list(range(n)), [1.0] * n

    def loss_denominator(self, local_tokens: float) -> float:
        return max(local_tokens, 1.0)

    def zero_grad(self) -> None:
        self.opt.zero_grad(set_to_none=True)

    def backward(self, loss) -> None:
        loss.backward()

    def step(self) -> float:
        import torch

        norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.max_grad_norm)
        self.opt.step()
        self.sched.step()
        return float(norm)

    def lr(self) -> float:
        return self.sched.get_last_lr()[0]

    def named_parameters(self):
        return self.module.named_parameters()

    def state_dict(self) -> dict:
        return {"optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])


class DeepSpeedBackend:
    """DeepSpeed ZeRO-2/3 engine; the launcher (`deepspeed --num_gpus N`) sets rank and world size."""

    def __init__(self, model, g: GRPOConfig, stage: int = 2) -> None:
        from training import distributed as D

        self.env = D.dist_env()
        self.is_main = self.env.is_main
        self.world_size = self.env.world_size
        rows = g.prompts_per_step * g.group_size
        micro = max(1, -(-rows // (g.grad_accum * self.world_size)))
        cfg = D.deepspeed_config(stage=stage, micro_batch=micro, grad_accum=g.grad_accum, lr=g.lr,
                                 world_size=self.world_size, max_grad_norm=g.max_grad_norm,
                                 weight_decay=g.weight_decay)
        self.engine, self.opt = D.init_deepspeed(model, cfg)
        self.module = self.engine.module
        self._lr = g.lr
        self._d = D

    def rows_for_this_rank(self, n: int) -> tuple[list[int], list[float]]:
        import torch

        padded = self._d.pad_for_data_parallel({"i": torch.arange(n)}, self.world_size)
        mine = self._d.shard_rows({"i": padded.batch["i"], "w": padded.row_weight}, self.env.rank, self.world_size)
        return mine["i"].tolist(), mine["w"].tolist()

    def loss_denominator(self, local_tokens: float) -> float:
        return self._d.dp_loss_denominator(local_tokens, self.world_size)

    def zero_grad(self) -> None:
        pass  # engine.step() zeroes the gradients

    def backward(self, loss) -> None:
        # DeepSpeed counts micro-batches itself: step() after every backward, it updates at the boundary.
        self.engine.backward(loss)
        self.engine.step()

    def step(self) -> float:
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def lr(self) -> float:
        return self.opt.param_groups[0]["lr"]

    def named_parameters(self):
        return self._d.iter_gathered_params(self.engine)

    def state_dict(self) -> dict:
        return {"optimizer": self.opt.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state["optimizer"])


def make_backend(model, g: GRPOConfig):
    """The backend named by `g.backend`."""
    if g.backend == "deepspeed":
        return DeepSpeedBackend(model, g)
    return TorchBackend(model, g)
