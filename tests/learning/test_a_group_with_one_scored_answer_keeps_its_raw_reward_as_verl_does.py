"""A group with a single scored answer has no mean to compare it with: it keeps its raw reward as its
advantage, as the release's verl does (``compute_grpo_outcome_advantage``, verl/trainer/ppo/core_algos.py:
``if len(id2score[idx]) == 1: id2mean[idx] = 0.0; id2std[idx] = 1.0``, so with ``norm_adv_by_std_in_grpo``
off, Dr.GRPO's setting, the advantage is ``score - 0``).

Here such a group arises from ``rollout.samples_per_prompt: 1`` and from a group whose siblings Lean censored."""

import torch

from trainer.learning.learner import group_advantages

NAN = float("nan")


def test_a_group_of_one_answer_gets_its_reward_as_its_advantage():
    # samples_per_prompt 1: verl's group of one. A mean over one answer would give every answer 0 and learn nothing.
    assert torch.equal(group_advantages(torch.tensor([[1.0], [0.0], [1.0]])), torch.tensor([[1.0], [0.0], [1.0]]))


def test_a_lone_scored_answer_among_censored_siblings_keeps_its_raw_reward_and_the_censored_get_zero():
    rewards = torch.tensor([[NAN, 1.0, NAN, NAN], [0.0, NAN, NAN, NAN]])
    assert torch.equal(group_advantages(rewards), torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]))


def test_two_scored_answers_are_still_compared_with_their_mean():
    rewards = torch.tensor([[NAN, 1.0, 0.0, NAN]])
    assert torch.equal(group_advantages(rewards), torch.tensor([[0.0, 0.5, -0.5, 0.0]]))
