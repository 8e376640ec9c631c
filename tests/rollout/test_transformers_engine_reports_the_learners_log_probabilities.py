"""The transformers engine's log-probabilities of what it sampled are the learner's π_old at the same temperature."""

from __future__ import annotations

import pytest
import torch

from trainer.learning.batching import TrainingSequence, pad_batch
from trainer.learning.token_logprobs import response_logprobs
from trainer.observability.gap import train_inference_gap
from trainer.rollout.base import SamplingSettings
from trainer.rollout.transformers_engine import TransformersEngine

PROMPTS = [[5, 6, 7, 8], [9, 10]]


def learner_logprobs(model, generations, temperature):
    sequences = [TrainingSequence(prompt_ids=PROMPTS[g.prompt_index], response_ids=g.token_ids, advantage=0.0) for g in generations]
    batch = pad_batch(sequences, pad_token_id=0, device=torch.device("cpu"))
    with torch.no_grad():
        return batch.per_sequence(response_logprobs(model, batch, temperature))


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_they_match_the_learners_at_the_sampling_temperature_and_not_at_another(random_llama, tokenizer, temperature):
    engine = TransformersEngine(random_llama, tokenizer)
    sampling = SamplingSettings(n=3, temperature=temperature, top_p=1.0, top_k=-1, max_tokens=12, seed=4)
    generations = list(engine.generate(PROMPTS, sampling))
    assert all(len(g.logprobs) == g.num_tokens for g in generations)
    same = train_inference_gap(zip(learner_logprobs(random_llama, generations, temperature), [g.logprobs for g in generations]))
    other = train_inference_gap(zip(learner_logprobs(random_llama, generations, 1.3), [g.logprobs for g in generations]))
    assert same["logprob_abs_diff_max"] < 1e-4
    assert other["logprob_abs_diff_mean"] > 100 * same["logprob_abs_diff_mean"]


def test_with_top_p_they_are_those_of_the_nucleus_the_token_was_drawn_from(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)
    sampling = SamplingSettings(n=3, temperature=1.0, top_p=0.5, top_k=-1, max_tokens=8, seed=4)
    generations = list(engine.generate(PROMPTS, sampling))
    learner = learner_logprobs(random_llama, generations, 1.0)
    # Renormalised over the nucleus, every sampled token is likelier to the engine than to the full softmax.
    assert all((torch.tensor(g.logprobs) > values + 0.1).all() for g, values in zip(generations, learner))
