"""Learner.step: mini-batches of prompts, micro-batches laid out for the model, one AdamW step each.

The gradient's scale is pinned in test_gradients_equal_the_releases_at_micro_batch_two.py.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from tests.learning.conftest import tiny_run_config
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence, mini_batches, pack_batch, pad_batch
from trainer.learning.token_logprobs import response_logprobs


def four_sequences() -> list[TrainingSequence]:
    return [
        TrainingSequence(prompt_ids=[11, 12, 13], response_ids=[21, 22, 23], advantage=0.5, group_key="p0"),
        TrainingSequence(prompt_ids=[11, 12, 13], response_ids=[24, 25, 26, 27, 28], advantage=-0.5, group_key="p0"),
        TrainingSequence(prompt_ids=[31, 32], response_ids=[41, 42], advantage=0.25, group_key="p1"),
        TrainingSequence(prompt_ids=[31, 32], response_ids=[43, 44, 45, 46], advantage=0.0, group_key="p1"),
    ]


def test_the_first_mini_batch_loss_is_minus_the_advantage_weighted_token_count_over_the_divisor(tiny_policy):
    # π_old is the current policy, so every ratio is 1 and each token's loss is -A.
    config = tiny_run_config(
        rollout={"prompts_per_step": 2}, optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 4}
    )
    model, tokenizer = tiny_policy()
    metrics = Learner(config, model, tokenizer).step(four_sequences())
    # Scaled as the release's micro-batch of 2 scales it: 2 / 4 sequences in the mini-batch.
    expected = -(0.5 * 3 - 0.5 * 5 + 0.25 * 2 + 0.0 * 4) / 192 * (2 / 4)
    assert math.isclose(metrics["loss"], expected, rel_tol=1e-5)
    assert metrics["optimizer_steps"] == 1
    assert metrics["tokens"] == 3 + 5 + 2  # the zero-advantage answer is not run
    assert metrics["clip_fraction"] == 0.0


def test_a_step_with_every_advantage_zero_trains_no_token_and_measures_no_rate(tiny_policy):
    # All four answers equally good: Dr.GRPO has nothing to learn, and a rate over no tokens is not 0.
    config = tiny_run_config(
        rollout={"prompts_per_step": 2}, optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 4}
    )
    model, tokenizer = tiny_policy()
    idle = [dataclasses.replace(sequence, advantage=0.0) for sequence in four_sequences()]
    metrics = Learner(config, model, tokenizer).step(idle)
    assert (metrics["tokens"], metrics["trained_sequences"]) == (0, 0)
    assert metrics["tokens_per_second"] is None
    assert metrics["clip_fraction"] is None and metrics["dual_clip_fraction"] is None


def test_a_step_takes_one_optimizer_step_per_mini_batch_of_prompts(tiny_policy):
    config = tiny_run_config(optimizer={"mini_batch_prompts": 1, "micro_batch_sequences": 1})
    model, tokenizer = tiny_policy()
    before = [p.detach().clone() for p in model.parameters()]
    metrics = Learner(config, model, tokenizer).step(four_sequences())
    assert metrics["optimizer_steps"] == 2
    assert metrics["grad_norm"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_gradients_are_clipped_to_the_configured_norm(tiny_policy):
    config = tiny_run_config(optimizer={"grad_clip": 1e-6, "mini_batch_prompts": 2})
    model, tokenizer = tiny_policy()
    learner = Learner(config, model, tokenizer)
    mini_batch = four_sequences()
    learner.accumulate_gradients(mini_batch, learner.old_logprobs([mini_batch]))
    reported = learner._clip_gradients()
    after = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    assert reported > 1e-6
    assert after.item() == pytest.approx(1e-6, rel=1e-3)


def test_mini_batches_keep_each_prompts_group_whole_and_in_order():
    sequences = [TrainingSequence([1], [2], 0.1, group_key=key) for key in ["a", "a", "b", "c", "b", "c", "d"]]
    batches = mini_batches(sequences, prompts_per_mini_batch=2)
    assert [[s.group_key for s in batch] for batch in batches] == [["a", "a", "b", "b"], ["c", "c", "d"]]


def test_left_padded_prompts_put_every_response_at_the_same_column():
    batch = pad_batch(four_sequences()[1:3], pad_token_id=0, device=torch.device("cpu"))
    assert batch.input_ids.tolist() == [[11, 12, 13, 24, 25, 26, 27, 28], [0, 31, 32, 41, 42, 0, 0, 0]]
    assert batch.response_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch.position_ids[1].tolist()[:5] == [0, 0, 1, 2, 3]
    assert batch.predictor_positions.tolist() == [2, 3, 4, 5, 6]


def test_packed_sequences_lie_end_to_end_with_positions_restarting_at_zero():
    batch = pack_batch(four_sequences()[1:3], device=torch.device("cpu"))
    assert batch.input_ids.tolist() == [[11, 12, 13, 24, 25, 26, 27, 28, 31, 32, 41, 42]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]]
    assert batch.attention_mask is None
    assert batch.predictor_positions.tolist() == [2, 3, 4, 5, 6, 9, 10]
    assert batch.response_ids.tolist() == [[24, 25, 26, 27, 28, 41, 42]]
    assert batch.advantages.tolist() == [[-0.5] * 5 + [0.25] * 2]
    values = torch.arange(7.0).unsqueeze(0)
    assert [v.tolist() for v in batch.per_sequence(values)] == [[0, 1, 2, 3, 4], [5, 6]]


def test_response_logprobs_score_each_response_token_given_everything_before_it(tiny_policy):
    model, _ = tiny_policy()
    sequence = four_sequences()[0]
    batch = pad_batch([sequence], pad_token_id=0, device=torch.device("cpu"))
    with torch.no_grad():
        got = response_logprobs(model, batch)[0]
        full = torch.log_softmax(model(torch.tensor([[11, 12, 13, 21, 22, 23]])).logits[0].float(), dim=-1)
    expected = torch.stack([full[2, 21], full[3, 22], full[4, 23]])
    assert torch.allclose(got, expected, atol=1e-5)


def test_later_mini_batches_measure_their_ratio_against_the_policy_before_the_first_update(tiny_policy):
    # Two prompts with the same answer: the first mini-batch's update raises that answer's
    # probability, so the second sees ratios above 1 + 0.3 and is clipped. Had π_old been
    # recomputed per mini-batch, every ratio would be 1 and nothing would be clipped.
    config = tiny_run_config(optimizer={"learning_rate": 0.05, "mini_batch_prompts": 1, "micro_batch_sequences": 1})
    model, tokenizer = tiny_policy()
    same = dict(prompt_ids=[11, 12, 13], response_ids=[21, 22, 23], advantage=1.0)
    sequences = [TrainingSequence(**same, group_key="a"), TrainingSequence(**same, group_key="b")]
    metrics = Learner(config, model, tokenizer).step(sequences)
    assert metrics["optimizer_steps"] == 2
    # Clipped tokens can only be the second sequence's (the first's ratios are exactly 1): at most 3 of the 6.
    # How many of its 3 pass 1.3 depends on the tiny model's random weights (2 of them since its heads grew to 32).
    assert 0 < metrics["clip_high_fraction"] <= 0.5


def test_the_learning_rate_warms_up_linearly_over_optimizer_steps_and_a_resume_does_not_restart_it(tiny_policy):
    config = tiny_run_config(optimizer={"learning_rate": 1e-3, "warmup_steps": 4, "mini_batch_prompts": 1})
    model, tokenizer = tiny_policy(seed=3)
    learner = Learner(config, model, tokenizer)
    rates = []
    for _ in range(3):  # two prompts per batch, one per mini-batch: two optimizer steps each
        for mini_batch in mini_batches(four_sequences(), 1):
            learner.step(mini_batch)
            rates.append(learner.optimizer.param_groups[0]["lr"])
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])

    resumed_model, _ = tiny_policy(seed=3)
    resumed = Learner(config, resumed_model, tokenizer)
    resumed.optimizer.load_state_dict(learner.optimizer.state_dict())
    resumed.step(four_sequences()[:2])
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
