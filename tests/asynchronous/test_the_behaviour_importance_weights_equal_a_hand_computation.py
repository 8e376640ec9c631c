"""The loss of an asynchronous run weights each token by min(π_prox / π_behaviour, C) (loss.behaviour_is_cap)."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from tests.asynchronous.synchronous_loop import synchronous_config
from trainer.learning.batching import TrainingSequence
from trainer.learning.learner import Learner, behaviour_importance_weights


def test_the_weight_is_the_probability_ratio_capped_at_c():
    proximal = torch.tensor([[-1.0, -2.0, -0.5]])
    behaviour = torch.tensor([[-1.5, -1.0, -0.5]])
    weights = behaviour_importance_weights(proximal, behaviour, cap=1.5)
    # exp(-1.0 + 1.5) = 1.6487 is capped at 1.5; exp(-2.0 + 1.0) = 0.3679; equal log-probabilities weigh 1.
    assert torch.allclose(weights, torch.tensor([[1.5, math.exp(-1.0), 1.0]]))
    assert not weights.requires_grad


def _learner_and_batch(tiny_policy, max_staleness: int):
    model, tokenizer = tiny_policy(seed=0)
    learner = Learner(synchronous_config(max_staleness=max_staleness), model, tokenizer)
    sequences = [TrainingSequence(prompt_ids=[1, 2, 3], response_ids=[4, 5, 6, 7], advantage=advantage,
                                  group_key="slot-0", rollout_key=f"r{i}") for i, advantage in enumerate((0.5, -0.5))]
    return learner, sequences


def test_a_token_sampled_at_half_its_proximal_probability_doubles_its_loss(tiny_policy):
    learner, sequences = _learner_and_batch(tiny_policy, max_staleness=0)
    proximal = learner.old_logprobs([sequences])
    unweighted = learner.accumulate_gradients(sequences, proximal)["loss"]

    learner, sequences = _learner_and_batch(tiny_policy, max_staleness=1)
    proximal = learner.old_logprobs([sequences])
    # The engine drew every token with half the probability the learner now gives it.
    sequences, proximal = _sampled_at(sequences, proximal, ratio=2.0)
    weighted = learner.accumulate_gradients(sequences, proximal)["loss"]
    assert weighted == pytest_approx(2.0 * unweighted)


def test_a_weight_above_the_cap_counts_as_the_cap(tiny_policy):
    learner, sequences = _learner_and_batch(tiny_policy, max_staleness=0)
    unweighted = learner.accumulate_gradients(sequences, learner.old_logprobs([sequences]))["loss"]

    learner, sequences = _learner_and_batch(tiny_policy, max_staleness=1)  # loss.behaviour_is_cap = 2
    proximal = learner.old_logprobs([sequences])
    sequences, proximal = _sampled_at(sequences, proximal, ratio=10.0)
    assert learner.accumulate_gradients(sequences, proximal)["loss"] == pytest_approx(2.0 * unweighted)


def _sampled_at(sequences, proximal, ratio: float):
    """The sequences with engine log-probabilities log(π_prox / ratio), and π_prox keyed by the new sequences."""
    sampled = [replace(s, sampled_logprobs=(proximal[id(s)] - math.log(ratio)).tolist()) for s in sequences]
    return sampled, {id(new): proximal[id(old)] for new, old in zip(sampled, sequences)}


def pytest_approx(value):
    import pytest

    return pytest.approx(value, rel=1e-5)
