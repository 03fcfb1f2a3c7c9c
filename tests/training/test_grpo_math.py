"""GRPO loss pieces against numbers worked out by hand (see each test's comment)."""

import math

import pytest
import torch

from rlvrflow.training.grpo_math import (
    aggregate,
    clipped_surrogate,
    group_advantages,
    grpo_loss,
    k3_kl,
    token_logprobs,
    token_logprobs_and_entropy,
    zero_variance_groups,
)


def test_advantages_centered_without_std():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 2.0]])
    adv = group_advantages(r, std_normalize=False)
    assert torch.allclose(adv, torch.tensor([[0.5, -0.5, -0.5, 0.5], [-1.0, 0.0, 1.0, 0.0]]))


def test_advantages_std_normalized():
    # group 1: mean 0.5, population std 0.5 -> +-0.5/0.5001; group 2: mean 2, std sqrt(0.5)
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 2.0]])
    adv = group_advantages(r, std_normalize=True, eps=1e-4)
    s2 = math.sqrt(0.5) + 1e-4
    want = torch.tensor([[0.5 / 0.5001, -0.5 / 0.5001, -0.5 / 0.5001, 0.5 / 0.5001], [-1 / s2, 0.0, 1 / s2, 0.0]])
    assert torch.allclose(adv, want, atol=1e-6)


def test_constant_group_gets_zero_advantage_not_nan():
    adv = group_advantages(torch.tensor([[0.1, 0.1, 0.1]]), std_normalize=True)
    assert torch.equal(adv, torch.zeros(1, 3))


def test_zero_variance_groups_detected_with_float_noise():
    r = torch.tensor([[0.1, 0.1, 0.1], [0.0, 1.0, 0.0], [1.0, 1.0 + 1e-9, 1.0]])
    assert zero_variance_groups(r).tolist() == [True, False, True]


def test_k3_kl_hand_values():
    # policy p=0.5, ref q=0.25: d = log(q/p) = -ln 2; e^d - d - 1 = 0.5 + ln 2 - 1
    logp = torch.log(torch.tensor([0.5, 0.3]))
    ref = torch.log(torch.tensor([0.25, 0.3]))
    kl = k3_kl(logp, ref)
    assert kl[0].item() == pytest.approx(0.5 + math.log(2) - 1, abs=1e-6)
    assert kl[1].item() == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(
    "ratio, adv, loss, clipped",
    [
        (1.5, 1.0, -1.28, True),  # upside capped at 1 + eps_high = 1.28
        (1.5, -1.0, 1.5, False),  # pessimistic side keeps the unclipped -1.5
        (0.5, -1.0, 0.8, True),  # downside capped at 1 - eps_low = 0.8
        (0.5, 1.0, -0.5, False),
        (1.1, 1.0, -1.1, False),  # inside the trust region
    ],
)
def test_clipped_surrogate_separate_eps(ratio, adv, loss, clipped):
    old = torch.zeros(1, 1)
    logp = torch.full((1, 1), math.log(ratio))
    got, was_clipped = clipped_surrogate(logp, old, torch.tensor([adv]), eps_low=0.2, eps_high=0.28)
    assert got.item() == pytest.approx(loss, abs=1e-6)
    assert bool(was_clipped.item()) is clipped


def test_token_vs_sequence_aggregation():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert aggregate(per_token, mask, "token").item() == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert aggregate(per_token, mask, "sequence").item() == pytest.approx((2 + 4) / 2)
    with pytest.raises(ValueError, match="loss_agg"):
        aggregate(per_token, mask, "batch")


@pytest.mark.parametrize("mode", ["token", "sequence"])
def test_micro_batches_with_global_totals_equal_full_batch(mode):
    torch.manual_seed(0)
    per_token = torch.rand(4, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    full = aggregate(per_token, mask, mode)
    tot_tok, tot_seq = float(mask.sum()), 4.0
    parts = sum(aggregate(per_token[i : i + 2], mask[i : i + 2], mode, tot_tok, tot_seq) for i in (0, 2))
    assert parts.item() == pytest.approx(full.item(), abs=1e-6)


def test_grpo_loss_adds_beta_times_kl_and_reports_clip_fraction():
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    old = logp.clone()
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    mask = torch.tensor([[1, 1]])
    adv = torch.tensor([2.0])
    loss, stats = grpo_loss(logp, old, ref, adv, mask, 0.2, 0.28, beta=0.1, loss_agg="token")
    kl0 = 0.5 + math.log(2) - 1
    # ratio 1 everywhere: surrogate -2 per token; kl (kl0, 0); token mean over 2 tokens
    assert loss.item() == pytest.approx((-2 + 0.1 * kl0 - 2) / 2, abs=1e-6)
    assert stats["kl"] == pytest.approx(kl0 / 2, abs=1e-6)
    assert stats["clip_fraction"] == 0.0
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, old, None, adv, mask, 0.2, 0.28, beta=0.1, loss_agg="token")


