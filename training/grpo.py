"""The GRPO loop, top to bottom: rollouts -> verifier rewards -> group advantages -> clipped update.

    result = train_grpo(sft_dir, tiered_train_df, TrainingConfig(), CurriculumConfig(), RewardConfig(),
                        eval_df, EvalConfig(), out_dir="runs/demo/grpo", seed=0)

One step: draw `prompts_per_step` prompts from the curriculum's sampler (`curriculum.make_sampler`),
sample `num_generations` completions each from the rollout engine (HF in-process, or vLLM with the weights
synced after every update), score them with the rows' verifiers in parallel processes, report each
group's success rate back to the sampler (online re-tiering, or the adaptive sampler's arm values), drop
zero-variance groups and refill from the sampler up to `max_refill_rounds` times, then take
`num_iterations` AdamW steps on the clipped GRPO loss (training/grpo_math.py). Every
`checkpoint.every` steps (and at the end) the policy is evaluated on the held-out rows and saved with
its optimizer, sampler and RNG state; a rerun resumes from the newest complete checkpoint (the
skeleton shared with SFT and DPO does those: training/trainer.py). Outputs in
out_dir: metrics.jsonl (a line every `logging_steps` steps), evals.jsonl (SFT baseline at step 0, then each
checkpoint), evals/ (each of those evals whole, for the evaluate stage to read back; one plain torch
process only: `training.eval.write_loop_eval`), rollout_samples.jsonl, tb/ (TensorBoard, with `training.report_to: [tensorboard]`),
curves.png, step_NNNNNN/ checkpoints, summary.json. A progress bar follows the steps on a terminal and a
step line goes to the log (training/grpo_logs.py says what each holds).

Prompts go in the run's prompt format (the chat template's user turn, or raw text; recorded in every
checkpoint); forwards run in `training.dtype` (training/precision.py). With `training.lora` only the
adapters train, checkpoints hold the adapter unmerged, the KL reference is the same model with the
adapter switched off, and vLLM receives the merged weights after every update.

Rollouts come from one of two collectors with the same calls (start, collect, updated, state_dict,
summary): `SyncRollouts` generates in this process between updates; with `grpo.rollout_mode: async`
`AsyncRollouts` (training/async_rollouts.py) has a generator process sample and score the groups
with a copy of the policy at most `max_staleness` updates old, through a queue under
out_dir/rollout_queue/; the sampler stays here, and the loss takes the generator's log-probs as the
old policy. summary.json counts every group: trained, zero-variance, stale, discarded at a resume.

Episode rows (an environment's category, verifier `episode`, tiered like any row) are drawn by the
same sampler; their ids are played as groups of whole conversations with the live policy and trained
in the same loss and optimizer step as the single replies (training/grpo_episodes.py). The step's
metrics carry their figures under `episode_` keys. Episodes need rollout_mode sync and one torch
process (an error names the field otherwise); with `rollout: vllm` the vLLM engine plays them too.

Every update logs the policy's mean token entropy over the batch's policy tokens, replies and episodes (`entropy` in
metrics.jsonl); `grpo.entropy_coef` turns it into a bonus in the loss.

Left out: splitting rollouts across data-parallel ranks, async rollouts with vLLM or several ranks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from rlvrflow.training import checkpoint as ckpt
from rlvrflow.training.config import EvalConfig, TrainingConfig
from rlvrflow.training.grpo_groups import Group, Tally, draw, rollout_seed, score_rollouts
from rlvrflow.training.grpo_logs import step_line, write_rollout_samples
from rlvrflow.io import read_jsonl
from rlvrflow.training.report import detect_reward_hacking, warn_loudly
from rlvrflow.training.grpo_episodes import EpisodeBatch
from rlvrflow.training.trainer import HeldOut, RunState, Trainer
from rlvrflow.verifiers.config import EPISODE

log = logging.getLogger("rlvrflow.training")


@dataclass
class GRPORun(RunState):
    """GRPO's run state: the skeleton's (step, evals, warnings, held-out results) plus group counts."""

    groups_seen: int = 0
    groups_zero_variance: int = 0
    groups_zero_solved: int = 0  # of those, groups whose completions were all correct
    groups_trained: int = 0
    groups_stale: int = 0  # async: dropped as older than max_staleness
    groups_discarded: int = 0  # async: results of a killed run's queue, thrown away at the resume
    generator_restarts: int = 0
    queue: dict = field(default_factory=dict)  # async: requests drawn but not consumed, groups not yet trained
    train_rewards: list[float] = field(default_factory=list)


GROUP_COUNTS = (
    "groups_seen",
    "groups_zero_variance",
    "groups_zero_solved",
    "groups_trained",
    "groups_stale",
    "groups_discarded",
    "generator_restarts",
)


def train_grpo(
    sft_model,
    tiered_train_df,
    cfg: TrainingConfig,
    curriculum_cfg,
    reward_cfg,
    eval_df,
    eval_cfg: EvalConfig,
    out_dir,
    seed: int,
    on_progress=None,
    workers: int | None = None,
    timeout_s: float = 30.0,
    eval_episodes=(),
) -> dict:
    """Run GRPO from `sft_model` (HF dir) on the tiered train rows; resume from out_dir when possible.

    tiered_train_df: polars rows with the DESIGN.md columns after `curriculum.tier_rows` (id, prompt,
    reference, verifier, verifier_params, category, tier, pass_at_1). curriculum_cfg: a
    `curriculum.config.CurriculumConfig` for the sampler. reward_cfg: a `verifiers.config.RewardConfig`.
    eval_df: held-out rows for `evaluate`; eval_episodes: held-out episode rows (an environment's category,
    as training/eval_episodes.py takes them), one greedy episode each at step 0 and every checkpoint, under
    each eval record's `episodes`, or as its headline when eval_df has no rows (an agent-only run).
    on_progress(step, total, metrics) is called after each step.
    workers, timeout_s: the verifier pool's processes and per-item deadline (the spec's verifiers
    section) for rewards and evals alike; workers=None: one process per CPU core.
    Returns {final_checkpoint, best_checkpoint, baseline, final, evals, zero_variance_fraction,
    steps, seconds, steps_per_second, warnings}.
    """
    import torch

    from rlvrflow.curriculum import make_sampler
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training import lora
    from rlvrflow.training.backends import make_backend
    from rlvrflow.training.distributed import bind_local_device, dist_env
    from rlvrflow.training.modeling import load_model_and_tokenizer, load_policy, pick_device, set_threads
    from rlvrflow.training.precision import dtype_name, resolve_dtype
    from rlvrflow.training.scoring import tasks_from_df

    g, out = cfg.grpo, Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    set_threads(cfg.torch_threads)
    device = pick_device(cfg.device)
    if g.rollout_mode == "async" and dist_env().is_distributed:
        raise ValueError(
            "training.grpo.rollout_mode 'async' runs in one process, not under a multi-rank launcher; "
            "launch without torchrun/deepspeed, or set rollout_mode: sync"
        )
    if g.backend == "deepspeed" or dist_env().is_distributed:
        device = bind_local_device(device)  # this rank's GPU, before any model is loaded
    dtype = resolve_dtype(cfg.dtype, device)
    if g.rollout_mode == "async":
        from rlvrflow.training.async_rollouts import check_dtype

        check_dtype(cfg, dtype)  # before any model is loaded
    torch.manual_seed(seed)
    resume = ckpt.latest_checkpoint(out)
    policy, tokenizer = load_policy(resume or sft_model, device, dtype, cfg.lora, base=sft_model)
    fmt = PromptFormat.for_tokenizer(tokenizer, cfg.prompt_format, cfg.system_prompt)
    ref = None
    if g.beta > 0:  # with LoRA: the base under the adapter, no second copy of the weights
        ref = (
            lora.AdapterDisabled(policy)
            if cfg.lora is not None
            else load_model_and_tokenizer(sft_model, device, trainable=False, dtype=dtype)[0]
        )
    backend = make_backend(policy, g, dtype, lora=cfg.lora is not None)
    counts = lora.parameter_counts(policy)
    log.info(
        "grpo: %s prompts, %s, %d of %d parameters trainable",
        fmt.kind,
        dtype_name(dtype),
        counts["trainable_params"],
        counts["total_params"],
    )
    is_episode = tiered_train_df["verifier"] == EPISODE
    tasks = {t.id: t for t in tasks_from_df(tiered_train_df.filter(~is_episode))}
    sampler = make_sampler(tiered_train_df, curriculum_cfg, seed, g.prompts_per_step, g.num_generations)
    if is_episode.any():  # before any engine starts: what the loop cannot play episodes with
        from rlvrflow.training.distributed import dist_env
        from rlvrflow.training.grpo_episodes import check_supported

        check_supported(g, dist_env().is_distributed)
    rollouts = _collector(
        g, out, backend, tokenizer, fmt, sft_model, cfg, tasks, reward_cfg, seed, device, dtype, workers, timeout_s
    )
    player = _episode_player(
        tiered_train_df.filter(is_episode), g, backend, tokenizer, fmt, reward_cfg, seed, device, rollouts
    )
    if player is not None:  # sync rollouts only (check_supported)
        rollouts.episodes = player
    trainer = Trainer(
        "grpo",
        out,
        cfg,
        backend,
        tokenizer,
        fmt,
        HeldOut(eval_df, eval_cfg, seed, reward_cfg, workers, timeout_s, tuple(eval_episodes)),
        g.max_steps,
        g.logging_steps,
        partial(step_line, total=g.max_steps),
        device,
        parts={"sampler": sampler},
        state_cls=GRPORun,
        meta={"sampler": curriculum_cfg.sampler},  # a stopped run's doctor reads it from its newest checkpoint
    )
    with trainer:
        run = trainer.start(resume)
        with rollouts:
            rollouts.start(run, backend)
            for step in range(run.step, g.max_steps):
                t_step = time.perf_counter()
                # 1. rollouts + rewards, zero-variance groups filtered out and refilled from the sampler
                groups, info = rollouts.collect(sampler, step, run)
                episodes = player.kept if player is not None else []
                ep_info = player.info() if player is not None else {}
                totals = step_counts(info, ep_info)
                for k in ("groups_seen", "groups_zero_variance", "groups_zero_solved"):
                    setattr(run, k, getattr(run, k) + totals[k])
                run.groups_trained += len(groups) + len(episodes)
                # 2. the policy update on whatever signal the step found, then the rollout weights
                upd = {"skipped": 1}  # no group had reward variance: nothing to learn from this step
                batch = (
                    EpisodeBatch(episodes, tokenizer, player.fmt, g, device, player.max_positions) if episodes else None
                )
                _note_context_full(run, step, ep_info, batch)
                batch = batch if batch is not None and batch.rendered else None
                if groups or batch is not None:
                    upd = update_policy(backend, ref, groups, g, tokenizer.pad_token_id, device, episodes=batch)
                run.step = step + 1
                rollouts.updated(backend, run.step, bool(groups or batch is not None))
                if "reward_mean" in info:  # the hacking check compares single replies with their held-out eval
                    run.train_rewards.append(info["reward_mean"])
                metrics = {
                    "step": run.step,
                    **info,
                    **ep_info,
                    **totals,
                    **upd,
                    "lr": backend.lr(),
                    "zero_variance_fraction_cum": run.groups_zero_variance / max(1, run.groups_seen),
                }
                trainer.log_step(metrics, time.perf_counter() - t_step, **_postfix(info))
                if backend.is_main:
                    write_rollout_samples(out, run.step, groups, tasks, g, episodes)
                # 3. eval + the reward-hacking check + checkpoint (with the collector's queue) + retention
                if trainer.checkpoint_due(run.step):
                    record = trainer.evaluate(run.step)
                    _check_reward_hacking(run, cfg)
                    run.queue = rollouts.state_dict()  # saved with the sampler that drew it
                    trainer.save(record)  # every rank: DeepSpeed's partitions
                if on_progress is not None:
                    on_progress(run.step, g.max_steps, metrics)

    metrics = read_jsonl(out / "metrics.jsonl", missing_ok=True)
    extra = {
        "zero_variance_fraction": run.groups_zero_variance / max(1, run.groups_seen),
        **{k: getattr(run, k) for k in GROUP_COUNTS},
        # steps where no group had reward variance, so the policy was not updated (report.json warns)
        "steps_without_update": sum(1 for m in metrics if m.get("skipped")),
        "notes": run.notes,
        "prompt_format": fmt.kind,
        "dtype": dtype_name(dtype),
        **counts,
        "rollout_mode": g.rollout_mode,
        "sampler": curriculum_cfg.sampler,  # the doctor's advice on flat groups depends on it
        **rollouts.summary(),
    }
    return trainer.finish(sft_model, extra)


def step_counts(info: dict, ep_info: dict) -> dict:
    """The step's group counts over both kinds (what summary.json adds up and the doctor reads):
    single-reply groups (`info`) plus episode groups (`ep_info`'s `episode_groups_*`, their share)."""
    out = {
        k: info[k] + ep_info.get(f"episode_{k}", 0)
        for k in ("groups_seen", "groups_zero_variance", "groups_zero_solved")
    }
    out["groups_used"] = info["groups_used"] + ep_info.get("episode_groups_used", 0)
    out["zero_variance_fraction"] = out["groups_zero_variance"] / max(1, out["groups_seen"])
    return out


def _postfix(info: dict) -> dict:
    """The progress bar's reward and correct rate: the single replies', on steps that drew any."""
    if "reward_mean" not in info:
        return {}
    return {"reward": f"{info['reward_mean']:.3f}", "correct": f"{info['correct_rate']:.0%}"}


def _note_context_full(run, step: int, ep_info: dict, batch) -> None:
    """Episodes stopped for room in the model's positions (or rendered past them) are left out of the
    loss: a log line on the step, and one warning for the run."""
    n = ep_info.get("episode_context_full", 0) + (batch.overlong if batch is not None else 0)
    if not n:
        return
    log.warning("grpo step %d: %d episodes stopped at context_full, left out of the loss", step + 1, n)
    message = (
        "episodes stopped at context_full (the model's positions could not hold another message) and were "
        "left out of the loss: lower generation.episode_max_new_tokens or the environment's max_turns, or use "
        "a model with a longer context"
    )
    if message not in run.warnings:
        run.warnings.append(message)


def _episode_player(rows, g, backend, tokenizer, fmt, reward_cfg, seed: int, device, rollouts):
    """The EpisodePlayer of the episode rows among the tiered rows (None without any): episodes rendered
    in the run's episode format, played by the live policy through an HF engine or, with `rollout: vllm`,
    by the rollouts' own vLLM engine (its weights pushed after every update as for the replies). Both are
    seen through `eval_episodes.episode_view`, as evaluate plays episodes: the rendered conversation's
    token ids, no special tokens added to a chat template's (one BOS)."""
    if rows.height == 0:
        return None
    from rlvrflow.engines import HFEngine
    from rlvrflow.engines.hf_engine import FormattedEngine
    from rlvrflow.training.episodes import context_limit
    from rlvrflow.training.eval_episodes import episode_view
    from rlvrflow.training.grpo_episodes import EpisodePlayer, check_fits

    if g.rollout == "vllm":
        shared = rollouts.engine
        base = shared if isinstance(shared, FormattedEngine) else FormattedEngine(shared, tokenizer, fmt)
    else:
        batch = max(g.prompts_per_step * g.num_generations, 1)
        base = HFEngine(backend.generation_module, tokenizer, str(device), batch, prompt_format=fmt)
    engine, episode_fmt = episode_view(base)
    by_id = {str(r["id"]): r for r in rows.iter_rows(named=True)}
    player = EpisodePlayer(engine, by_id, episode_fmt, g, reward_cfg, seed)
    player.max_positions = getattr(backend.module.config, "max_position_embeddings", None)
    limits = [n for n in (player.max_positions, context_limit(engine)) if n]  # vLLM's max_model_len may be less
    check_fits(by_id, tokenizer, episode_fmt, g, min(limits) if limits else None)
    return player


def _collector(
    g, out, backend, tokenizer, fmt, sft_model, cfg, tasks, reward_cfg, seed, device, dtype, workers, timeout_s
):
    """The rollout collector `grpo.rollout_mode` names: `SyncRollouts` or `AsyncRollouts`, the same calls."""
    if g.rollout_mode == "async":
        from rlvrflow.training.async_rollouts import AsyncRollouts

        return AsyncRollouts(out, sft_model, cfg, tasks, reward_cfg, seed, device, dtype, workers, timeout_s)
    # Only rank 0 generates (collect_groups): the other ranks start no vLLM engine, which would hold its
    # own copy of the weights and its share of GPU memory on every GPU for nothing.
    engine = (
        _rollout_engine(g.rollout, backend.generation_module, tokenizer, sft_model, device, cfg, fmt, dtype)
        if backend.is_main or g.rollout == "hf"
        else None
    )
    return SyncRollouts(engine, tasks, tokenizer, g, reward_cfg, seed, backend, fmt, workers, timeout_s)


class SyncRollouts:
    """Rollouts in the trainer's process between updates (`rollout_mode: sync`): HF generates with the
    live policy, vLLM with its own copy of the weights, pushed after each update and at a resume.
    The calls are AsyncRollouts' (training/async_rollouts.py): start, collect, updated, state_dict,
    summary, and a context that ends it."""

    def __init__(self, engine, tasks, tokenizer, g, reward_cfg, seed: int, backend, fmt, workers, timeout_s) -> None:
        self.engine, self.tasks, self.tokenizer, self.g, self.reward_cfg = engine, tasks, tokenizer, g, reward_cfg
        self.seed, self.backend, self.fmt, self.workers, self.timeout_s = seed, backend, fmt, workers, timeout_s
        self.episodes = None  # an EpisodePlayer (training/grpo_episodes.py) when the rows hold episodes

    def __enter__(self) -> "SyncRollouts":
        return self

    def __exit__(self, *exc) -> None:
        """Nothing runs beside the trainer; a vLLM engine is shut down now, not when it is collected, so
        the next engine in this process (evaluate's, another run's) may start."""
        if self.g.rollout == "vllm" and self.engine is not None:
            from rlvrflow.engines.factory import release

            release(self.engine)

    def start(self, run, backend) -> None:
        if run.step:  # resumed: the engine holds the SFT weights, the policy the checkpoint's
            _sync_weights(self.engine, backend, self.g.rollout)

    def collect(self, sampler, step: int, run) -> tuple[list[Group], dict]:
        with self.backend.autocast():
            return collect_groups(
                self.engine,
                sampler,
                self.tasks,
                self.tokenizer,
                self.g,
                self.reward_cfg,
                self.seed,
                step,
                dp=self.backend,
                prompt_format=self.fmt,
                workers=self.workers,
                timeout_s=self.timeout_s,
                episodes=self.episodes,
            )

    def updated(self, backend, step: int, trained: bool) -> None:
        if trained:
            _sync_weights(self.engine, backend, self.g.rollout)

    def state_dict(self) -> dict:
        return {}  # nothing drawn ahead of the step

    def summary(self) -> dict:
        return {}


def collect_groups(
    engine,
    sampler,
    tasks,
    tokenizer,
    g,
    reward_cfg,
    seed: int,
    step: int,
    dp=None,
    prompt_format=None,
    workers: int | None = None,
    timeout_s: float = 30.0,
    episodes=None,
) -> tuple[list[Group], dict]:
    """Sample, score and filter groups until `prompts_per_step` have reward variance (or rounds run out).

    `dp`: the backend when several data-parallel ranks run this together. Only rank 0 generates and
    scores; each round's token ids, rewards and correct flags are broadcast from it, so every rank
    reports the same success rates to its sampler (which therefore draws the same ids next round;
    checked) and keeps the same groups and info. Equal seeds alone do not promise equal tokens on GPUs.
    `prompt_format` (raw when None) encodes the groups' prompt ids as the engine encoded them.
    Completions are scored by `workers` pool processes (None: one per core) within `timeout_s` each.
    `episodes`: an EpisodePlayer that plays the episode ids of each draw (its groups in `episodes.kept`,
    counted toward `prompts_per_step`); the groups returned are the single replies'.
    """
    from rlvrflow.training.grpo_math import zero_variance_groups
    from rlvrflow.training.modeling import encode_prompt

    import torch

    shared = dp is not None and dp.world_size > 1
    if dp is not None and g.rollout == "hf":
        # ZeRO-3 keeps a replica for generation (also with one GPU): refresh it after the last update.
        # A collective under ZeRO-3 (every rank calls it); a no-op for the other backends.
        dp.sync_generation_module()
    kept: list[Group] = []
    tally = Tally()
    if episodes is not None:
        episodes.start_step()
    for rnd in range(1 + g.max_refill_rounds):
        need = g.prompts_per_step - len(kept) - (len(episodes.kept) if episodes is not None else 0)
        if need <= 0:
            break
        ids = draw(sampler, need)
        if not ids:  # the sampler had nothing eligible (when_exhausted: short_batch); its log says why
            break
        if episodes is not None:
            ids = episodes.take(ids, sampler, step, rnd)
            if not ids:  # every id drawn was an episode row's
                continue
        batch = [tasks[i] for i in ids]
        scored = None  # per prompt: completion token ids, rewards, correct flags
        if not shared or dp.is_main:
            comp, rew, cor, txt, sts, _, cut = score_rollouts(
                engine, batch, g, reward_cfg, rollout_seed(seed, step, rnd), workers, timeout_s
            )
            scored = comp, rew, cor, txt, sts, cut
        if shared:
            main_ids, scored = dp.broadcast((ids, scored))
            if main_ids != ids:
                raise RuntimeError(
                    f"step {step} round {rnd}: this rank's sampler drew {ids[:4]}..., rank 0's drew "
                    f"{main_ids[:4]}...; the samplers diverged (different tiers or seed per rank?)"
                )
        comp_ids, reward_rows, correct, texts, statuses, cut = scored
        rewards = torch.tensor(reward_rows, dtype=torch.float32)  # (P, G)
        sampler.report(ids, [sum(c) / len(c) for c in correct])  # online re-tiering
        flat = zero_variance_groups(rewards).tolist()
        for t, grp, r, c, txt, st, tr, is_zero in zip(
            batch, comp_ids, rewards.tolist(), correct, texts, statuses, cut, flat
        ):
            if tally.add(r, c, grp, is_zero and g.filter_zero_variance, tr):
                kept.append(
                    Group(t.id, encode_prompt(tokenizer, t.prompt, prompt_format), grp, r, c, txt, st, truncated=tr)
                )
    kept = kept[: g.prompts_per_step]
    return kept, tally.info(len(kept))


def update_policy(backend, ref, groups: list[Group], g, pad_id: int, device, episodes=None) -> dict:
    """`num_iterations` optimizer steps on the GRPO loss of `groups` and of `episodes` (an EpisodeBatch of
    conversations, training/grpo_episodes.py), one loss over both kinds' tokens; returns loss diagnostics."""
    import torch

    from rlvrflow.training.grpo_math import grpo_loss, group_advantages
    from rlvrflow.training.modeling import completion_logprobs

    rewards = torch.tensor([grp.rewards for grp in groups], dtype=torch.float32)  # (P, G)
    adv = group_advantages(rewards, g.scale_rewards == "group").flatten().tolist() if groups else []  # (B,)
    prompts = [grp.prompt_ids for grp in groups for _ in grp.completion_ids]
    comps = [c for grp in groups for c in grp.completion_ids]
    # mask_truncated_completions: a completion cut at max_new_tokens weighs nothing in the loss (its reward
    # still shaped its group's advantages), as DP padding weighs nothing
    cut = [
        bool(tr) and g.mask_truncated_completions
        for grp in groups
        for tr in (grp.truncated or [False] * len(grp.completion_ids))
    ]
    rows, weights = backend.rows_for_this_rank(len(comps))
    weights = [0 if cut[i] else w for i, w in zip(rows, weights)]
    local_tokens = sum(len(comps[i]) * w for i, w in zip(rows, weights))
    ep_tokens, ep_seqs = (episodes.tokens, episodes.seqs) if episodes is not None else (0.0, 0.0)
    denom_tok = backend.loss_denominator(local_tokens + ep_tokens)
    denom_seq = backend.loss_denominator(sum(weights) + ep_seqs)
    micro = [rows[k :: g.gradient_accumulation_steps] for k in range(g.gradient_accumulation_steps)]
    w_of = dict(zip(rows, weights))

    def logps(model, idx, grad: bool, entropy: str | None = None):
        with torch.set_grad_enabled(grad), backend.autocast():
            return completion_logprobs(
                model,
                [prompts[i] for i in idx],
                [comps[i] for i in idx],
                pad_id,
                device,
                entropy=entropy,
                temperature=g.temperature,
            )

    old = None
    if groups and groups[0].old_logprobs is not None:  # async: the generator's own log-probs, from an older policy
        gen = [lp for grp in groups for lp in grp.old_logprobs]
        old = {k: _padded([gen[i] for i in mb], device) for k, mb in enumerate(micro) if mb}
    elif g.num_iterations > 1:  # the ratio compares against the policy that generated the rollouts
        old = {k: logps(backend.module, mb, False)[0] for k, mb in enumerate(micro) if mb}
    ref_lp = {k: logps(ref, mb, False)[0] for k, mb in enumerate(micro) if mb} if ref is not None else {}
    if episodes is not None:
        episodes.prepare(backend, ref)
    stats = {"loss": 0.0, "grad_norm": 0.0, "masked_truncated": sum(cut[i] for i in rows)}
    # token-weighted over micro-batches, the conversations' policy tokens included
    sums = {"clip_fraction": 0.0, "kl": 0.0, "entropy": 0.0, "tokens": 0.0}
    for _ in range(g.num_iterations):
        backend.zero_grad()
        for k, mb in enumerate(micro):
            if not mb:
                continue
            # (b, T) each; the entropy keeps its graph only when the loss uses it
            logp, mask, entropy = logps(backend.module, mb, True, "grad" if g.entropy_coef > 0 else "value")
            mask = mask & torch.tensor([w_of[i] > 0 for i in mb], device=device).unsqueeze(1)  # DP padding
            old_lp = old[k] if old is not None else logp.detach()
            a = torch.tensor([adv[i] for i in mb], device=device)
            loss, st = grpo_loss(
                logp,
                old_lp,
                ref_lp.get(k),
                a,
                mask,
                g.epsilon,
                g.epsilon_high,
                g.beta,
                g.loss_agg,
                total_tokens=denom_tok,
                total_seqs=denom_seq,
                entropy=entropy,
                entropy_coef=g.entropy_coef,
            )
            backend.backward(loss)
            stats["loss"] += float(loss.detach()) / g.num_iterations
            n = float(mask.sum())  # a micro-batch of DP padding only counts for nothing
            for key in ("clip_fraction", "kl", "entropy"):
                sums[key] += st.get(key, 0.0) * n
            sums["tokens"] += n
        if episodes is not None:  # the conversations' share of the same loss, before the one step
            loss, st, n = episodes.backward(backend, denom_tok, denom_seq)
            stats["loss"] += loss / g.num_iterations
            for key in ("clip_fraction", "kl", "entropy"):
                sums[key] += st[key]
            sums["tokens"] += n
        stats["grad_norm"] = backend.step()
    for key in ("clip_fraction", "kl", "entropy"):  # this rank's tokens (rank 0's when logged)
        stats[key] = sums[key] / max(sums["tokens"], 1.0)
    if episodes is not None:
        stats["episode_policy_tokens"] = episodes.tokens
    return stats


def _padded(rows: list[list[float]], device):
    """Per-token log-probs right-padded with 0 to (b, Tc), the shape `completion_logprobs` returns."""
    import torch

    out = torch.zeros((len(rows), max(1, max(len(r) for r in rows))), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.float32)
    return out.to(device)


def _rollout_engine(kind: str, model, tokenizer, sft_model, device, cfg: TrainingConfig, fmt, dtype):
    """HF (the live policy) or vLLM (its own copy of the SFT weights, in `dtype`, prompts rendered in `fmt`)."""
    if kind == "vllm":
        from rlvrflow.engines.factory import default_max_model_len, vllm_prompting
        from rlvrflow.engines.hf_engine import FormattedEngine
        from rlvrflow.engines.vllm_engine import VLLMEngine
        from rlvrflow.training.precision import dtype_name

        max_len = cfg.tiny.max_positions if cfg.is_embedded else default_max_model_len(sft_model)
        vllm = VLLMEngine(
            str(sft_model),
            dtype=dtype_name(dtype),
            max_model_len=max_len,
            seed=cfg.seed,
            enforce_eager=device.type == "cpu",
            stop_token_ids=vllm_prompting(sft_model, fmt)[2],  # the HF engine's: EOS and the template's end of turn
        )
        return vllm if fmt.kind == "raw" else FormattedEngine(vllm, tokenizer, fmt)
    from rlvrflow.engines import HFEngine

    batch = max(cfg.grpo.prompts_per_step * cfg.grpo.num_generations, 1)
    return HFEngine(model, tokenizer, device=str(device), batch_size=batch, prompt_format=fmt)


def _sync_weights(engine, backend, rollout: str) -> None:
    """vLLM holds its own copy of the weights: push the updated policy after every update.

    Every rank calls this. Under ZeRO-3 `backend.named_parameters()` gathers one parameter at a time
    on all ranks (a collective) and a gathered tensor is only promised valid inside the loop body
    (`training.distributed.iter_gathered_params`), so rank 0 clones each one before handing the list to
    vLLM, and ranks without an engine iterate only to take part.
    """
    if rollout != "vllm" and not hasattr(engine, "load_weights"):
        return  # the HF engine generates with the trained module itself
    params = backend.named_parameters()
    if engine is None:
        for _ in params:  # join every gather; nothing to load here
            pass
        return
    partitioned = getattr(backend, "stage", None) == 3
    engine.load_weights([(name, t.detach().clone() if partitioned else t) for name, t in params])


def _check_reward_hacking(run: GRPORun, cfg: TrainingConfig) -> None:
    """The banner on evidence (a warning in the summary), a quiet note when the run is too small to tell."""
    # the training reward is the mean over sampled rollouts, so it is compared with held-out sampled pass@1:
    # against greedy, a policy that only sharpens onto answers greedy decoding already gave (sampled up,
    # greedy flat) would read as hacking. Greedy only where the evals kept no sampled scores.
    both = (run.held_out_first, run.held_out_last)
    metric = "sampled" if all(b.get("sampled") and len(b["sampled"]) == len(b["ids"]) for b in both) else "greedy"
    check = detect_reward_hacking(
        run.train_rewards,
        {"by_prompt": run.held_out_first},
        {"by_prompt": run.held_out_last},
        cfg.grpo.hacking_alarm,
        metric,
    )
    if check is None:
        return
    if check.loud and check.message not in run.warnings:
        run.warnings.append(check.message)
        warn_loudly(check.message)
    elif not check.loud and check.message not in run.notes:
        run.notes.append(check.message)
        log.info(check.message)
