"""One rank of the 2-process ZeRO-2/3 check, launched by test_deepspeed_cpu.py through torchrun (gloo, CPU).

Each rank builds the same tiny Llama from a seed, pads a 6-row GRPO-shaped batch (3 prompts x G=2) to
8 rows for world_size=2, takes its 4 rows, and runs a few steps of a token-mean policy-gradient loss
through `init_deepspeed` / `engine.backward` / `engine.step`. Rank 0 also runs the same steps in one
plain torch process on the 6 real rows (no padding, no DeepSpeed) and writes both parameter sets'
distance plus the per-rank row counts to the JSON file named by argv[1]; argv[2] is the ZeRO stage.
Every rank then joins the ZeRO-3 gather (`gathered_state_dict`) and rank 0 saves the weights as an HF checkpoint,
which it reloads with plain transformers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def tiny_model(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=24,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).float()


def make_batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(4, 24, (6, 10), generator=g)  # (N, T) = (3 prompts x 2, prompt 4 + completion 6)
    mask = torch.zeros(6, 10)
    mask[:, 4:] = 1.0
    mask[1, 8:] = 0.0  # one shorter completion so token counts differ per row
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])  # (N,), already group-normalized
    return {"input_ids": input_ids, "completion_mask": mask, "advantages": adv}


def per_token_loss(model, input_ids: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=input_ids).logits[:, :-1]  # (B, T-1, V)
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return -advantages[:, None] * logp  # (B, T-1)


def run_deepspeed(steps: int, lr: float, stage: int):
    from rlvrflow.training.distributed import (
        deepspeed_config,
        dist_env,
        dp_loss_denominator,
        gathered_state_dict,
        init_deepspeed,
        pad_for_data_parallel,
        shard_rows,
    )

    env = dist_env()
    cfg = deepspeed_config(stage=stage, micro_batch=4, grad_accum=1, lr=lr, world_size=env.world_size, bf16=False)
    engine, _ = init_deepspeed(tiny_model(0), cfg)
    padded = pad_for_data_parallel(make_batch(1), env.world_size, micro_batch=4)
    mine = shard_rows({**padded.batch, "w": padded.row_weight}, env.rank, env.world_size)
    losses = []
    for _ in range(steps):
        mask = mine["completion_mask"][:, 1:] * mine["w"][:, None]  # padding rows -> 0
        denom = dp_loss_denominator(mask.sum().item(), env.world_size)
        loss = (per_token_loss(engine, mine["input_ids"], mine["advantages"]) * mask).sum() / denom
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    state = gathered_state_dict(engine, is_main=env.is_main)
    return state or {}, int(mine["input_ids"].shape[0]), losses, engine


def run_reference(steps: int, lr: float) -> dict[str, torch.Tensor]:
    model = tiny_model(0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    batch = make_batch(1)
    for _ in range(steps):
        mask = batch["completion_mask"][:, 1:]
        loss = (per_token_loss(model, batch["input_ids"], batch["advantages"]) * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def main() -> None:
    import torch.distributed as dist

    from rlvrflow.training.distributed import dist_env, gathered_state_dict, leave_process_group

    out_path, stage, steps, lr = sys.argv[1], int(sys.argv[2]), 3, 1e-2
    state, rows, losses, engine = run_deepspeed(steps, lr, stage)
    env = dist_env()
    counts = [None] * env.world_size
    dist.all_gather_object(counts, rows)
    ckpt_dir = Path(out_path).with_suffix(".ckpt")
    weights = gathered_state_dict(engine, is_main=env.is_main)  # collective under ZeRO-3: every rank calls it
    if env.is_main:  # as DeepSpeedBackend.save_checkpoint writes a checkpoint's HF weights
        engine.module.save_pretrained(ckpt_dir, state_dict=weights)
    if env.is_main:
        from transformers import LlamaForCausalLM

        ref = run_reference(steps, lr)
        init = dict(tiny_model(0).named_parameters())
        reloaded = dict(LlamaForCausalLM.from_pretrained(ckpt_dir).named_parameters())
        Path(out_path).write_text(
            json.dumps(
                {
                    "rows_per_rank": counts,
                    "losses": losses,
                    "keys": sorted(state),
                    "max_diff": max((state[k] - ref[k]).abs().max().item() for k in ref),
                    "moved": max((ref[k] - init[k].detach()).abs().max().item() for k in ref),
                    "reload_diff": max((reloaded[k].detach() - ref[k]).abs().max().item() for k in ref),
                }
            )
        )
    dist.barrier()
    leave_process_group()


if __name__ == "__main__":
    main()
