"""The learner's chunked log-probs give the values and gradients the full-vocabulary function gave (1e-5, float32)."""

from __future__ import annotations

import pytest
import torch

from tests.learning.tolerances import assert_within_its_scale
from trainer.learning.batching import TrainingSequence, pad_batch
from trainer.learning.token_logprobs import chunked_token_logprobs, full_vocabulary_response_logprobs, response_logprobs


def sequences() -> list[TrainingSequence]:
    return [
        TrainingSequence([11, 12, 13], [21, 22, 23, 24, 25, 26, 27], 0.5),
        TrainingSequence([31, 32], [41, 42, 43], -0.25),
        TrainingSequence([51, 52, 53, 54], [61, 62, 63, 64, 65], 1.0),
    ]


def weighted_sum_and_gradients(model, logprobs_of, batch):
    # A loss that weighs every token differently, so a misplaced gradient cannot cancel out.
    model.zero_grad(set_to_none=True)
    logprobs = logprobs_of(batch)
    weights = torch.linspace(-1.0, 2.0, logprobs.numel()).view_as(logprobs)
    (logprobs * weights * batch.response_mask).sum().backward()
    return logprobs.detach(), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("chunk_tokens", [1, 4, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_and_gradients_of_every_parameter_match_the_full_vocabulary_function(tiny_policy, chunk_tokens, temperature):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))

    expected, expected_grads = weighted_sum_and_gradients(
        model, lambda b: full_vocabulary_response_logprobs(model, b, temperature), batch)
    got, got_grads = weighted_sum_and_gradients(
        model, lambda b: response_logprobs(model, b, temperature, chunk_tokens), batch)

    is_real = batch.response_mask.bool()
    torch.testing.assert_close(got[is_real], expected[is_real], rtol=1e-5, atol=1e-5)
    assert any(g.abs().max() > 0 for g in expected_grads.values())
    # One-token chunks are matrix-vector products, which BLAS sums in another order than the full matrix
    # product: measured up to 1.5e-5 of a tensor's scale on the tiny model (heads of 32), against about 4e-7
    # for larger chunks. A misplaced or missing gradient is off by its whole scale, so both bounds still catch it.
    tolerance = 5e-5 if chunk_tokens == 1 else 1e-5
    for name, expected_grad in expected_grads.items():
        assert_within_its_scale(got_grads[name], expected_grad, name, tolerance)


def test_the_no_grad_pass_gives_the_same_values_as_the_gradient_pass(tiny_policy):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        without_grad = response_logprobs(model, batch, 1.0, 4)
        reference = full_vocabulary_response_logprobs(model, batch, 1.0)
    with_grad = response_logprobs(model, batch, 1.0, 4)
    torch.testing.assert_close(without_grad, with_grad.detach(), rtol=0, atol=0)
    is_real = batch.response_mask.bool()
    torch.testing.assert_close(without_grad[is_real], reference[is_real], rtol=1e-5, atol=1e-5)


def test_the_model_gets_its_own_output_projection_back_after_the_call(tiny_policy):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    response_logprobs(model, batch)
    assert "forward" not in model.get_output_embeddings().__dict__
    assert model(input_ids=batch.input_ids).logits.shape[-1] == model.config.vocab_size


def test_a_projection_with_a_bias_gets_the_gradients_autograd_gives_the_direct_formula():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 9, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(50, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(50, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 50, (2, 9), generator=generator)
    upstream = torch.randn(2, 9, generator=generator, dtype=torch.float64)

    def direct(h, w, b):
        logits = (h @ w.t() + b) / 0.8  # float64 stays float64: softmax in float32 at least
        return torch.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)

    got = chunked_token_logprobs(hidden, weight, bias, labels, 0.8, chunk_tokens=4)
    got_grads = torch.autograd.grad((got * upstream).sum(), (hidden, weight, bias))
    expected = direct(hidden, weight, bias)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (hidden, weight, bias))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for got_grad, expected_grad in zip(got_grads, expected_grads):
        assert got_grad.dtype == expected_grad.dtype
        torch.testing.assert_close(got_grad, expected_grad, rtol=1e-5, atol=1e-5)


def test_under_bfloat16_autocast_the_values_stay_within_bfloat16s_rounding_of_the_full_function(tiny_policy):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = response_logprobs(model, batch, 1.0, 4)
        expected = full_vocabulary_response_logprobs(model, batch, 1.0)
    assert got.dtype == torch.float32
    is_real = batch.response_mask.bool()
    # The same bfloat16 matrix product, then float32 softmax arithmetic in both.
    torch.testing.assert_close(got[is_real], expected[is_real], rtol=1e-5, atol=1e-5)