def test_policy_gradient_direction_raises_logp_of_positive_advantage():
    logits = torch.zeros(1, 1, 3, requires_grad=True)
    logp = token_logprobs(logits, torch.tensor([[1]]))
    loss, _ = grpo_loss(logp, logp.detach(), None, torch.tensor([1.0]), torch.ones(1, 1), 0.2, 0.2, 0.0, "token")
    loss.backward()
    assert logits.grad[0, 0, 1] < 0 < logits.grad[0, 0, 0]  # descent raises the chosen token's logit


def test_token_logprobs_matches_log_softmax():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # probs 1/4, 3/4
    assert token_logprobs(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))


def test_entropy_is_that_of_the_whole_distribution():
    # position 0: uniform over 4 -> log 4; position 1: probs (1/4, 3/4, 0-ish...) -> by hand
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3.0), -1e9, -1e9]]])
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[2, 1]]))
    assert logp.tolist()[0] == pytest.approx([math.log(0.25), math.log(0.75)])
    h1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert ent.tolist()[0] == pytest.approx([math.log(4.0), h1], abs=1e-6)


def test_entropy_keeps_its_graph_only_when_asked():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    _, with_grad = token_logprobs_and_entropy(logits, torch.zeros(2, 3, dtype=torch.long), grad=True)
    _, value = token_logprobs_and_entropy(logits, torch.zeros(2, 3, dtype=torch.long), grad=False)
    assert with_grad.requires_grad and not value.requires_grad
    assert torch.allclose(with_grad.detach(), value)


def test_entropy_bonus_is_subtracted_per_token_and_reported():
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    mask = torch.tensor([[1, 1]])
    adv = torch.tensor([2.0])
    ent = torch.tensor([[1.0, 3.0]])
    base, st0 = grpo_loss(logp, logp.clone(), None, adv, mask, 0.2, 0.28, 0.0, "token", entropy=ent)
    loss, st = grpo_loss(logp, logp.clone(), None, adv, mask, 0.2, 0.28, 0.0, "token", entropy=ent, entropy_coef=0.1)
    # surrogate -2 per token; the bonus -0.1 x (1, 3); token mean over 2 tokens
    assert base.item() == pytest.approx(-2.0) and loss.item() == pytest.approx((-2 - 0.1 - 2 - 0.3) / 2)
    assert st0["entropy"] == st["entropy"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="entropy_coef > 0 needs entropy"):
        grpo_loss(logp, logp.clone(), None, adv, mask, 0.2, 0.28, 0.0, "token", entropy_coef=0.1)


def test_the_entropy_bonus_alone_flattens_the_policy():
    logits = torch.tensor([[[2.0, 0.0, -1.0]]], requires_grad=True)
    logp, ent = token_logprobs_and_entropy(logits, torch.tensor([[0]]))
    loss, _ = grpo_loss(
        logp,
        logp.detach(),
        None,
        torch.tensor([0.0]),
        torch.ones(1, 1),
        0.2,
        0.2,
        0.0,
        "token",
        entropy=ent,
        entropy_coef=1.0,
    )
    loss.backward()
    assert logits.grad[0, 0, 0] > 0 > logits.grad[0, 0, 2]  # descent lowers the top logit, raises the lowest


def test_entropy_of_a_token_with_probability_zero_is_finite_in_both_modes():
    logits = torch.tensor([[[0.0, 0.0, float("-inf")]]], requires_grad=True)
    for grad in (True, False):
        _, ent = token_logprobs_and_entropy(logits, torch.tensor([[0]]), grad=grad)
        assert ent.item() == pytest.approx(math.log(2.0))
    _, ent = token_logprobs_and_entropy(logits, torch.tensor([[0]]), grad=True)
    ent.sum().backward()
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("mode", ["token", "sequence"])
def test_the_bonus_skips_masked_tokens_and_aggregates_like_the_surrogate(mode):
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])  # the third token of row 0 and two of row 1 are padding
    ent = torch.tensor([[1.0, 2.0, 100.0], [4.0, 100.0, 100.0]])
    adv = torch.zeros(2)  # no surrogate: the loss is the bonus alone
    loss, st = grpo_loss(
        logp,
        logp,
        None,
        adv,
        mask,
        0.2,
        0.2,
        0.0,
        mode,
        total_tokens=6.0,
        total_seqs=4.0,
        entropy=ent,
        entropy_coef=0.5,
    )
    # token: -(0.5 x (1 + 2 + 4)) / 6 tokens of the whole batch; sequence: -(0.5 x (1.5 + 4)) / 4 sequences
    want = -0.5 * 7 / 6 if mode == "token" else -0.5 * 5.5 / 4
    assert loss.item() == pytest.approx(want)
    assert st["entropy"] == pytest.approx(7 / 3)  # the masked tokens' 100s are left out
