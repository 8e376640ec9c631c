"""The transformers engine's own sampler and attention: the distribution it draws from is the one it reports, and
its grouped-query attention computes what transformers' attention computes."""

from __future__ import annotations

import math

import pytest
import torch

from tests.rollout.conftest import tiny_llama_config
from trainer.rollout.base import SamplingSettings
from trainer.rollout.transformers_engine import GROUPED_QUERY_ATTENTION, _draw, _sampling_processors

ROWS = 20_000


def draws(logits: list[float], sampling: SamplingSettings, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    tokens, logprobs = _draw(torch.tensor([logits] * ROWS), _sampling_processors(sampling), sampling.is_greedy,
                             generator)
    return torch.tensor(tokens), torch.tensor(logprobs)


def settings(**overrides) -> SamplingSettings:
    values = {"n": 1, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 8, **overrides}
    return SamplingSettings(**values)


def test_tokens_come_as_often_as_their_probability_and_carry_its_log():
    probabilities = torch.tensor([0.5, 0.3, 0.15, 0.05])
    tokens, logprobs = draws(probabilities.log().tolist(), settings())
    shares = torch.bincount(tokens, minlength=4).float() / ROWS
    assert torch.allclose(shares, probabilities, atol=0.015), shares
    assert torch.allclose(logprobs, probabilities.log()[tokens], atol=1e-6)


def test_a_token_the_warpers_remove_is_never_drawn_and_the_rest_renormalise():
    tokens, logprobs = draws([2.0, 1.0, 0.0, -1.0, float("-inf")], settings(top_k=2))
    assert set(tokens.tolist()) == {0, 1}
    kept = torch.tensor([2.0, 1.0]).log_softmax(-1)
    assert torch.allclose(logprobs, kept[tokens], atol=1e-6)


def test_the_temperature_sharpens_what_is_drawn_and_what_is_reported():
    tokens, logprobs = draws([1.0, 0.0], settings(temperature=0.5))
    expected = torch.tensor([2.0, 0.0]).log_softmax(-1)
    assert abs((tokens == 0).float().mean().item() - expected[0].exp().item()) < 0.015
    assert torch.allclose(logprobs, expected[tokens], atol=1e-6)


def test_greedy_takes_the_most_likely_token_and_the_same_seed_draws_the_same_tokens():
    tokens, _ = draws([0.0, 3.0, 1.0], SamplingSettings.greedy(max_tokens=4))
    assert set(tokens.tolist()) == {1}
    first, _ = draws([0.0, 0.1, 0.2], settings(), seed=5)
    again, _ = draws([0.0, 0.1, 0.2], settings(), seed=5)
    other, _ = draws([0.0, 0.1, 0.2], settings(), seed=6)
    assert torch.equal(first, again) and not torch.equal(first, other)


@pytest.mark.parametrize("uniform", [0.0, 1 - 2**-24])
def test_a_uniform_number_at_either_end_of_its_range_still_draws_a_possible_token(monkeypatch, uniform):
    monkeypatch.setattr(torch, "rand", lambda shape, **kwargs: torch.full(shape, uniform, dtype=kwargs["dtype"]))
    tokens, logprobs = _draw(torch.tensor([[float("-inf"), 0.0, 0.0, float("-inf")]]), [], False, None)
    assert tokens == [1 if uniform == 0.0 else 2] and math.isclose(logprobs[0], math.log(0.5), rel_tol=1e-6)


@pytest.mark.parametrize("reference", ["sdpa", "eager"])
def test_grouped_query_attention_computes_what_transformers_computes_with_padding(reference):
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(vocab_size=40)).eval()  # 4 query heads sharing 2 key/value heads
    input_ids = torch.randint(3, 40, (3, 9))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, :4] = 0  # left padding, as the engine batches prompts
    attention_mask[1, :1] = 0
    outputs = {}
    for implementation in (reference, GROUPED_QUERY_ATTENTION):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs[implementation] = model(input_ids=input_ids, attention_mask=attention_mask).logits
    real = attention_mask.bool()
    assert torch.allclose(outputs[reference][real], outputs[GROUPED_QUERY_ATTENTION][real], atol=1e-5)
