"""The training skeleton SFT, DPO and GRPO share; each algorithm supplies its batches and its loss.

    backend = TorchBackend(policy, Optim.of(cfg.dpo), dtype)   # AdamW, warmup + cosine to a floor, precision
    trainer = Trainer("dpo", out, cfg, backend, tokenizer, fmt, HeldOut(eval_df, eval_cfg, seed), d.max_steps, d.logging_steps)
    with trainer:
        run = trainer.start(ckpt.latest_checkpoint(out))  # resume, or evaluate the start model (step 0)
        for step in range(run.step, d.max_steps):
            loss = ...                                               # the algorithm's batch and loss
            backend.zero_grad(); backend.backward(loss); backend.step()
            run.step = step + 1
            trainer.log_step({"step": run.step, "loss": ...}, seconds, line)
            if trainer.checkpoint_due(run.step):
                trainer.save(trainer.evaluate(run.step))
    summary = trainer.finish(sft_model, extra)

What it owns:
- the optimizer and schedule (`Optim`): AdamW over the trainable parameters, linear warmup then a
  cosine decay to `min_lr_ratio` of the rate (the section's field; SFT's is a fixed 0.1), built by
  the backends (training/backends.py), which also own precision (autocast, fp16 loss scaling) and
  how a checkpoint's files are written (one process, N ranks, or DeepSpeed partitions);
- the step log (`StepLog`): every `log_every` steps and the last, a JSONL line of what the seed
  decides, TensorBoard scalars with the step's wall time, and a log line; a progress bar on a terminal;
- a DPO or GRPO run folder (`Trainer`): a fresh start (old logs removed, the start model evaluated as
  step 0) or a resume from the newest complete checkpoint (optimizer, schedule, scaler, RNG, `RunState`
  and the caller's stateful parts, with the logs cut back to its step); the held-out eval at every
  checkpoint (`evals.jsonl`, samples/, and with one plain torch process the eval whole under evals/,
  which the evaluate stage reads as its record: `training.eval.write_loop_eval`); checkpoint
  retention; and summary.json + curves.png at the end.

Left out: gradient accumulation and data parallelism (the GRPO loss and backends do those), schedulers
other than warmup + cosine, SFT checkpoints mid-run (SFT is short and reruns whole).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from rlvrflow.io import append_jsonl, read_jsonl, write_json, write_text
from rlvrflow.training import checkpoint as ckpt
from rlvrflow.training.eval import (
    EVAL_BATCH,
    LOOP_EVALS_DIR,
    drop_loop_evals,
    write_checkpoint_eval,
    write_loop_eval,
)
from rlvrflow.training.progress import Scalars, progress_bar
from rlvrflow.training.report import plot_curves

log = logging.getLogger("rlvrflow.training")

RUN_LOGS = ("metrics.jsonl", "evals.jsonl", "rollout_samples.jsonl")  # JSONL files cut back to the checkpoint on resume
TB_DIR = "tb"


def warmup_cosine(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """LR multiplier: linear warmup from 1/warmup to 1 over `warmup` steps, then cosine to `min_ratio`."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class Optim:
    """AdamW and its schedule, counted in optimizer updates."""

    lr: float
    weight_decay: float
    warmup_steps: int
    total_steps: int
    min_lr_ratio: float
    max_grad_norm: float

    @classmethod
    def of(cls, section, updates_per_step: int = 1) -> "Optim":
        """From `training.sft`, `.dpo` or `.grpo` (GRPO takes `num_iterations` updates per step)."""
        return cls(
            section.learning_rate,
            section.weight_decay,
            section.warmup_steps * updates_per_step,
            section.max_steps * updates_per_step,
            section.min_lr_ratio,
            section.max_grad_norm,
        )

    def adamw(self, params):
        import torch

        return torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)

    def schedule(self, opt):
        import torch

        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: warmup_cosine(s, self.warmup_steps, self.total_steps, self.min_lr_ratio)
        )


