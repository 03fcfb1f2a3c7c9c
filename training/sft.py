"""Cold-start SFT: teach the base model the domain's answer format from the reference solutions.

Trains on prompt -> solution (+ EOS), loss on the solution tokens only. Rows whose `solution` is
empty are skipped and counted (`skipped_empty_solution`). The worked transcripts of an environment's
rows (`episode_rows`, with `training.episodes`) join the same batches: each replayed on its
environment and rendered in the run's episode format (training/episode_format.py `run_format`: PLAIN
for raw prompts, the chat template for chat prompts), the loss on the policy's own tokens only, so
one model learns the single replies and the conversations; a transcript longer than `max_length`
or the model's positions is dropped with a warning (a conversation is not cut). Deliberately short by default: the SFT
model should know the format and solve some prompts, leaving room for GRPO to improve on it.

Prompts are encoded in the run's prompt format (`training.prompt_format`: the chat template's user
turn, or raw text) and solutions end with the format's end token (the template's end-of-turn token,
or EOS). With `training.lora` only the adapters train and the SFT model is saved merged (a plain
model the later stages load as it is). Forwards run in `training.dtype` (training/precision.py).

Writes `out_dir/` as a Hugging Face checkpoint plus `sft_metrics.jsonl` (loss, lr, grad norm and
tokens every `logging_steps` steps; the same points, with the step's wall time, as TensorBoard scalars
`sft/*` in `tb/` when `training.report_to` has tensorboard), `rlvrflow_prompt.json` (the prompt format, which
tiering and eval read back) and `sft_stats.json`; a rerun with the same inputs finds
`sft_stats.json` and returns at once. A progress bar follows the steps on a terminal
(training/progress.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from rlvrflow.io import write_json
from rlvrflow.training.checkpoint import save_pretrained_atomic
from rlvrflow.training.config import TrainingConfig
from rlvrflow.training.progress import Scalars, progress_bar

log = logging.getLogger("rlvrflow.training")


@dataclass(frozen=True)
class Conversation:
    """A rendered worked transcript: token ids and the policy mask (1 where the policy wrote the token)."""

    ids: list[int]
    mask: list[int]


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _size(item) -> int:
    return len(item.ids) if isinstance(item, Conversation) else len(item[0]) + len(item[1])


def sft_examples(train_df) -> tuple[list[tuple[str, str]], int]:
    """(prompt, solution) pairs of rows with a non-empty solution, and how many rows were skipped."""
    pairs, skipped = [], 0
    for prompt, solution in zip(train_df["prompt"].to_list(), train_df["solution"].to_list()):
        if solution is None or not str(solution).strip():
            skipped += 1
            continue
        pairs.append((str(prompt), str(solution)))
    return pairs, skipped


def _input_key(base_model: Path, pairs: list[tuple[str, str]], cfg: TrainingConfig, seed: int, worked=()) -> str:
    setup = [
        [(str(r["id"]), r["solution"], r["verifier_params"]) for r in worked],
        cfg.sft.model_dump(),
        cfg.prompt_format,
        cfg.system_prompt,
        cfg.dtype,
        cfg.lora.model_dump() if cfg.lora else None,
    ]
    h = hashlib.sha256(json.dumps([str(base_model.resolve()), setup, seed]).encode())
    for p, s in pairs:
        h.update(p.encode("utf-8", "surrogatepass") + b"\0" + s.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:16]


def _encode(tokenizer, pairs, max_length: int, fmt=None) -> tuple[list[tuple[list[int], list[int]]], dict]:
    """Token pairs cut to max_length (the prompt loses its start first), and how much was cut.

    `fmt`: the `PromptFormat` (raw when None); solutions end with its end token.
    """
    from rlvrflow.engines.hf_engine import PromptFormat
    from rlvrflow.training.modeling import encode_completion, encode_prompt

    fmt = fmt or PromptFormat()
    end_id = fmt.end_token_id(tokenizer)
    encoded = []
    cut = {"prompts_truncated": 0, "solutions_truncated": 0, "longest_prompt_tokens": 0, "longest_pair_tokens": 0}
    for prompt, solution in pairs:
        full = encode_completion(tokenizer, solution, add_eos=True, end_id=end_id)
        c = full[: max_length - 1]
        p = encode_prompt(tokenizer, prompt, fmt)
        keep = max_length - len(c)
        cut["solutions_truncated"] += len(c) < len(full)
        cut["prompts_truncated"] += len(p) > keep
        cut["longest_prompt_tokens"] = max(cut["longest_prompt_tokens"], len(p))
        cut["longest_pair_tokens"] = max(cut["longest_pair_tokens"], len(p) + len(full))
        encoded.append((p[-keep:] if len(p) > keep else p, c))
    return encoded, cut


# What a run without worked rows can do instead; spec-check (flows/preflight.py) prints the same choices.
NO_WORKED_ROWS_CHOICES = (
    "(a) run as it is: GRPO starts from the base model, which gains only where the base already solves "
    "some prompts (where it solves almost none, the policy tends to settle on the golds' most frequent "
    "answer); (b) log a worked reply (`solution`) for a few dozen rows per category, so SFT teaches the "
    "task's working first; (c) verifiers.answer_only_targets: true, so SFT trains on `Answer: <gold>` "
    "targets built from the golds: that teaches the answer format, not the working, and GRPO then starts "
    "from a model that has memorized answers; (d) training.model: a local instruct model that already "
    "solves some of these prompts (the README's 'Outcome-only logs' says what (a) and (c) gave on one outside "
    "data set)"
)


def no_worked_rows_message(rows: int) -> str:
    return (
        f"SFT: none of the {rows} train rows has a worked solution (all outcome-only), so SFT is skipped "
        f"and the base model is saved unchanged as the SFT model. Choices: {NO_WORKED_ROWS_CHOICES}"
    )


def cut_warnings(cut: dict, n_rows: int, max_length: int, max_positions: int | None = None) -> list[dict]:
    """What `max_length` cut, as report warnings ({kind, message}); SFT that never sees a prompt's start
    (or its later positions) is asked to answer it in full later.

    The suggested max_length is the longest prompt + solution, capped at the model's trained positions
    (`max_positions`, e.g. the embedded model's `training.tiny.max_positions`): beyond those the model
    has no learned use for the extra tokens, so the message names that limit instead.
    """
    need = cut["longest_pair_tokens"]
    if max_positions and max_length >= max_positions:
        fix = (
            f"training.sft.max_length is already at the model's {max_positions} positions (the longest rows "
            f"need {need}): shorten those prompts or use a model with more positions"
        )
    elif max_positions and need > max_positions:
        fix = (
            f"Raise training.sft.max_length to at most {max_positions} (the model's max positions; the "
            f"longest rows need {need}: shorten those prompts or use a model with more positions)"
        )
    else:
        fix = f"Raise training.sft.max_length to {need}"
    out = []
    if cut["prompts_truncated"]:
        out.append(
            {
                "kind": "prompts_truncated",
                "message": (
                    f"training.sft.max_length={max_length} cut the start of {cut['prompts_truncated']} of {n_rows} prompts "
                    f"(longest prompt {cut['longest_prompt_tokens']} tokens, longest prompt + solution {need}): the model is "
                    "trained without those prompts' first tokens and positions but sees them whole at tiering, GRPO and "
                    f"eval, where it tends to answer them with noise. {fix} if those rows matter (costs SFT time only for "
                    "the long rows' batches)."
                ),
            }
        )
    if cut["solutions_truncated"]:
        out.append(
            {
                "kind": "solutions_truncated",
                "message": (
                    f"training.sft.max_length={max_length} cut the end of {cut['solutions_truncated']} solutions: their last "
                    f"tokens and EOS are never trained, so the model learns to run on at those rows. {fix}."
                ),
            }
        )
    return out


def _check_episodes_fit(episode_rows, tokenizer, kind: str, cfg: TrainingConfig, model) -> None:
    """The episode rows tiering and GRPO will play must open with room for one message in the model's
    positions (training/grpo_episodes.py check_fits): a ValueError before SFT trains, not after."""
    from rlvrflow.training.episode_format import run_format
    from rlvrflow.training.grpo_episodes import check_fits

    rows = {str(r["id"]): r for r in episode_rows.iter_rows(named=True)}
    positions = getattr(model.config, "max_position_embeddings", None)
    check_fits(rows, tokenizer, run_format(tokenizer, kind), cfg.grpo, positions)


def run_sft(
    base_model: str | Path, train_df, cfg: TrainingConfig, out_dir: str | Path, seed: int, episode_rows=None
) -> Path:
    """Fine-tune `base_model` on `train_df` (DESIGN.md rows: `prompt`, `solution`) and save to `out_dir`.

    `episode_rows`: train rows of environment categories (a frame or None); their worked transcripts
    join the data (the module docstring says how).

    Uses `cfg.sft` (max_steps, learning_rate, batch_size, warmup, clipping, max_length) and `cfg.device`. With
    `cfg.sft.max_steps == 0` or no usable rows the base weights are saved unchanged (the stats say so).
    Returns `out_dir`, a Hugging Face checkpoint directory.
    """
    import torch

    from rlvrflow.engines.hf_engine import PROMPT_FORMAT_FILE, PromptFormat, stop_token_ids
    from rlvrflow.training import lora
    from rlvrflow.training.modeling import load_policy, pick_device, set_threads
    from rlvrflow.training.precision import dtype_name, resolve_dtype

    base_model, out = Path(base_model), Path(out_dir)
    sc = cfg.sft
    pairs, skipped = sft_examples(train_df)
    worked = [
        r for r in (episode_rows.to_dicts() if episode_rows is not None else []) if str(r["solution"] or "").strip()
    ]
    warnings = []
    if not pairs and not worked and skipped:
        warnings.append({"kind": "sft_skipped", "message": no_worked_rows_message(skipped)})
    key = _input_key(base_model, pairs, cfg, seed, worked)
    stats_path = out / "sft_stats.json"
    if stats_path.exists() and json.loads(stats_path.read_text()).get("input_key") == key:
        return out
    set_threads(cfg.torch_threads)
    device = pick_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    torch.manual_seed(seed)
    model, tokenizer = load_policy(base_model, device, dtype, cfg.lora)
    fmt = PromptFormat.for_tokenizer(tokenizer, cfg.prompt_format, cfg.system_prompt)
    counts = lora.parameter_counts(model)
    log.info(
        "sft: %s prompts, %s, %d of %d parameters trainable",
        fmt.kind,
        dtype_name(dtype),
        counts["trainable_params"],
        counts["total_params"],
    )
    if episode_rows is not None and episode_rows.height:  # before training, not at GRPO's start
        _check_episodes_fit(episode_rows, tokenizer, fmt.kind, cfg, model)
    data, cut = _encode(tokenizer, pairs, sc.max_length, fmt)
    warnings += cut_warnings(cut, len(data), sc.max_length, getattr(model.config, "max_position_embeddings", None))
    positions = getattr(model.config, "max_position_embeddings", None)
    limit = min(sc.max_length, positions or sc.max_length)
    conversations, dropped = _conversations(tokenizer, worked, fmt.kind, limit)
    if dropped.get("over_max_length"):
        warnings.append(_too_long_warning(dropped["over_max_length"], len(worked), sc.max_length, positions))
    data += conversations
    for w in warnings:
        log.warning("%s", w["message"])
    t0, c0 = time.perf_counter(), _cpu_seconds()
    steps = sc.max_steps if data else 0
    tb_tmp = out.with_name(f".tmp-tb-{out.name}.{os.getpid()}")  # out/ is replaced whole at the save
    shutil.rmtree(tb_tmp, ignore_errors=True)
    with Scalars(cfg.report_to, tb_tmp) as scalars:
        lines, loss_val = _train(model, data, steps, sc, seed, tokenizer.pad_token_id, device, dtype, scalars)
    model.eval()
    if cfg.lora is not None:  # later stages (tiering, GRPO's base, vLLM) read a plain model
        model = lora.merged_model(model)
    if fmt.kind == "chat":  # vLLM and generate() stop on the generation config's ids: add end-of-turn
        model.generation_config.eos_token_id = list(stop_token_ids(model, tokenizer, fmt))
    stats = {
        "rows_in": len(pairs) + skipped,
        "rows_used": len(pairs),
        "skipped_empty_solution": skipped,
        "transcripts_used": len(conversations),
        "transcripts_dropped": dropped,
        "steps": steps,
        "final_loss": loss_val,
        "seconds": round(time.perf_counter() - t0, 2),
        "cpu_seconds": round(_cpu_seconds() - c0, 2),  # the same span in this process's CPU seconds
        **cut,
        "warnings": warnings,  # flows/report.py carries them into report.json
        "input_key": key,
        "base_model": str(base_model),
        "prompt_format": fmt.kind,
        "dtype": dtype_name(dtype),
        **counts,
    }
    save_pretrained_atomic(
        model,
        tokenizer,
        out,
        extra={"sft_metrics.jsonl": "\n".join(lines) + "\n", PROMPT_FORMAT_FILE: fmt.to_json() + "\n"},
    )
    if tb_tmp.exists():
        os.replace(tb_tmp, out / "tb")
    write_json(stats_path, stats)
    return out


def _train(
    model, data, steps: int, sc, seed: int, pad_id: int, device, dtype, scalars
) -> tuple[list[str], float | None]:
    """`steps` optimizer steps on length-bucketed batches of `data`; the JSON metric lines and the last loss.

    Every `sc.logging_steps` steps (and the last) a line goes to the list, to the log and to `scalars`
    (training/trainer.py `StepLog`); a progress bar follows every step on a terminal.
    """
    from rlvrflow.training.backends import TorchBackend
    from rlvrflow.training.trainer import Optim, StepLog

    backend = TorchBackend(model, Optim.of(sc), dtype)
    step_log = StepLog(
        "sft",
        sc.logging_steps,
        steps - 1,
        scalars,
        lambda m: f"sft step {m['step'] + 1}/{steps} loss {m['loss']:.4f} lr {m['lr']:.2e} {m['step_seconds']:.2f}s",
    )
    loss_val = None
    batches = _length_bucketed_batches(data, sc.batch_size, seed)
    with progress_bar(steps, "sft") as bar:
        for step in range(steps):
            t_step = time.perf_counter()
            batch = [data[i] for i in next(batches)]
            with backend.autocast():
                loss = _batch_loss(model, batch, pad_id, device)
            backend.zero_grad()
            backend.backward(loss)
            lr = backend.lr()  # the rate this step uses
            grad_norm = backend.step()
            loss_val = float(loss.detach())
            bar.update(1)
            bar.set_postfix(loss=f"{loss_val:.4f}", refresh=False)
            step_log(
                {
                    "step": step,
                    "loss": loss_val,
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens": sum(map(_size, batch)),
                },
                time.perf_counter() - t_step,
            )
    return step_log.lines, loss_val


def _length_bucketed_batches(data: list[tuple[list[int], list[int]]], batch_size: int, seed: int, bucket: int = 8):
    """Endless random batches of indices; each draw of `bucket` batches is sorted by length first.

    Sorting a random window before cutting it into batches puts sequences of similar length together,
    so far less compute goes to padding, while batch order stays random.
    """
    import random

    rng = random.Random(seed)
    size = min(batch_size, len(data))
    while True:
        window = [rng.randrange(len(data)) for _ in range(size * bucket)]
        window.sort(key=lambda i: _size(data[i]))
        chunks = [window[k : k + size] for k in range(0, len(window), size)]
        rng.shuffle(chunks)
        yield from chunks


def _batch_loss(model, batch: list, pad_id: int, device):
    """Mean negative log-likelihood of the trained tokens of one batch: the solutions of (prompt, solution)
    pairs and the policy's tokens of `Conversation`s, one mean over both."""
    from rlvrflow.training.episodes import conversation_logprobs
    from rlvrflow.training.modeling import completion_logprobs

    pairs = [b for b in batch if not isinstance(b, Conversation)]
    convs = [(b.ids, b.mask) for b in batch if isinstance(b, Conversation)]
    scored = []  # (B, T) log-probs and masks of each kind
    if pairs:
        scored.append(completion_logprobs(model, [p for p, _ in pairs], [c for _, c in pairs], pad_id, device))
    if convs:
        scored.append(conversation_logprobs(model, convs, pad_id, device))
    total = sum(-(logp * mask.to(logp.dtype)).sum() for logp, mask in scored)
    return total / sum(mask.sum() for _, mask in scored).clamp(min=1.0)


def _conversations(tokenizer, worked: list[dict], prompt_kind: str, max_length: int):
    """The rendered worked transcripts (`Conversation`s) and the rows dropped, by reason."""
    from rlvrflow.training.episode_format import PLAIN, run_format
    from rlvrflow.training.episode_sft import worked_transcripts

    if not worked:
        return [], {}
    fmt = run_format(tokenizer, prompt_kind)
    transcripts, dropped = worked_transcripts(worked, one_line=fmt is PLAIN)
    out = []
    for episode, tools in transcripts:
        ids, mask = fmt.render(tokenizer, episode, tools)
        if len(ids) > max_length:
            dropped["over_max_length"] = dropped.get("over_max_length", 0) + 1
        else:
            out.append(Conversation(ids, mask))
    for reason, n in dropped.items():
        log.info("sft: %d worked transcripts dropped: %s", n, reason)
    return out, dropped


def _too_long_warning(n: int, of: int, max_length: int, positions: int | None) -> dict:
    return {
        "kind": "transcripts_too_long",
        "message": (
            f"training.sft.max_length={max_length} (the model has {positions} positions): {n} of {of} worked "
            "transcripts of environment categories render longer and were left out of SFT (a conversation is "
            "not cut). Raise training.sft.max_length (up to the model's positions), use a model with a longer "
            "context, or set training.episodes: false where the model cannot hold an episode."
        ),
    }
