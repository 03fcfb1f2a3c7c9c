"""The GRPO loss as small pure tensor functions (no model, no I/O), each tested by hand-computed numbers.

Shapes: P prompts, G completions per prompt, B = P*G sequences, T completion tokens (right-padded,
`mask` is 1 on real completion tokens). The loss for one token is

    -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A) + beta * k3(ref || policy)

with r = exp(logp - old_logp), A the group-relative advantage of its sequence, and
k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1 (Schulman's unbiased, non-negative estimator).
Aggregation is token-level (sum over every completion token / their count, DAPO) or sequence-level
(mean over each sequence's tokens, then mean over sequences, the original GRPO).
"""

from __future__ import annotations

import torch

ZERO_VARIANCE_TOL = 1e-6


def group_advantages(rewards: torch.Tensor, std_normalize: bool, eps: float = 1e-4) -> torch.Tensor:
    """(P, G) rewards -> (P, G) advantages: reward minus its group mean, divided by the group std if asked.

    The std is the population std (unbiased=False) plus `eps`, so a zero-variance group gets all-zero
    advantages rather than NaN.
    """
    centered = rewards - rewards.mean(dim=1, keepdim=True)  # (P, G)
    if not std_normalize:
        return centered
    return centered / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)


def zero_variance_groups(rewards: torch.Tensor, tol: float = ZERO_VARIANCE_TOL) -> torch.Tensor:
    """(P, G) rewards -> (P,) bool, True where every reward in the group is equal (within `tol`).

    Uses max - min rather than std so float noise in a constant group cannot pass as signal.
    """
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) <= tol


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(B, T, V) logits and (B, T) target ids -> (B, T) log-probabilities of the targets."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def token_logprobs_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor, grad: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_logprobs` and, from the same log-softmax, each position's entropy -sum p log p, both (B, T).

    The entropy covers the whole vocabulary (the spread of the distribution the logits give),
    not just the sampled token; a token of probability 0 (a -inf logit) adds 0. With `grad` it keeps
    its graph, and backward holds two more (B, T, V) tensors; without, it is a value only (for
    logging), computed in place in one transient (B, T, V) tensor."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    if grad and torch.is_grad_enabled():
        entropy = -(logp.exp() * logp.clamp(min=torch.finfo(logp.dtype).min)).sum(dim=-1)  # (B, T)
    else:
        with torch.no_grad():
            plogp = logp.exp().mul_(logp).nan_to_num_(nan=0.0)  # 0 x -inf -> 0
            entropy = -plogp.sum(dim=-1)
            del plogp
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1), entropy


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || ref) from samples of the policy: e^d - d - 1, d = ref - logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss (to minimize) and a (B, T) bool of tokens where the clip was active.

    logp, old_logp: (B, T); advantages: (B,) one value per sequence.
    """
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(1)  # (B, 1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, clipped < unclipped


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar over the `mask`ed tokens.

    token: sum of all masked tokens / total_tokens (default: mask.sum()).
    sequence: sum over sequences of (their masked mean) / total_seqs (default: B).
    Passing the totals of the whole batch makes micro-batched gradient accumulation exact.
    """
    mask = mask.to(per_token.dtype)
    if mode == "token":
        denom = total_tokens if total_tokens is not None else mask.sum().clamp(min=1.0)
        return (per_token * mask).sum() / denom
    if mode == "sequence":
        per_seq = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)  # (B,)
        denom = total_seqs if total_seqs is not None else per_token.shape[0]
        return per_seq.sum() / denom
    raise ValueError(f"loss_agg={mode!r} is not 'token' or 'sequence'")


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    beta: float,
    loss_agg: str,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The scalar GRPO loss of a (micro-)batch and its diagnostics (clip fraction, mean KL, mean entropy).

    ref_logp may be None only when beta == 0. entropy (B, T), the policy's per-token entropy with its
    graph, adds the bonus -entropy_coef * entropy to every token's loss; it may be None only when
    entropy_coef == 0.
    """
    per_token, clipped = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    stats = {}
    m = mask.to(logp.dtype)
    n_tok = m.sum().clamp(min=1.0)
    if entropy is not None:
        stats["entropy"] = float((entropy.detach() * m).sum() / n_tok)
    if entropy_coef > 0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs entropy (the policy's per-token entropy)")
        per_token = per_token - entropy_coef * entropy
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (the reference model's token log-probs)")
        kl = k3_kl(logp, ref_logp)
        per_token = per_token + beta * kl
        stats["kl"] = float((kl.detach() * m).sum() / n_tok)
    stats["clip_fraction"] = float((clipped.to(m.dtype) * m).sum() / n_tok)
    loss = aggregate(per_token, mask, loss_agg, total_tokens, total_seqs)
    return loss, stats
