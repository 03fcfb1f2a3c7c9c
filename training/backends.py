"""Optimizer backends: plain torch (one process, as SFT and DPO train, or N GRPO ranks with all-reduced
gradients under torchrun) or DeepSpeed ZeRO-2/3 (GRPO on several GPUs). Each builds the optimizer
and schedule of training/trainer.py's `Optim`.

All expose the same few calls, so `training/grpo.py` reads the same either way:
`module` (what training forwards call: the HF model, or the DeepSpeed engine wrapping it), `rows_for_this_rank(n)` (which of the step's n sequences
this process trains on, plus a 0/1 weight that zeroes data-parallel padding), `loss_denominator(tokens)`,
`backward(loss)`, `step() -> grad norm`, `lr()`, `named_parameters()` (full tensors, for vLLM sync),
`broadcast(obj)` (rank 0's object on every rank), `barrier()`, `generation_module` and
`sync_generation_module()` (the model rank 0 generates with), `save_checkpoint(...)` and
`state_dict()` / `load_state_dict(state, checkpoint_dir)` of the optimizer and schedule, and
`autocast()` (the precision context forwards run in: training/precision.py for torch; DeepSpeed casts
the module itself), and `exact_evals` (whether an eval of the live policy equals one of the saved
checkpoint, so the evaluate stage may read it: training/trainer.py).

The DeepSpeed path (see `training/distributed.py`): rank 0 alone generates rollouts and scores them;
each refill round's outcome is broadcast, so every rank reports the same success rates to its
sampler and keeps the same groups. The step's rows are padded with zero-weight copies to a multiple of
world_size * grad_accum, so each rank trains on a contiguous shard split into exactly grad_accum
equal micro-batches. Under ZeRO-3 the parameters are partitioned and every forward is a collective,
while the rollout decoder's number of forwards depends on the sampled tokens (it stops when all rows
ended), so ranks generating together could wait on each other forever; instead rank 0 keeps a plain
replica of the model for generation (rollouts and eval), refreshed through a one-parameter-at-a-time
gather after each update. That costs one full copy of the weights on rank 0: ZeRO-3 here saves
optimizer and gradient memory, it does not serve models too large for one GPU. Checkpoints use
DeepSpeed's own `engine.save_checkpoint` on every rank (each rank's optimizer partition) inside the
step's checkpoint directory, next to rank 0's HF weights. Tested on CPU with 2 gloo ranks
(`tests/training_scale/`); `bench/gpu_smoke.sh` is the GPU check.
"""

from __future__ import annotations

from rlvrflow.training.config import GRPOConfig
from rlvrflow.training.trainer import Optim


class TorchBackend:
    """`optim`'s AdamW + warmup/cosine LambdaLR on a single process, over the trainable parameters only.

    `dtype`: forwards run under autocast in it (float16 adds loss scaling). `lora`: the module is a
    peft model; `named_parameters()` then yields the merged weights in plain HF names (for vLLM).
    """

    is_main = True
    world_size = 1
    exact_evals = True  # one process evaluates exactly the weights it then saves

    def __init__(self, model, optim: Optim, dtype=None, lora: bool = False) -> None:
        import torch

        from rlvrflow.training.precision import LossScaler

        self.module = model
        self.lora = lora
        self.device = next(model.parameters()).device
        self.dtype = dtype or torch.float32
        self.scaler = LossScaler(self.device, self.dtype)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.max_grad_norm = optim.max_grad_norm
        self.opt = optim.adamw(self.params)
        self.sched = optim.schedule(self.opt)

    def rows_for_this_rank(self, n: int) -> tuple[list[int], list[float]]:
        return list(range(n)), [1.0] * n

    def loss_denominator(self, local_tokens: float) -> float:
        return max(local_tokens, 1.0)

    def zero_grad(self) -> None:
        self.opt.zero_grad(set_to_none=True)

    def backward(self, loss) -> None:
        self.scaler.backward(loss)

    def step(self) -> float:
        norm = self.scaler.step(self.opt, self.params, self.max_grad_norm)
        self.sched.step()
        return norm

    def autocast(self):
        from rlvrflow.training.precision import autocast

        return autocast(self.device, self.dtype)

    def lr(self) -> float:
        return self.sched.get_last_lr()[0]

    def named_parameters(self):
        if self.lora:
            from rlvrflow.training.lora import merged_named_parameters

            return merged_named_parameters(self.module)
        return self.module.named_parameters()

    @property
    def generation_module(self):
        return self.module

    def sync_generation_module(self) -> None:
        pass  # generation uses the trained module itself

    def broadcast(self, obj):
        return obj

    def barrier(self) -> None:
        pass

    def save_checkpoint(self, run_dir, step: int, tokenizer, state: dict, meta: dict, extra: dict | None = None):
        from rlvrflow.training import checkpoint as ckpt

        return ckpt.save_checkpoint(run_dir, step, self.module, tokenizer, state, meta, extra=extra)

    def state_dict(self) -> dict:
        state = {"optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict()}
        return {**state, "scaler": self.scaler.state_dict()} if self.scaler.scaler else state

    def load_state_dict(self, state: dict, checkpoint_dir=None) -> None:
        if "optimizer" not in state:
            raise ValueError(
                f"checkpoint {checkpoint_dir} holds {sorted(state)} optimizer state, not the torch "
                "backend's; resume with the backend that wrote it or use a new output directory"
            )
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state.get("scaler", {}))


