"""Issue 44 (truth): a Lean reply's tokens carry no engine log-probability (NaN, not measured:
trainer/rollout/lean_tool.py ``NOT_MEASURED``). An asynchronous step's importance weight must not turn that into a
NaN loss (NaN × a zero loss mask is still NaN), nor into a weight read from a made-up 0.0: the sequence trains
exactly as if those tokens were not there. Real parts: the tiny random model and the learner."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.asynchronous.synchronous_loop import synchronous_config
from trainer.learning.batching import TrainingSequence
from trainer.learning.learner import Learner

CONTEXT = [False, True, True, False]  # tokens 1 and 2 are Lean's reply


def learner_and_sequences(tiny_policy):
    model, tokenizer = tiny_policy(seed=0)
    learner = Learner(synchronous_config(max_staleness=1), model, tokenizer)
    sequences = [TrainingSequence(prompt_ids=[1, 2, 3], response_ids=[4, 5, 6, 7], advantage=advantage,
                                  group_key="slot-0", rollout_key=f"r{i}", context_mask=CONTEXT)
                 for i, advantage in enumerate((0.5, 0.25))]
    return learner, sequences


def sampled_as(sequences, proximal, reply_value):
    """Engine log-probabilities equal to π_prox at sampled tokens, ``reply_value`` at the reply's."""
    sampled = [replace(s, sampled_logprobs=[reply_value if is_reply else value
                                            for value, is_reply in zip(proximal[id(s)].tolist(), CONTEXT)])
               for s in sequences]
    return sampled, {id(new): proximal[id(old)] for new, old in zip(sampled, sequences)}


def test_a_reply_that_was_never_measured_leaves_the_loss_as_if_it_were_not_there(tiny_policy):
    learner, sequences = learner_and_sequences(tiny_policy)
    proximal = learner.old_logprobs([sequences])
    measured, measured_proximal = sampled_as(sequences, proximal, reply_value=-1.0)
    expected = learner.accumulate_gradients(measured, measured_proximal)["loss"]

    learner, sequences = learner_and_sequences(tiny_policy)
    proximal = learner.old_logprobs([sequences])
    not_measured, not_measured_proximal = sampled_as(sequences, proximal, reply_value=float("nan"))
    loss = learner.accumulate_gradients(not_measured, not_measured_proximal)["loss"]
    assert math.isfinite(loss) and loss != 0.0
    assert loss == pytest.approx(expected, rel=1e-5)
    assert all(parameter.grad is None or parameter.grad.isfinite().all() for parameter in learner.model.parameters())
