"""Each step says where its rollouts went (issue 47): the shares of its GRPO groups that gave the learner a signal,
that all failed, that all passed, and that had no scored answer, and the tokens generated for nothing. Hand-made
groups with known shares; trainer/learning/group_signal.py says what each share holds."""

import math

import pytest
import torch

from trainer.learning.group_signal import group_signal_metrics

NaN = math.nan

# One row per group (a prompt slot), one column per answer; NaN is a censored answer.
REWARDS = torch.tensor([
    [1.0, 1.0, 1.0, 1.0],  # all pass
    [0.0, 0.0, 0.0, 0.0],  # all fail
    [0.0, 1.0, 0.0, 0.0],  # signal
    [0.0, 0.0, NaN, 0.0],  # all fail: the censored answer is no evidence either way
    [NaN, NaN, NaN, NaN],  # no scored answer: neither failed nor passed
    [1.0, NaN, NaN, NaN],  # a lone scored pass keeps its raw reward (verl's group of one): signal
    [0.0, NaN, NaN, NaN],  # a lone scored failure: advantage 0, all fail
    [1.0, 1.0, NaN, 1.0],  # all pass
])
TOKENS = torch.arange(1, 33).reshape(8, 4)  # each answer's generated tokens, all different


def test_each_group_is_in_exactly_one_share_and_the_shares_are_the_counted_ones():
    metrics = group_signal_metrics(REWARDS, TOKENS)
    assert metrics["batch/groups_with_signal"] == 2 / 8
    assert metrics["batch/groups_all_fail"] == 3 / 8
    assert metrics["batch/groups_all_pass"] == 2 / 8
    assert metrics["batch/groups_unscored"] == 1 / 8
    shares = ("batch/groups_with_signal", "batch/groups_all_fail", "batch/groups_all_pass", "batch/groups_unscored")
    assert sum(metrics[name] for name in shares) == pytest.approx(1.0)


def test_the_tokens_without_signal_are_every_answer_of_the_groups_without_signal_censored_ones_included():
    without_signal = [0, 1, 3, 4, 6, 7]
    expected = sum(int(TOKENS[group].sum()) for group in without_signal)
    assert group_signal_metrics(REWARDS, TOKENS)["batch/tokens_without_signal"] == expected


def test_a_group_with_a_signal_is_one_whose_learner_advantages_are_not_all_zero():
    from trainer.learning.learner import group_advantages

    metrics = group_signal_metrics(REWARDS, TOKENS)
    taught = int((group_advantages(REWARDS) != 0).any(dim=1).sum())
    assert metrics["batch/groups_with_signal"] == taught / len(REWARDS)


def test_equal_rewards_that_float_rounding_keeps_apart_from_their_mean_give_no_signal():
    from trainer.learning.learner import group_advantages

    equal = torch.full((1, 6), 0.3)
    assert group_advantages(equal).abs().max() > 0  # six float32 0.3s do not average to 0.3
    metrics = group_signal_metrics(equal, torch.ones(1, 6, dtype=torch.long))
    assert metrics["batch/groups_with_signal"] == 0.0
    assert metrics["batch/groups_all_pass"] == 1.0


def test_a_step_without_groups_measured_no_share_rather_than_zero():
    metrics = group_signal_metrics(torch.empty(0, 4), torch.empty(0, 4, dtype=torch.long))
    assert metrics["batch/groups_with_signal"] is None
    assert metrics["batch/groups_all_fail"] is None
    assert metrics["batch/groups_all_pass"] is None
    assert metrics["batch/groups_unscored"] is None
    assert metrics["batch/tokens_without_signal"] == 0
