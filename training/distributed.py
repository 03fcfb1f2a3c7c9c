"""Scale-out pieces for GRPO on several GPUs: data-parallel padding, DeepSpeed ZeRO-2/3, weight gathering.

Everything here except `init_deepspeed` and the ZeRO-3 branch of the gather helpers runs on CPU without
DeepSpeed installed, so it is unit-tested on CPU. DeepSpeed is imported lazily, only where it is used.

How `train_grpo` uses this module when `TrainingConfig.grpo.backend == "deepspeed"` (launched with
`deepspeed --num_gpus N --module rlvrflow.flows.cli run SPEC ...` or `torchrun --nproc_per_node N -m rlvrflow.flows.cli run SPEC ...`;
flows/ranks.py runs the flow on rank 0 and brings every rank into the GRPO stage):

    env = dist_env()                                   # rank / local_rank / world size from the launcher
    bind_local_device(device)                          # each rank on its own GPU before models load
    ds_cfg = deepspeed_config(stage=g.zero_stage, micro_batch=mb, grad_accum=ga, lr=g.learning_rate,
                              world_size=env.world_size, max_grad_norm=g.max_grad_norm)
    engine, optimizer = init_deepspeed(model, ds_cfg, lr_scheduler=...)  # replaces model.to + AdamW
    ...rank 0 generates and scores; each refill round's outcome is made the same on every rank:
    scored = broadcast_from_main(scored)               # equal seeds do not promise equal tokens on GPUs
    advantages are computed per group on the whole batch, THEN:
    padded = pad_for_data_parallel(batch, env.world_size, micro_batch=grad_accum)  # no rank starves
    mine = shard_rows(padded.batch, env.rank, env.world_size)
    weight = shard_rows({"w": padded.row_weight}, env.rank, env.world_size)["w"]   # (B_rank,)
    loss_mask = mine["completion_mask"] * weight[:, None]                   # padding rows -> 0 loss
    denom = dp_loss_denominator(loss_mask.sum().item(), env.world_size)   # token-mean over all ranks
    loss = (per_token_loss * loss_mask).sum() / denom
    engine.backward(loss, scale_wrt_gas=False); engine.step()   # once per micro-batch, exactly grad_accum
                                                       # times per update; scale_wrt_gas=False because the
                                                       # denominator already spans the whole step
    engine.save_checkpoint(step_dir / "deepspeed")      # ALL ranks: each writes its optimizer partition
    gathered_state_dict(engine)                        # ALL ranks call it (a collective under ZeRO-3);
                                                       # only rank 0 gets the tensors and writes HF weights

Padding rows are copies of real rows (so shapes and dtypes are valid) whose loss weight is 0: every
rank runs the same number of forward/backward passes, so the gradient all-reduce never waits on a rank
that ran out of rows (the classic NCCL hang after zero-variance groups are filtered out).

Left out: tensor/pipeline parallelism, multi-node launch files, vLLM weight broadcast over NCCL (we
gather to rank 0 and hand `iter_gathered_params` to `VLLMEngine.load_weights`).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMPLATE_DIR = Path(__file__).parent / "deepspeed"
INSTALL_HINT = "pip install 'rlvrflow[gpu]'  (or: pip install deepspeed)"


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in the job, as set by `deepspeed`, `torchrun` or Slurm."""

    rank: int
    local_rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def _env_int(environ: Mapping[str, str], names: Sequence[str], default: int) -> int:
    for name in names:
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            return int(raw)
        except ValueError:
            raise ValueError(
                f"environment variable {name}={raw!r} is not an integer; unset it or fix the launcher"
            ) from None
    return default


