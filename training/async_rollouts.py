"""Async GRPO rollouts: a generator process fills an on-disk queue while the trainer updates the policy.

    rollouts = AsyncRollouts(out, sft_model, cfg, tasks, reward_cfg, seed, device, dtype, workers, timeout_s)
    with rollouts:                                    # stops the generator whatever happens
        rollouts.start(run, backend)                  # fresh queue epoch, weights v<run.step>, the generator
        groups, info = rollouts.collect(sampler, step, run)
        ...update...; rollouts.updated(backend, step + 1, trained)   # publishes every sync_every steps

`SyncRollouts` (training/grpo.py) is the other collector, with the same calls.

Who does what. The curriculum sampler stays in the trainer: it owns online re-tiering, the
recent-prompt window and their checkpointed state, so a draw and its report happen in one process in
a known order. The trainer draws prompts into requests (training/rollout_queue.py) ahead of the one
it is consuming: `lookahead_batches` requests (max_staleness + 1 - sync_every), each one step's worth
of prompts scaled up by the run's zero-variance share so far (at most 4x), and none past the run's
last step. That bounds the queue. The generator (its own
process, started as `python -m rlvrflow.training.async_rollouts` like the verifier pool's helpers, so the
caller's `__main__` is never re-run and scripts need no `if __name__ == "__main__":` guard; one torch
thread, the trainer's device) answers them oldest first with the newest weights published,
samples `num_generations` completions per prompt with HF, scores them with the verifier pool and writes the
groups with its per-token log-probs and the policy version (updates done) that made them.

A step consumes results oldest first: each result's success rates go to the sampler (re-tiering
sees every group, as in sync mode); a result more than `max_staleness` versions older than the
trainer is dropped (groups_stale); zero-variance groups are dropped (groups_zero_variance) and refilled
by consuming further results, up to `max_refill_rounds` more, drawing a request of the missing count
when none is pending. Groups beyond `prompts_per_step` wait for the next step if they will still be
fresh then; the others are dropped and counted stale at once. With max_staleness 0 nothing is drawn
ahead and the generator waits for each update's weights: the same draws, seeds and tokens as the
synchronous loop.

Crash semantics. A checkpoint saves, with the sampler, the requests drawn but not consumed and the
groups waiting to be trained (`GRPORun.queue`, training/grpo.py). A resume (after `kill -9` of the trainer, or a
failure) removes the old queue epoch, counting the groups of its results (groups_discarded: the dead
run made them after its checkpoint, the resumed run never trains them), and asks the new generator
for the saved requests again. So every draw of the sampler in the resumed lineage is consumed
exactly once and no group is trained twice. A generator killed while the trainer lives is restarted
(at most GENERATOR_RESTARTS times; counted in generator_restarts); one that raised stops the run with
its traceback. The generator dies with the trainer: the kernel kills it (PR_SET_PDEATHSIG) and it
also checks its parent's pid between requests.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from rlvrflow.training.grpo_groups import Group, Tally, draw, rollout_seed, score_rollouts
from rlvrflow.training.rollout_queue import QUEUE_DIR, RolloutQueue
from rlvrflow.verifiers._proc import die_with_parent

log = logging.getLogger("rlvrflow.training")

GENERATOR_RESTARTS = 3  # a generator killed from outside is restarted this often before the run fails
POLL_S = 0.005  # how often the trainer looks for a result and the idle generator for a request
MIN_KEPT_SHARE = 0.25  # draw ahead at most 4x the prompts a step needs, however many groups were zero-variance
SETUP_FILE = "generator_setup.pkl"  # in the epoch folder: what the generator process is started with


class GeneratorFailed(RuntimeError):
    """The rollout generator process raised, or kept dying."""


def check_dtype(cfg, dtype) -> None:
    """Refuse LoRA in a 16-bit dtype (resolved, so `auto` counts as what it became on this device): the
    generator gets the merged weights rounded to the base's dtype, so small adapter updates vanish and its
    log-probs (the loss's old_logp) differ systematically from the trainer's unmerged policy."""
    import torch

    from rlvrflow.training.precision import dtype_name

    if cfg.lora is not None and dtype != torch.float32:
        raise ValueError(
            f"training.grpo.rollout_mode 'async' with LoRA needs training.dtype float32 (this run "
            f"trains in {dtype_name(dtype)}): the generator gets the merged weights, rounded to the "
            "base's dtype; set training.dtype: float32, or rollout_mode: sync"
        )


class AsyncRollouts:
    """The trainer's side of the queue: draws requests, consumes results, publishes weights, runs the generator."""

    def __init__(
        self,
        out: Path,
        sft_model,
        cfg,
        tasks: dict,
        reward_cfg,
        seed: int,
        device,
        dtype,
        workers: int | None,
        timeout_s: float,
    ) -> None:
        from rlvrflow.training.precision import dtype_name

        self.root, self.g, self.seed = Path(out) / QUEUE_DIR, cfg.grpo, seed
        self.setup = {
            "sft_model": str(sft_model),
            "cfg": cfg,
            "tasks": tasks,
            "reward_cfg": reward_cfg,
            "device": str(device),
            "dtype": dtype_name(dtype),
            "workers": workers,
            "timeout_s": timeout_s,
        }
        self.queue: RolloutQueue | None = None
        self.proc = None
        self.pending: list[dict] = []  # requests written, not consumed, oldest first
        self.buffer: list[Group] = []  # scored groups waiting for a step
        self.next_seq = 0
        self.published = -1
        self.unused = 0

    def start(self, run, backend) -> None:
        """A fresh queue epoch, the run's saved requests re-asked, weights of version run.step, the generator."""
        self.queue, discarded = RolloutQueue.fresh(self.root)
        run.groups_discarded += discarded
        if discarded:
            log.warning(
                "async rollouts: %d groups of a previous run's queue discarded (made after its checkpoint)", discarded
            )
        self.next_seq = run.queue.get("next_seq", 0)
        self.pending = [dict(r) for r in run.queue.get("pending", [])]
        self.buffer = [Group(**d) for d in run.queue.get("buffer", [])]
        self.publish(backend, run.step)
        for request in self.pending:
            self.queue.put_request(request)
        self._spawn()

    def updated(self, backend, step: int, trained: bool) -> None:
        """After step `step`: publish every `sync_every` steps, also after a skipped update (versions count steps)."""
        if step % self.g.sync_every == 0:
            self.publish(backend, step)

    def summary(self) -> dict:
        return {"groups_unused": self.unused}  # scored and reported to the sampler, never trained

    def state_dict(self) -> dict:
        return {
            "next_seq": self.next_seq,
            "pending": [dict(r) for r in self.pending],
            "buffer": [asdict(grp) for grp in self.buffer],
        }

    def publish(self, backend, version: int) -> None:
        """Hand the generator the policy after `version` updates (LoRA: merged weights)."""
        weights = {name: t.detach().to("cpu", copy=True) for name, t in backend.named_parameters()}
        self.queue.publish(version, weights)
        self.published = version

    def collect(self, sampler, step: int, run) -> tuple[list[Group], dict]:
        """`prompts_per_step` groups with reward variance (fewer when refills run out), and the step's metrics."""
        import torch

        from rlvrflow.training.grpo_math import zero_variance_groups

        g = self.g
        kept, stale, tally = [], 0, Tally()
        kept, self.buffer, written = self.buffer, [], 0  # scored, counted and reported in an earlier step, fresh
        for _ in range(1 + g.max_refill_rounds):
            need = g.prompts_per_step - len(kept)
            if need <= 0:
                break
            short = need - sum(len(r["ids"]) for r in self.pending)
            if short > 0:
                written += self._request(sampler, short, step, written)
            if not self.pending:  # the sampler had nothing eligible (short_batch)
                break
            request = self.pending.pop(0)
            written = self._top_up(sampler, step, written, run)  # the generator works on it while we wait and train
            result = self._wait(request["seq"], run)
            self.queue.consume(request["seq"])
            groups = [
                Group(**grp, version=result["version"], key=f"{request['seq']}.{i}")
                for i, grp in enumerate(result["groups"])
            ]
            sampler.report([grp.task_id for grp in groups], [sum(grp.correct) / len(grp.correct) for grp in groups])
            too_old = step - result["version"] > g.max_staleness
            stale += len(groups) if too_old else 0
            rewards = torch.tensor([grp.rewards for grp in groups], dtype=torch.float32)  # (P, G), as in sync mode
            for grp, r, zero in zip(groups, rewards.tolist(), zero_variance_groups(rewards).tolist()):
                grp.rewards = r
                if (
                    tally.add(
                        r,
                        grp.correct,
                        grp.completion_ids,
                        zero and g.filter_zero_variance and not too_old,
                        grp.truncated,
                    )
                    and not too_old
                ):
                    kept.append(grp)
        kept, left = kept[: g.prompts_per_step], kept[g.prompts_per_step :]
        self.buffer = [grp for grp in left if step + 1 - grp.version <= g.max_staleness]  # fresh next step
        stale += len(left) - len(self.buffer)
        self._top_up(sampler, step, written, run)
        run.groups_stale += stale
        info = {
            **tally.info(len(kept)),
            "groups_stale": stale,
            "groups_waiting": len(self.buffer),
            "staleness_mean": sum(step - grp.version for grp in kept) / max(1, len(kept)),
            "trained": [grp.key for grp in kept],
        }
        return kept, info

    def _request(self, sampler, n: int, step: int, written: int) -> int:
        """Draw up to n prompts into a new request; returns how many requests were written (0 or 1)."""
        ids = draw(sampler, n)
        if not ids:
            return 0
        request = {
            "seq": self.next_seq,
            "ids": ids,
            "seed": rollout_seed(self.seed, step, written),
            "min_version": self.published,
        }
        self.next_seq += 1
        self.pending.append(request)
        self.queue.put_request(request)
        return 1

    def _top_up(self, sampler, step: int, written: int, run) -> int:
        """Keep `lookahead_batches` requests pending besides the one being consumed (none past the last step:
        they would never be consumed, yet advance the sampler), each one step's worth: `prompts_per_step`
        scaled up by the run's zero-variance share so far. Those groups are dropped; without the extra prompts
        a step refills from the next step's whole request, whose leftovers are mostly too old by the step
        after (bench/README.md: more stale groups and a slower loop at max_staleness 1)."""
        g = self.g
        scored = run.groups_seen - run.groups_stale  # stale groups never reach the zero-variance check
        kept_share = 1 - run.groups_zero_variance / max(1, scored) if g.filter_zero_variance else 1.0
        size = math.ceil(g.prompts_per_step / max(kept_share, MIN_KEPT_SHARE))
        while len(self.pending) < min(g.lookahead_batches, g.max_steps - 1 - step):
            if not self._request(sampler, size, step, written):
                break
            written += 1
        return written

    def _wait(self, seq: int, run) -> dict:
        while True:
            result = self.queue.read_result(seq)
            if result is not None:
                return result
            error = self.queue.error()
            if error is not None:
                raise GeneratorFailed(f"the rollout generator failed (training.grpo.rollout_mode: async):\n{error}")
            if self.proc.poll() is not None and self.queue.read_result(seq) is None:
                run.generator_restarts += 1
                if run.generator_restarts > GENERATOR_RESTARTS:
                    raise GeneratorFailed(
                        f"the rollout generator died {run.generator_restarts} times (exit code "
                        f"{self.proc.returncode}); see the log, or set rollout_mode: sync"
                    )
                log.warning("async rollouts: the generator died (exit code %s); restarting it", self.proc.returncode)
                self._spawn()
            time.sleep(POLL_S)

    def _spawn(self) -> None:
        """A fresh interpreter (no forked torch or CUDA state, the caller's `__main__` not re-run) with the
        caller's sys.path, reading its setup from the epoch folder."""
        setup = self.queue.dir / SETUP_FILE
        if not setup.is_file():
            tmp = setup.with_name(f".tmp-{setup.name}")
            tmp.write_bytes(pickle.dumps(self.setup))
            os.replace(tmp, setup)
        path = [p for p in sys.path if p] + [os.getcwd()]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvrflow.training.async_rollouts", str(self.queue.dir), str(os.getpid())],
            env=env,
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )

    def __enter__(self) -> "AsyncRollouts":
        return self

    def __exit__(self, *exc) -> None:
        """Count the groups scored but never trained (groups_unused), remove the epoch, kill the generator
        (its current request, if any, would never be consumed)."""
        if self.queue is not None:
            self.unused = len(self.buffer) + self.queue.result_groups()
            self.queue.remove()
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()