class StepLog:
    """Every `every` steps and at step `last`: the metrics as a JSON line (to `path` when given, and in
    `lines`), as TensorBoard scalars `<name>/*` with the step's wall time, and `line(metrics)` in the log.

    The wall time stays out of the JSON: the file holds what the seed decides, so a resumed run's file
    equals an uninterrupted run's."""

    def __init__(
        self, name: str, every: int, last: int, scalars: Scalars, line: Callable[[dict], str], path: Path | None = None
    ) -> None:
        self.name, self.every, self.last, self.scalars, self.line, self.path = name, every, last, scalars, line, path
        self.lines: list[str] = []

    def __call__(self, metrics: dict, seconds: float) -> None:
        step = metrics["step"]
        if step % self.every and step != self.last:
            return
        self.lines.append(json.dumps(metrics, sort_keys=True))
        if self.path is not None:
            append_jsonl(self.path, metrics)
        timed = {**metrics, "step_seconds": seconds}
        self.scalars.add(self.name, timed, step)
        log.info(self.line(timed))


@dataclass
class RunState:
    """What a checkpoint carries besides weights, optimizer and RNG to resume a run exactly."""

    step: int = 0
    evals: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # quiet findings (logged as info, not warnings)
    # per-prompt held-out results ({ids, greedy, sampled}) of the start model and of the latest eval:
    # the reward-hacking check's paired interval
    held_out_first: dict = field(default_factory=dict)
    held_out_last: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HeldOut:
    """The held-out eval a run does at step 0 and at every checkpoint (training/eval.py `evaluate_live`).

    workers, timeout_s: the verifier pool's processes (None: one per CPU core) and per-item deadline.
    episodes: held-out rows of an environment's category (training/eval_episodes.py), one greedy episode
    each, reported under the record's `episodes`; with no single-reply `rows` they are the headline."""

    rows: Any
    cfg: Any
    seed: int
    reward_cfg: Any = None
    workers: int | None = None
    timeout_s: float = 30.0
    episodes: tuple = ()