def dist_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Rank, local rank and world size from the launcher's environment (single process when unset)."""
    env = os.environ if environ is None else environ
    rank = _env_int(env, ("RANK", "SLURM_PROCID"), 0)
    local_rank = _env_int(env, ("LOCAL_RANK", "SLURM_LOCALID"), 0)
    world = _env_int(env, ("WORLD_SIZE", "SLURM_NTASKS"), 1)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"launcher environment gives rank={rank}, world_size={world}; need 0 <= rank < world_size")
    return DistEnv(rank=rank, local_rank=local_rank, world_size=world)


# ---------------------------------------------------------------------------------------------------
# Data-parallel padding


@dataclass(frozen=True)
class DPPadded:
    """A batch padded to a multiple of world_size * micro_batch rows.

    `batch` has the same keys as the input; rows [n_real:] are copies of rows [0:n_pad] (cycled).
    `row_weight` (N_padded,) float32 is 1 for real rows and 0 for padding: multiply it into the loss mask.
    """

    batch: dict[str, Any]
    row_weight: Any
    n_real: int

    @property
    def n_rows(self) -> int:
        return int(self.row_weight.shape[0])

    @property
    def n_pad(self) -> int:
        return self.n_rows - self.n_real


def _rows(value: Any) -> int:
    shape = getattr(value, "shape", None)
    if shape is not None:
        if len(shape) == 0:
            raise ValueError("a 0-d tensor has no rows; give every batch entry a leading row dimension")
        return int(shape[0])
    return len(value)


def _take(value: Any, index: list[int]) -> Any:
    if hasattr(value, "index_select"):  # torch tensor: keep device and dtype
        import torch

        return value.index_select(0, torch.as_tensor(index, dtype=torch.long, device=value.device))
    if hasattr(value, "shape"):  # numpy array
        return value[index]
    return [copy.deepcopy(value[i]) for i in index]


def _concat(value: Any, extra: Any) -> Any:
    if hasattr(value, "index_select"):
        import torch

        return torch.cat([value, extra], dim=0)
    if hasattr(value, "shape"):
        import numpy as np

        return np.concatenate([value, extra], axis=0)
    return list(value) + list(extra)


def pad_for_data_parallel(batch: Mapping[str, Any], world_size: int, micro_batch: int = 1) -> DPPadded:
    """Pad every entry of `batch` (tensors, numpy arrays or lists sharing a row count N = prompts x G)
    with copies of its first rows until N is a multiple of world_size * micro_batch.

    Compute advantages before padding (they need whole groups). The copies get row_weight 0, so they
    add nothing to the loss or to the token count, but every rank runs the same number of micro-batches.
    """
    import torch

    if world_size < 1 or micro_batch < 1:
        raise ValueError(f"world_size={world_size}, micro_batch={micro_batch}: both must be >= 1")
    if not batch:
        raise ValueError("batch has no entries; pass a dict of tensors/lists with one row per sequence")
    counts = {key: _rows(value) for key, value in batch.items()}
    n_real = next(iter(counts.values()))
    if any(n != n_real for n in counts.values()):
        raise ValueError(f"batch entries disagree on the row count: {counts}; every entry needs one row per sequence")
    if n_real == 0:
        raise ValueError(
            "batch has 0 rows (every group filtered out?); refill the step before padding, "
            "padding cannot invent rows from nothing"
        )
    multiple = world_size * micro_batch
    n_pad = -n_real % multiple
    index = [i % n_real for i in range(n_pad)]
    padded = {key: _concat(value, _take(value, index)) if n_pad else value for key, value in batch.items()}
    weight = torch.zeros(n_real + n_pad, dtype=torch.float32)
    weight[:n_real] = 1.0
    return DPPadded(batch=padded, row_weight=weight, n_real=n_real)


def shard_rows(batch: Mapping[str, Any], rank: int, world_size: int) -> dict[str, Any]:
    """This rank's contiguous slice of a padded batch (row count must divide by world_size)."""
    counts = {_rows(v) for v in batch.values()}
    if len(counts) != 1:
        raise ValueError(f"batch entries disagree on the row count: {sorted(counts)}")
    n = counts.pop()
    if n % world_size:
        raise ValueError(f"{n} rows do not split over world_size={world_size}; call pad_for_data_parallel first")
    per = n // world_size
    return {key: value[rank * per : (rank + 1) * per] for key, value in batch.items()}