# ----- the generator process ----------------------------------------------------------------------


def generator_main(queue_dir: str, parent_pid: int) -> None:
    """Answer the queue's requests until the trainer is gone or its epoch folder is removed."""
    die_with_parent()
    path = Path(queue_dir)
    queue = RolloutQueue(path.parent, path.name)
    try:
        queue.write_pid(os.getpid())
        setup = pickle.loads((path / SETUP_FILE).read_bytes())
        _serve(queue, parent_pid, **setup)
    except Exception:
        if queue.exists() and os.getppid() == parent_pid:  # a real failure, not the trainer tidying up
            queue.write_error(traceback.format_exc())
            raise


def _serve(
    queue: RolloutQueue,
    parent_pid: int,
    sft_model: str,
    cfg,
    tasks: dict,
    reward_cfg,
    device: str,
    dtype: str,
    workers: int | None,
    timeout_s: float,
) -> None:
    import torch

    from rlvrflow.engines import HFEngine
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.modeling import encode_prompt, load_model_and_tokenizer
    from rlvrflow.training.precision import DTYPES, autocast

    torch.set_num_threads(1)
    g, dev, compute = cfg.grpo, torch.device(device), DTYPES[dtype]
    # full fine-tuning publishes float32 master weights (forwards autocast, as in the trainer); LoRA (float32
    # only) the merged weights in the frozen base's dtype
    model, tokenizer = load_model_and_tokenizer(
        sft_model, dev, trainable=False, dtype=compute if cfg.lora is not None else torch.float32
    )
    fmt = PromptFormat.for_tokenizer(tokenizer, cfg.prompt_format, cfg.system_prompt)
    engine = HFEngine(
        model, tokenizer, device=device, batch_size=max(g.prompts_per_step * g.num_generations, 1), prompt_format=fmt
    )
    version = -1
    while os.getppid() == parent_pid and queue.exists():
        todo = queue.unanswered()
        request = queue.read_request(todo[0]) if todo else None
        newest = queue.newest_weights()
        if request is None or newest is None:
            time.sleep(POLL_S)
            continue
        if newest[0] > version:
            try:
                _load_weights(model, torch.load(newest[1], map_location=dev))
            except FileNotFoundError:  # replaced by a newer version meanwhile
                continue
            version = newest[0]
        if version < request["min_version"]:
            time.sleep(POLL_S)
            continue
        batch = [tasks[i] for i in request["ids"]]
        with autocast(dev, compute):
            comp, rewards, correct, texts, statuses, logps, cut = score_rollouts(
                engine, batch, g, reward_cfg, request["seed"], workers, timeout_s
            )
        groups = [
            {
                "task_id": t.id,
                "prompt_ids": encode_prompt(tokenizer, t.prompt, fmt),
                "completion_ids": c,
                "rewards": r,
                "correct": k,
                "texts": x,
                "statuses": s,
                "old_logprobs": lp,
                "truncated": tr,
            }
            for t, c, r, k, x, s, lp, tr in zip(batch, comp, rewards, correct, texts, statuses, logps, cut)
        ]
        queue.put_result(request["seq"], {"seq": request["seq"], "version": version, "groups": groups})


def _load_weights(model, state: dict) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(
            f"published weights do not fit the generator's model: missing {missing}, unexpected {unexpected}"
        )


if __name__ == "__main__":  # started by AsyncRollouts._spawn
    generator_main(sys.argv[1], int(sys.argv[2]))
