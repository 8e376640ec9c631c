"""The Dr.GRPO objective, pinned to hand-computed values on tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.learning.learner import clipped_token_loss, clipping_masks, constant_divisor_loss, group_advantages

NAN = float("nan")
RECIPE_CLIPS = {"clip_low": 0.2, "clip_high": 0.3, "dual_clip": 3.0}


def ratios_as_logprobs(ratios):
    """log-probs whose ratio to old log-probs of 0 is ``ratios``."""
    return torch.log(torch.tensor(ratios, dtype=torch.float64)), torch.zeros(len(ratios), dtype=torch.float64)


def test_group_advantage_is_reward_minus_the_mean_of_uncensored_rewards_without_std_division():
    rewards = torch.tensor([[1.0, 0.0, NAN, 1.0], [0.0, 0.0, 0.0, 0.0], [NAN, NAN, 1.0, 0.0]])
    expected = torch.tensor([[1 / 3, -2 / 3, 0.0, 1 / 3], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, -0.5]])
    assert torch.allclose(group_advantages(rewards), expected)


def test_a_group_whose_rewards_are_all_censored_gets_zero_advantages_not_nan():
    advantages = group_advantages(torch.tensor([[NAN, NAN, NAN]]))
    assert torch.equal(advantages, torch.zeros(1, 3))


def test_group_advantages_are_not_divided_by_the_group_std():
    # GRPO would give ±1 here (std 0.5); Dr.GRPO keeps the raw ±0.5.
    advantages = group_advantages(torch.tensor([[1.0, 0.0]]))
    assert torch.allclose(advantages, torch.tensor([[0.5, -0.5]]))


def test_group_advantages_reject_a_flat_reward_vector():
    with pytest.raises(ValueError, match="groups, samples"):
        group_advantages(torch.tensor([1.0, 0.0]))


def test_positive_advantage_tokens_are_clipped_above_at_one_plus_clip_high():
    logprobs, old = ratios_as_logprobs([0.5, 1.0, 1.2, 1.5])
    loss = clipped_token_loss(logprobs, old, torch.tensor(1.0, dtype=torch.float64), **RECIPE_CLIPS)
    # max(-r, -clip(r, 0.8, 1.3)): a low ratio is not clipped when the advantage is positive.
    assert torch.allclose(loss, torch.tensor([-0.5, -1.0, -1.2, -1.3], dtype=torch.float64))


def test_negative_advantage_tokens_are_clipped_below_and_capped_by_the_dual_clip():
    logprobs, old = ratios_as_logprobs([0.5, 1.0, 1.2, 2.0, 5.0])
    loss = clipped_token_loss(logprobs, old, torch.tensor(-1.0, dtype=torch.float64), **RECIPE_CLIPS)
    # max(r, clip(r, 0.8, 1.3)) = [0.8, 1, 1.2, 2, 5], then min(·, 3.0) for the dual clip.
    assert torch.allclose(loss, torch.tensor([0.8, 1.0, 1.2, 2.0, 3.0], dtype=torch.float64))


def test_advantages_scale_the_token_loss_linearly():
    logprobs, old = ratios_as_logprobs([0.9, 1.1])
    loss = clipped_token_loss(logprobs, old, torch.tensor(0.25, dtype=torch.float64), **RECIPE_CLIPS)
    assert torch.allclose(loss, torch.tensor([-0.225, -0.275], dtype=torch.float64))


def test_clipped_tokens_get_no_gradient_and_the_others_get_minus_advantage_times_ratio():
    ratios = [0.5, 1.5, 0.5, 2.0, 5.0]
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0], dtype=torch.float64)
    logprobs, old = ratios_as_logprobs(ratios)
    logprobs.requires_grad_(True)
    clipped_token_loss(logprobs, old, advantages, **RECIPE_CLIPS).sum().backward()
    # d(-A·r)/d(log r) = -A·r where unclipped; 0 where a clip bound holds the loss constant.
    assert torch.allclose(logprobs.grad, torch.tensor([-0.5, 0.0, 0.0, 2.0, 0.0], dtype=torch.float64))


def test_the_clipped_loss_passes_torch_gradcheck_away_from_the_clip_boundaries():
    ratios = torch.tensor([[0.95, 1.05, 1.25], [0.9, 1.1, 2.5]], dtype=torch.float64)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -0.1, -1.5]], dtype=torch.float64)
    logprobs = (old + torch.log(ratios)).requires_grad_(True)
    advantages = torch.tensor([[0.7], [-0.4]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)

    def objective(lp):
        return constant_divisor_loss(clipped_token_loss(lp, old, advantages, **RECIPE_CLIPS), mask, 7.0)

    assert torch.autograd.gradcheck(objective, (logprobs,))


def test_clipping_masks_count_each_bound_that_silenced_a_token():
    logprobs, old = ratios_as_logprobs([0.5, 1.5, 0.5, 4.0, 1.0])
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0], dtype=torch.float64)
    masks = clipping_masks(logprobs, old, advantages, **RECIPE_CLIPS)
    assert masks["clip_high"].tolist() == [False, True, False, False, False]
    assert masks["clip_low"].tolist() == [False, False, True, False, False]
    assert masks["dual_clip"].tolist() == [False, False, False, True, False]


def test_the_constant_divisor_loss_sums_masked_token_losses_and_divides_by_the_constant():
    token_loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert math.isclose(constant_divisor_loss(token_loss, mask, 10).item(), 0.7, rel_tol=1e-6)


def test_the_constant_divisor_does_not_depend_on_how_many_tokens_a_response_has():
    # Dr.GRPO's point: a long answer's tokens weigh as much as a short answer's.
    short = constant_divisor_loss(torch.ones(1, 4), torch.tensor([[1.0, 1.0, 0.0, 0.0]]), 100)
    long = constant_divisor_loss(torch.ones(1, 4), torch.tensor([[1.0, 1.0, 1.0, 1.0]]), 100)
    assert math.isclose(long.item(), 2 * short.item(), rel_tol=1e-6)


def test_the_constant_divisor_must_be_positive():
    with pytest.raises(ValueError, match="maximum response length"):
        constant_divisor_loss(torch.ones(1, 1), torch.ones(1, 1), 0)