def all_reduce_sum(value: float) -> float:
    """Sum a number over all ranks (identity when torch.distributed is not initialized).

    Use it for the token-mean denominator so that padding and uneven real-token counts across ranks
    give the same loss scale as a single-process run.
    """
    import torch
    import torch.distributed as dist

    if not _dist_ready():
        return float(value)
    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


def _dist_ready() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def broadcast_from_main(obj: Any) -> Any:
    """Rank 0's `obj` on every rank (pickled; identity without torch.distributed).

    Use it for the step's scored groups: sampling with equal seeds on different GPUs is not guaranteed
    to give equal tokens, and ranks that disagree on the row count run different numbers of
    backward passes and hang in the gradient all-reduce.
    """
    if not _dist_ready():
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def init_process_group(device: Any, timeout_minutes: int | None = None) -> None:
    """Join the launcher's process group (NCCL for CUDA devices, gloo otherwise) unless already joined.

    torchrun and the deepspeed launcher set MASTER_ADDR/PORT, RANK and WORLD_SIZE; the collective
    timeout is long because ranks wait for rank 0's rollouts and evaluations."""
    import torch.distributed as dist

    if _dist_ready():
        return
    from datetime import timedelta

    kind = "nccl" if getattr(device, "type", str(device)) == "cuda" else "gloo"
    timeout = timedelta(minutes=timeout_minutes) if timeout_minutes else None
    dist.init_process_group(backend=kind, **({"timeout": timeout} if timeout else {}))


def leave_process_group() -> None:
    """Every rank, last thing, once its collectives are done: tear the process group down.

    A rank that exits with the group still up leaves gloo's threads to the interpreter's teardown, which
    can abort the process (`terminate called without an active exception`, SIGABRT) after all its work
    succeeded, and the launcher then fails the whole run. No barrier: a rank that is already gone must
    not make the others wait out the collective timeout."""
    import torch.distributed as dist

    if _dist_ready():
        dist.destroy_process_group()


def _flat_groups(params: Sequence[Any]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = {}
    for p in params:
        groups.setdefault((p.dtype, p.device), []).append(p)
    return groups


def all_reduce_gradients(params: Sequence[Any]) -> None:
    """Sum every parameter's gradient over ranks in place: one flat all-reduce per (dtype, device).

    A parameter without a gradient on this rank contributes zeros, so every rank calls the same
    collectives in the same order."""
    import torch
    import torch.distributed as dist

    if not _dist_ready():
        return
    for group in _flat_groups(params).values():
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in group]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        offset = 0
        for p in group:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p)
            offset += n


def broadcast_parameters(params: Sequence[Any]) -> None:
    """Copy rank 0's parameter values to every rank (a fresh start must be the same everywhere)."""
    import torch
    import torch.distributed as dist

    if not _dist_ready():
        return
    with torch.no_grad():
        for group in _flat_groups(params).values():
            flat = torch.cat([p.detach().reshape(-1) for p in group])
            dist.broadcast(flat, src=0)
            offset = 0
            for p in group:
                n = p.numel()
                p.copy_(flat[offset : offset + n].view_as(p))
                offset += n


def barrier() -> None:
    """Wait for every rank (no-op without torch.distributed)."""
    if _dist_ready():
        import torch.distributed as dist

        dist.barrier()