class DeepSpeedBackend:
    """DeepSpeed ZeRO-2/3 engine; the launcher (`deepspeed --num_gpus N`) sets rank and world size."""

    CHECKPOINT_SUBDIR = "deepspeed"  # DeepSpeed's files inside step_NNNNNN/
    CHECKPOINT_TAG = "zero"
    exact_evals = False  # rank 0 evaluates its bf16 module or replica, not the saved HF weights as loaded

    def __init__(self, model, g: GRPOConfig, stage: int | None = None, bf16: bool | None = None) -> None:
        import copy

        import torch

        from rlvrflow.training import distributed as D

        self._d = D
        self.env = D.dist_env()
        self.is_main = self.env.is_main
        self.world_size = self.env.world_size
        self.stage = g.zero_stage if stage is None else stage
        self.grad_accum = g.gradient_accumulation_steps
        device = next(model.parameters()).device
        self.bf16 = device.type == "cuda" if bf16 is None else bf16  # fp32 on CPU (tests compare exactly)
        rows = g.prompts_per_step * g.num_generations
        # A full step (prompts_per_step groups) fills exactly grad_accum micro-batches of this size per
        # rank; a step with fewer groups is padded to a multiple of world_size * grad_accum instead
        # (smaller but equal micro-batches on every rank; the config's size is DeepSpeed's bookkeeping).
        micro = max(1, -(-rows // (g.gradient_accumulation_steps * self.world_size)))
        cfg = D.deepspeed_config(
            stage=self.stage,
            micro_batch=micro,
            grad_accum=g.gradient_accumulation_steps,
            lr=g.learning_rate,
            world_size=self.world_size,
            max_grad_norm=g.max_grad_norm,
            weight_decay=g.weight_decay,
            bf16=self.bf16,
        )
        # ZeRO-3: rank 0 generates with a plain replica (see the module docstring); copied before
        # DeepSpeed partitions the parameters.
        self._replica = None
        if self.stage == 3 and self.is_main:
            self._replica = copy.deepcopy(model).requires_grad_(False)
            if self.bf16:
                self._replica.to(torch.bfloat16)
        # the same warmup + cosine as TorchBackend, stepped at each update boundary
        schedule = Optim.of(g, g.num_iterations).schedule
        self.engine, self.opt = D.init_deepspeed(
            model, cfg, lr_scheduler=schedule, timeout_minutes=g.dist_timeout_minutes
        )
        # Training forwards go through the engine (it passes attributes through to the HF model): its
        # forward resets ZeRO's per-micro-batch backward bookkeeping, and under ZeRO-3 a forward on
        # engine.module instead silently loses all but the last micro-batch's gradients when
        # grad_accum > 1 (measured: tests/training_scale/ds_backend_worker.py).
        self.module = self.engine
        self._updates = self._replica_updates = 0

    def rows_for_this_rank(self, n: int) -> tuple[list[int], list[float]]:
        """This rank's rows of the step's n: padded to a multiple of world_size * grad_accum, so every
        rank gets the same count, which `update_policy` splits into exactly grad_accum equal micro-batches
        (one engine.backward + engine.step each; a rank with fewer would hang the gradient reduce)."""
        import torch

        self._d.check_same_on_all_ranks(n, "the step's row count")
        padded = self._d.pad_for_data_parallel({"i": torch.arange(n)}, self.world_size, micro_batch=self.grad_accum)
        mine = self._d.shard_rows({"i": padded.batch["i"], "w": padded.row_weight}, self.env.rank, self.world_size)
        return mine["i"].tolist(), mine["w"].tolist()

    def loss_denominator(self, local_tokens: float) -> float:
        return self._d.dp_loss_denominator(local_tokens, self.world_size)

    def zero_grad(self) -> None:
        pass  # engine.step() zeroes the gradients

    def backward(self, loss) -> None:
        # The loss is already divided by the whole step's token (or sequence) count over all ranks
        # (loss_denominator), so DeepSpeed must not divide it again by gradient_accumulation_steps.
        # DeepSpeed counts micro-batches itself: step() after every backward, it updates at the boundary.
        self.engine.backward(loss, scale_wrt_gas=False)
        self.engine.step()

    def step(self) -> float:
        self._updates += 1
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def lr(self) -> float:
        return self.opt.param_groups[0]["lr"]

    def named_parameters(self):
        return self._d.iter_gathered_params(self.engine)

    @property
    def generation_module(self):
        """The model rank 0 generates with: the trained module (ZeRO-2), rank 0's replica (ZeRO-3)."""
        return self._replica if self._replica is not None else self.engine.module

    def sync_generation_module(self) -> None:
        """ZeRO-3: copy the current weights into rank 0's replica if an update happened since the last
        copy. A collective: every rank must call it at the same point (the update count is the same on
        all ranks). No-op under ZeRO-2."""
        if self.stage != 3 or self._replica_updates == self._updates:
            return
        import torch

        target = dict(self._replica.named_parameters()) if self._replica is not None else {}
        with torch.no_grad():
            for name, full in self._d.iter_gathered_params(self.engine):
                if name in target:
                    target[name].copy_(full)
        self._replica_updates = self._updates

    def broadcast(self, obj):
        return self._d.broadcast_from_main(obj)

    def autocast(self):
        import contextlib

        return contextlib.nullcontext()  # DeepSpeed runs the module in bf16 itself (its config's bf16.enabled)

    def barrier(self) -> None:
        self._d.barrier()

    def save_checkpoint(self, run_dir, step: int, tokenizer, state: dict, meta: dict, extra: dict | None = None):
        """Every rank calls this. All ranks write DeepSpeed's checkpoint (each its optimizer partition)
        into `deepspeed/` of the temporary directory rank 0 named; rank 0 adds the gathered HF weights,
        tokenizer, state.pt and meta.json and, after a barrier, renames it into place."""
        from pathlib import Path

        from rlvrflow.training import checkpoint as ckpt

        tmp = self.broadcast(str(ckpt.checkpoint_tmp_dir(run_dir, step)) if self.is_main else None)
        tmp = Path(tmp)
        self.engine.save_checkpoint(str(tmp / self.CHECKPOINT_SUBDIR), tag=self.CHECKPOINT_TAG, save_latest=False)
        weights = self._d.gathered_state_dict(self.engine, is_main=self.is_main)  # collective under ZeRO-3
        if self.is_main:
            ckpt.write_checkpoint_files(
                tmp, step, self.engine.module, tokenizer, state, meta, state_dict=weights, extra=extra
            )
        self.barrier()  # every rank's partition is on disk before the directory becomes visible
        final = ckpt.commit_checkpoint(run_dir, tmp, step) if self.is_main else None
        self.barrier()
        return final

    def state_dict(self) -> dict:
        # The optimizer partitions and LR schedule are in DeepSpeed's own files (save_checkpoint).
        return {
            "deepspeed": {
                "dir": self.CHECKPOINT_SUBDIR,
                "tag": self.CHECKPOINT_TAG,
                "stage": self.stage,
                "world_size": self.world_size,
            }
        }

    def load_state_dict(self, state: dict, checkpoint_dir=None) -> None:
        """Load DeepSpeed's checkpoint (module, optimizer partitions, LR schedule) on every rank."""
        from pathlib import Path

        info = state.get("deepspeed")
        if info is None or checkpoint_dir is None:
            raise ValueError(
                f"checkpoint {checkpoint_dir} holds {sorted(state)} state, not the DeepSpeed backend's "
                "(or no checkpoint directory was given); resume with the backend that wrote it "
                "or use a new output directory"
            )
        if (info["stage"], info["world_size"]) != (self.stage, self.world_size):
            raise ValueError(
                f"checkpoint {checkpoint_dir} was written by ZeRO-{info['stage']} on {info['world_size']} "
                f"ranks, this run is ZeRO-{self.stage} on {self.world_size}; its optimizer partitions "
                "do not fit: resume with the same zero_stage and number of GPUs"
            )
        path = Path(checkpoint_dir)
        self._d.check_same_on_all_ranks(str(path.resolve()), "the checkpoint to resume from")
        loaded, _ = self.engine.load_checkpoint(
            str(path / info["dir"]), tag=info["tag"], load_optimizer_states=True, load_lr_scheduler_states=True
        )
        if loaded is None:
            raise FileNotFoundError(f"no DeepSpeed checkpoint under {path / info['dir']} (tag {info['tag']!r})")
        self._updates += 1  # weights (re)loaded: refresh the ZeRO-3 generation replica on next use


class DataParallelBackend(TorchBackend):
    """Plain torch on N ranks (torchrun): every rank holds the whole model and the same AdamW state;
    gradients are summed over ranks once per update, before clipping.

    The same row layout as the DeepSpeed path: rank 0 alone generates and scores, the groups are
    broadcast, the step's rows are padded to a multiple of world_size * grad_accum with zero-weight
    copies, and each rank trains on its shard. Each rank's loss is already divided by the global token
    (or sequence) count (`loss_denominator`), so the summed gradient is the one-process gradient and the
    replicated optimizers stay bit-identical without ever exchanging weights. Checkpoints: rank 0
    writes (every rank's optimizer state is the same); every rank loads the same files on resume.
    This is DDP's arithmetic without DDP's hooks: one flat all-reduce per dtype per update (not
    bucketed and overlapped with the backward), which is what this loop's few updates per step need.
    """

    exact_evals = False  # with several ranks the evaluate stage evaluates each checkpoint itself

    def __init__(self, model, g: GRPOConfig, dtype=None, lora: bool = False) -> None:
        from rlvrflow.training import distributed as D

        self._d = D
        self.env = D.dist_env()
        D.init_process_group(next(model.parameters()).device, g.dist_timeout_minutes)
        super().__init__(model, Optim.of(g, g.num_iterations), dtype, lora)
        self.is_main = self.env.is_main
        self.world_size = self.env.world_size
        self.grad_accum = g.gradient_accumulation_steps
        D.broadcast_parameters(self.params)  # the same start on every rank, whatever each one loaded

    def rows_for_this_rank(self, n: int) -> tuple[list[int], list[float]]:
        import torch

        self._d.check_same_on_all_ranks(n, "the step's row count")
        padded = self._d.pad_for_data_parallel({"i": torch.arange(n)}, self.world_size, micro_batch=self.grad_accum)
        mine = self._d.shard_rows({"i": padded.batch["i"], "w": padded.row_weight}, self.env.rank, self.world_size)
        return mine["i"].tolist(), mine["w"].tolist()

    def loss_denominator(self, local_tokens: float) -> float:
        # TorchBackend divides by this rank's tokens; here by the whole step's, so grads can be summed.
        return max(self._d.all_reduce_sum(local_tokens), 1.0)

    def step(self) -> float:
        self._d.all_reduce_gradients(self.params)
        return super().step()

    def broadcast(self, obj):
        return self._d.broadcast_from_main(obj)

    def barrier(self) -> None:
        self._d.barrier()

    def save_checkpoint(self, run_dir, step: int, tokenizer, state: dict, meta: dict, extra: dict | None = None):
        final = super().save_checkpoint(run_dir, step, tokenizer, state, meta, extra) if self.is_main else None
        self.barrier()  # no rank reads or prunes checkpoints before rank 0's rename
        return final


def make_backend(model, g: GRPOConfig, dtype=None, lora: bool = False):
    """The backend named by `g.backend`; `dtype` is the resolved `training.dtype` (None: float32, or
    DeepSpeed's own default of bf16 on a GPU). `torch` under a launcher with WORLD_SIZE > 1 is the
    data-parallel torch backend."""
    import torch

    from rlvrflow.training.distributed import dist_env

    if g.backend == "deepspeed":
        if dtype == torch.float16:
            raise ValueError("training.dtype float16 is not wired for grpo.backend deepspeed; use bfloat16 (or auto)")
        bf16 = None if dtype is None else dtype == torch.bfloat16
        return DeepSpeedBackend(model, g, bf16=bf16)  # ZeRO stage from g.zero_stage
    if dist_env().is_distributed:
        return DataParallelBackend(model, g, dtype, lora)
    return TorchBackend(model, Optim.of(g, g.num_iterations), dtype, lora)
