"""Sequences packed end to end in one row get the log-probs and gradients they get padded, one per row."""

from __future__ import annotations

import pytest
import torch

from tests.learning.conftest import tiny_run_config
from tests.learning.tolerances import assert_within_its_scale
from trainer.learning import packed_attention
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence, pack_batch, pad_batch, supports_packing
from trainer.learning.token_logprobs import full_vocabulary_response_logprobs, response_logprobs


def sequences() -> list[TrainingSequence]:
    return [
        TrainingSequence([11, 12, 13], [21, 22, 23, 24, 25, 26, 27], 0.5),
        TrainingSequence([31], [41], -0.25),  # a one-token sequence: position 0 right after position 0
        TrainingSequence([31, 32], [41, 42, 43], -0.25),  # the same tokens as its neighbour's start
        TrainingSequence([51, 52, 53, 54], [61, 62, 63, 64, 65], 1.0),
    ]


def per_sequence_values_and_gradients(model, batch, logprobs_of):
    model.zero_grad(set_to_none=True)
    logprobs = logprobs_of(batch)
    values = batch.per_sequence(logprobs)
    # Each sequence's tokens weighted by their place in it: the same loss in both layouts.
    loss = sum((v * torch.linspace(-1.0, 2.0, len(v))).sum() for v in values)
    loss.backward()
    return [v.detach() for v in values], {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("attention", [packed_attention.SDPA_PER_PACKED_SEQUENCE, "sdpa", "eager"])
def test_packed_log_probs_and_gradients_equal_the_padded_ones(tiny_policy, attention):
    model, tokenizer = tiny_policy(seed=7)
    packed_attention.register()
    model.set_attn_implementation(attention)
    assert supports_packing(model)
    padded = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    packed = pack_batch(sequences(), torch.device("cpu"))

    padded_values, padded_grads = per_sequence_values_and_gradients(model, padded, lambda b: response_logprobs(model, b, 1.0, 5))
    packed_values, packed_grads = per_sequence_values_and_gradients(model, packed, lambda b: response_logprobs(model, b, 1.0, 5))

    for got, expected in zip(packed_values, padded_values):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for name, expected in padded_grads.items():
        assert_within_its_scale(packed_grads[name], expected, name)


def test_packed_log_probs_equal_each_sequence_scored_alone_by_the_full_vocabulary_function(tiny_policy):
    model, tokenizer = tiny_policy(seed=7)
    packed = pack_batch(sequences(), torch.device("cpu"))
    with torch.no_grad():
        got = packed.per_sequence(response_logprobs(model, packed))
        for sequence, values in zip(sequences(), got):
            alone = pad_batch([sequence], tokenizer.pad_token_id, torch.device("cpu"))
            torch.testing.assert_close(values, full_vocabulary_response_logprobs(model, alone)[0], rtol=1e-5, atol=1e-5)


def test_without_boundaries_the_second_sequence_would_score_differently(tiny_policy):
    # The test above could pass with a model that ignored its neighbours anyway; this one could not.
    model, _ = tiny_policy(seed=7)
    pair = sequences()[2:]
    packed = pack_batch(pair, torch.device("cpu"))
    leaking = torch.arange(packed.input_ids.shape[1]).unsqueeze(0)  # one long sequence: no boundary to see
    with torch.no_grad():
        separate = packed.per_sequence(response_logprobs(model, packed))[1]
        packed.position_ids = leaking
        joined = packed.per_sequence(response_logprobs(model, packed))[1]
    assert not torch.allclose(separate, joined, atol=1e-3)


def test_a_learners_packed_loss_and_gradients_equal_its_padded_ones_in_float32(tiny_policy):
    # The learner's own path end to end: its attention choice, π_old, the clipped loss, the backward pass.
    config = tiny_run_config(rollout={"prompts_per_step": 1}, optimizer={"mini_batch_prompts": 1,
                                                                         "micro_batch_sequences": 4})
    results = {}
    for is_packing in (True, False):
        model, tokenizer = tiny_policy(seed=7)
        learner = Learner(config, model, tokenizer)
        assert learner.model.config._attn_implementation == packed_attention.SDPA_PER_PACKED_SEQUENCE
        learner.is_packing = is_packing
        mini_batch = sequences()
        old = {key: values + 0.1 for key, values in learner.old_logprobs([mini_batch]).items()}  # ratios ≠ 1
        learner.optimizer.zero_grad(set_to_none=True)
        totals = learner.accumulate_gradients(mini_batch, old)
        results[is_packing] = totals["loss"], {name: p.grad.clone() for name, p in learner.model.named_parameters()}
    (packed_loss, packed_grads), (padded_loss, padded_grads) = results[True], results[False]
    assert packed_loss == pytest.approx(padded_loss, rel=1e-5, abs=0)
    for name, expected in padded_grads.items():
        assert_within_its_scale(packed_grads[name], expected, name)