def bind_local_device(device: Any) -> Any:
    """Make this rank's GPU (LOCAL_RANK) the current CUDA device; returns the device to put tensors on.

    Call it before any model is loaded: `torch.device("cuda")` means the *current* device, which is
    GPU 0 on every rank until this runs, so a reference model loaded earlier would sit on GPU 0 while
    the rank's inputs go to its own GPU. CPU devices are returned unchanged.
    """
    import torch

    if getattr(device, "type", str(device)) != "cuda":
        return device
    local = dist_env().local_rank
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def check_same_on_all_ranks(value: Any, what: str) -> Any:
    """Raise (instead of hanging in NCCL later) when ranks disagree on a small picklable value such as a
    row count or a checkpoint path."""
    if not _dist_ready():
        return value
    import torch.distributed as dist

    seen: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(seen, value)
    if any(v != seen[0] for v in seen):
        raise RuntimeError(
            f"ranks disagree on {what}: {seen}; broadcast the step's batch from rank 0 "
            "(broadcast_from_main) before padding"
        )
    return value


def dp_loss_denominator(local_tokens: float, world_size: int) -> float:
    """The divisor for a token-mean loss on one rank so that data-parallel training matches one process.

    DeepSpeed (like DDP) averages gradients over ranks, so each rank divides its masked token-loss
    sum by (global real-token count / world_size). Padding rows carry no tokens in the mask, so they
    change neither the numerator nor this denominator.
    """
    total = all_reduce_sum(local_tokens)
    if total <= 0:
        raise ValueError("no real completion tokens on any rank; the step has nothing to learn from")
    return total / world_size


# ---------------------------------------------------------------------------------------------------
# DeepSpeed config and engine


def _fill_auto(node: Any, values: Mapping[str, Any], path: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _fill_auto(v, values, f"{path}.{k}" if path else k) for k, v in node.items()}
    if node == "auto":
        if path not in values:
            raise ValueError(f"template field {path} is 'auto' but deepspeed_config has no value for it")
        return values[path]
    return node


def deepspeed_config(
    stage: int,
    micro_batch: int,
    grad_accum: int,
    lr: float,
    world_size: int | None = None,
    max_grad_norm: float = 1.0,
    bf16: bool = True,
    offload: str = "none",
    weight_decay: float = 0.0,
    template_dir: Path | None = None,
) -> dict[str, Any]:
    """A DeepSpeed config dict from `training/deepspeed/zero{stage}.json`, "auto" fields filled in.

    train_batch_size = micro_batch * grad_accum * world_size (world_size from the launcher when None).
    `offload` is "none" or "cpu" (ZeRO-Offload of the optimizer, and for stage 3 also the params).
    The optimizer itself is built by `init_deepspeed` (torch AdamW), so no DeepSpeed op is compiled;
    lr and weight_decay ride along under the "rlvrflow" key for it.
    """
    if stage not in (2, 3):
        raise ValueError(f"stage={stage}: rlvrflow ships ZeRO-2 and ZeRO-3 templates; use stage 2 or 3")
    if micro_batch < 1 or grad_accum < 1:
        raise ValueError(f"micro_batch={micro_batch}, grad_accum={grad_accum}: both must be >= 1")
    if offload not in ("none", "cpu"):
        raise ValueError(f"offload={offload!r}: use 'none' or 'cpu'")
    world = dist_env().world_size if world_size is None else world_size
    path = (template_dir or TEMPLATE_DIR) / f"zero{stage}.json"
    template = json.loads(path.read_text(encoding="utf-8"))
    values = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "train_batch_size": micro_batch * grad_accum * world,
        "gradient_clipping": max_grad_norm,
        "bf16.enabled": bf16,
        "zero_optimization.offload_optimizer.device": offload,
        "zero_optimization.offload_param.device": offload,
    }
    cfg = _fill_auto(template, values)
    if offload == "cpu":
        cfg["zero_force_ds_cpu_optimizer"] = False  # our torch AdamW steps on the offloaded CPU copy
    cfg["rlvrflow"] = {"lr": lr, "weight_decay": weight_decay}
    return cfg


def _import_deepspeed():
    try:
        import deepspeed
    except ImportError as exc:
        raise ImportError(
            f"backend 'deepspeed' needs the deepspeed package, which is not installed ({exc}); "
            f"install it with: {INSTALL_HINT}, or set training.grpo.backend: torch"
        ) from exc
    return deepspeed