class Trainer:
    """A DPO or GRPO run folder: start or resume, the step log, eval + checkpoint, the summary.

    `backend`: training/backends.py (its `is_main`, `broadcast` and `barrier` make every rank keep the
    same RunState). `parts`: objects with state_dict/load_state_dict saved in each checkpoint under
    their key (GRPO's sampler). `state_cls`: RunState or an algorithm's extension of it. `meta`: what
    every checkpoint's meta.json states beside its step and eval (GRPO's sampler name, for the doctor).
    """

    def __init__(
        self,
        name: str,
        out: Path,
        cfg,
        backend,
        tokenizer,
        fmt,
        held_out: HeldOut,
        steps: int,
        log_every: int,
        line: Callable[[dict], str],
        device,
        parts: dict | None = None,
        state_cls: type[RunState] = RunState,
        meta: dict | None = None,
    ) -> None:
        self.name, self.out, self.cfg, self.backend, self.tokenizer, self.fmt = (
            name,
            Path(out),
            cfg,
            backend,
            tokenizer,
            fmt,
        )
        self.held_out, self.steps, self.log_every, self.line = held_out, steps, log_every, line
        self.device, self.parts, self.state_cls = device, parts or {}, state_cls
        self.meta = meta or {}  # what every checkpoint's meta.json states besides its step and eval
        self.run: RunState | None = None
        self.scalars = Scalars([], self.out / TB_DIR)
        self.bar = self.log = None
        self._kept = None
        self._open = contextlib.ExitStack()  # the TensorBoard writer and the progress bar
        self._t0 = self._start_step = 0

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self._open.close()

    def start(self, resume: Path | None) -> RunState:
        """Resume from `resume` (a checkpoint; the policy was loaded from it), or start afresh and
        evaluate the policy as it starts: the held-out baseline, in the same table as every checkpoint."""
        main = self.backend.is_main
        if resume is not None:
            self._resume(resume)
        else:
            self.run = self.state_cls()
            if main:
                for stale in RUN_LOGS:
                    (self.out / stale).unlink(missing_ok=True)
                shutil.rmtree(self.out / TB_DIR, ignore_errors=True)
                shutil.rmtree(self.out / LOOP_EVALS_DIR, ignore_errors=True)  # an earlier run's
        # rank 0 writes TensorBoard; a resumed run hides the events written after its checkpoint
        self.scalars = self._open.enter_context(
            Scalars(
                self.cfg.report_to if main else [],
                self.out / TB_DIR,
                purge_step=self.run.step + 1 if resume is not None else None,
            )
        )
        if resume is None:
            self.evaluate(0)
            if self._kept is not None:
                write_loop_eval(self.out, "step_000000", self._kept)
        self.log = StepLog(
            self.name, self.log_every, self.steps, self.scalars, self.line, self.out / "metrics.jsonl" if main else None
        )
        self.bar = self._open.enter_context(
            progress_bar(self.steps, self.name, initial=self.run.step, enabled=None if main else False)
        )
        self._t0, self._start_step = time.perf_counter(), self.run.step
        return self.run

    def _resume(self, path: Path) -> None:
        state = ckpt.load_state(path)
        if "backend" not in state:
            raise ValueError(
                f"checkpoint {path} holds {sorted(state)}, not this version's training state; "
                "train into a new output directory"
            )
        self.backend.load_state_dict(state["backend"], checkpoint_dir=path)  # DeepSpeed: on every rank
        for key, part in self.parts.items():
            part.load_state_dict(state[key])
        ckpt.restore_rng(state["rng"])
        self.run = self.state_cls(**state["run"])
        if self.backend.is_main:
            for name in RUN_LOGS:  # drop lines of steps after the checkpoint
                rows = [r for r in read_jsonl(self.out / name, missing_ok=True) if r["step"] <= self.run.step]
                write_text(self.out / name, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        self.backend.barrier()
        log.info("%s: resumed from %s at step %d", self.name, path, self.run.step)

    def log_step(self, metrics: dict, seconds: float, **postfix) -> None:
        """The step's metrics (`StepLog`, rank 0) and the progress bar."""
        if self.backend.is_main:
            self.log(metrics, seconds)
        self.bar.update(1)
        if postfix:
            self.bar.set_postfix(refresh=False, **postfix)

    def checkpoint_due(self, step: int) -> bool:
        return step % self.cfg.checkpoint.every == 0 or step == self.steps

    def evaluate(self, step: int) -> dict:
        """Evaluate the live policy on the held-out rows; record it in the run, evals.jsonl and TensorBoard.

        With several ranks only rank 0 generates (with `backend.generation_module`: under ZeRO-3 its
        full replica, refreshed here in a collective gather) and its record is broadcast. With one plain
        torch process the eval is kept whole for `save` to write beside the checkpoint."""
        from rlvrflow.training.eval import evaluate_live

        h, b, run = self.held_out, self.backend, self.run
        b.sync_generation_module()  # every rank: a collective under ZeRO-3
        record = kept = by_prompt = None
        if b.is_main:
            samples = self.out / "samples" / f"step_{step:06d}.jsonl"
            if len(h.rows) or not h.episodes:  # (no rows of either kind: evaluate_live's error names the split)
                with b.autocast():
                    live = evaluate_live(
                        b.generation_module,
                        self.tokenizer,
                        h.rows,
                        h.cfg,
                        h.seed,
                        samples,
                        h.workers,
                        str(self.device),
                        prompt_format=self.fmt,
                        reward_cfg=h.reward_cfg,
                        timeout_s=h.timeout_s,
                    )
                # the loop eval the evaluate stage may reuse: the single replies' result and samples text
                # (read before the episodes' transcripts are appended), then the episodes' result and records
                result, kept = live.result, live if b.exact_evals else None
            episodes = None
            if h.episodes:  # after: evaluate_live writes the file
                episodes, records = self._episodes(samples)
                if kept is not None:
                    kept = replace(kept, episodes=episodes, episode_samples=tuple(records))
            if not len(h.rows):  # episodes alone: they are the headline
                result = {**episodes, "headline_scope": "episodes"}
            record = {"step": step, **{k: v for k, v in result.items() if k not in ("per_category", "by_prompt")}}
            if episodes is not None and len(h.rows):
                record["episodes"] = {k: v for k, v in episodes.items() if k not in ("per_category", "by_prompt")}
            append_jsonl(self.out / "evals.jsonl", {**record, "per_category": result["per_category"]})
            by_prompt = result.get("by_prompt") or {}
        record, by_prompt = b.broadcast((record, by_prompt))
        run.evals.append(record)
        if not run.held_out_first:
            run.held_out_first = by_prompt
        run.held_out_last = by_prompt
        self.scalars.add("eval", record, step, leave_out=("tool_calls",))  # tool names: the model's own text
        self._kept = kept
        return record

    def _episodes(self, samples: Path) -> tuple[dict, list[dict]]:
        """One greedy episode per held-out episode row with the live policy (training/eval_episodes.py):
        (result, sample records); the records also go to the step's samples file."""
        from rlvrflow.engines import HFEngine
        from rlvrflow.training.eval_episodes import evaluate_episode_rows

        h, b = self.held_out, self.backend
        engine = HFEngine(b.generation_module, self.tokenizer, str(self.device), EVAL_BATCH, prompt_format=self.fmt)
        with b.autocast():
            result, records = evaluate_episode_rows(
                engine,
                list(h.episodes),
                h.cfg.episode_max_new_tokens,
                h.seed,
                h.cfg.samples_per_category,
                h.reward_cfg,
            )
        samples.parent.mkdir(parents=True, exist_ok=True)
        if not len(h.rows):  # nothing wrote the file this eval: a rerun of the step starts it afresh
            samples.unlink(missing_ok=True)
        for r in records:
            append_jsonl(samples, r)
        return result, records

    def save(self, record: dict) -> None:
        """Checkpoint the run at its step with `record` (the eval of these weights) in meta.json; then
        retention, the kept eval beside the committed files, and TensorBoard flushed. Every rank calls it."""
        from rlvrflow.engines.hf_engine import PROMPT_FORMAT_FILE

        b, run = self.backend, self.run
        state = {
            "backend": b.state_dict(),
            **{k: p.state_dict() for k, p in self.parts.items()},
            "rng": ckpt.capture_rng(),
            "run": asdict(run),
        }
        extra = {PROMPT_FORMAT_FILE: self.fmt.to_json() + "\n"}
        samples = self.out / "samples" / f"step_{run.step:06d}.jsonl"
        if b.is_main and samples.is_file():  # the eval's samples, next to its metrics in meta.json
            extra["samples.jsonl"] = samples.read_text(encoding="utf-8")
        b.save_checkpoint(self.out, run.step, self.tokenizer, state, {**self.meta, "eval": record}, extra=extra)
        if b.is_main:
            c = self.cfg.checkpoint
            drop_loop_evals(self.out, ckpt.apply_retention(self.out, c.keep_last, c.keep_best, c.metric))
        b.barrier()  # no rank runs ahead while old checkpoints are being removed
        write_checkpoint_eval(self.out, run.step, self._kept)  # tied to the committed files
        self.scalars.flush()  # events up to this checkpoint survive a kill; a resume purges the later ones

    def finish(self, start_model, extra: dict, plot: Callable = plot_curves) -> dict:
        """summary.json (and curves.png by `plot`) on rank 0; returns the summary on every rank."""
        seconds = time.perf_counter() - self._t0
        run, steps_done = self.run, self.run.step - self._start_step
        final = ckpt.latest_checkpoint(self.out) or Path(start_model)  # steps == 0: the start model is the result
        best = ckpt.best_checkpoint(self.out, self.cfg.checkpoint.metric) or final
        summary = {
            "final_checkpoint": str(final),
            "best_checkpoint": str(best),
            "baseline": run.evals[0] if run.evals else None,
            "final": run.evals[-1] if run.evals else None,
            "evals": run.evals,
            "steps": run.step,
            "seconds": round(seconds, 2),
            "steps_per_second": steps_done / seconds if seconds > 0 else None,
            "warnings": run.warnings,
            **extra,
        }
        if self.backend.is_main:
            plot(read_jsonl(self.out / "metrics.jsonl", missing_ok=True), run.evals, self.out / "curves.png")
            write_json(self.out / "summary.json", summary)
        return summary