def init_deepspeed(
    model: Any, cfg: Mapping[str, Any], lr_scheduler: Any = None, timeout_minutes: int | None = None
) -> tuple[Any, Any]:
    """Wrap `model` in a DeepSpeed engine with a torch AdamW optimizer; returns (engine, optimizer).

    Initializes torch.distributed if the launcher has not (NCCL on GPU, gloo on CPU). Afterwards call
    `engine(...)` for the forward pass, `engine.backward(loss)` and `engine.step()` (which clips,
    steps, zeroes grads and honours gradient_accumulation_steps); `engine.module` is the HF model.
    `lr_scheduler`: a callable optimizer -> torch LR scheduler; DeepSpeed steps it at each update
    boundary and keeps its state in `engine.save_checkpoint`. `timeout_minutes`: the process group's
    collective timeout when this call initializes it (ranks wait for rank 0's rollouts and eval).
    """
    import torch

    deepspeed = _import_deepspeed()
    if timeout_minutes is not None and not torch.distributed.is_initialized():
        from datetime import timedelta

        deepspeed.init_distributed(timeout=timedelta(minutes=timeout_minutes))
    ds_cfg = {k: v for k, v in dict(cfg).items() if k != "rlvrflow"}
    opt_args = dict(cfg.get("rlvrflow", {}))
    if "optimizer" in ds_cfg:
        optimizer = None  # the config names its own (e.g. FusedAdam on a box that can build ops)
    else:
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            params, lr=opt_args.get("lr", 1e-5), weight_decay=opt_args.get("weight_decay", 0.0)
        )
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, config=ds_cfg, lr_scheduler=lr_scheduler
    )
    return engine, optimizer


# ---------------------------------------------------------------------------------------------------
# Gathering ZeRO-3 shards: checkpoints and vLLM weight sync


def _unwrap(model: Any) -> Any:
    return getattr(model, "module", model)


def _is_zero3_param(param: Any) -> bool:
    return hasattr(param, "ds_id")


@contextmanager
def _gathered(params: list[Any]) -> Iterator[None]:
    sharded = [p for p in params if _is_zero3_param(p)]
    if not sharded:
        with nullcontext():
            yield
        return
    deepspeed = _import_deepspeed()
    # modifier_rank=None: read-only gather, nothing is scattered back when the context closes.
    with deepspeed.zero.GatheredParameters(sharded, modifier_rank=None):
        yield


def iter_gathered_params(model: Any) -> Iterator[tuple[str, Any]]:
    """Yield (name, full tensor) for every parameter, one parameter gathered at a time.

    Under ZeRO-3 each rank holds a shard; this gathers one parameter on all ranks (all ranks must
    iterate together), so peak extra memory is one tensor, not the whole model. Under ZeRO-2 or no
    DeepSpeed it is `named_parameters()`. The tensor is only valid inside the loop body: copy it out
    (`t.detach().cpu().clone()`) or hand it straight to `VLLMEngine.load_weights([(name, t)])`.
    """
    for name, param in _unwrap(model).named_parameters():
        with _gathered([param]):
            yield name, param.data


def gathered_state_dict(model: Any, is_main: bool | None = None) -> dict[str, Any] | None:
    """Full CPU state dict on the main rank (None elsewhere); every rank must call it under ZeRO-3."""
    main = dist_env().is_main if is_main is None else is_main
    module = _unwrap(model)
    state: dict[str, Any] = {}
    for name, tensor in iter_gathered_params(module):
        if main:
            state[name] = tensor.detach().cpu().clone()
    persistent = set(module.state_dict().keys()) if main else set()
    for name, buf in module.named_buffers():
        if main and name in persistent:  # skip non-persistent buffers such as rotary inv_freq
            state[name] = buf.detach().cpu().clone()
    return state if main else None
