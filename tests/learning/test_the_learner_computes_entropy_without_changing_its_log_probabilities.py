"""The π_old pass computes each token's entropy inside its chunks: equal to the full-vocabulary entropy, and
the log-probabilities it returns beside it are the same bits as without it, so asking changes no loss."""

from __future__ import annotations

import pytest
import torch

from trainer.learning.batching import TrainingSequence, pad_batch
from trainer.learning.token_logprobs import response_logprobs


def sequences() -> list[TrainingSequence]:
    return [
        TrainingSequence([11, 12, 13], [21, 22, 23, 24, 25, 26, 27], 0.5),
        TrainingSequence([31, 32], [41, 42, 43], -0.25),
    ]


def full_vocabulary_entropy(model, batch, temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(**batch.model_inputs()).logits.float() / temperature  # (B, K, V)
    log_probs = torch.log_softmax(logits, dim=-1)
    return -(log_probs.exp() * log_probs).sum(dim=-1)  # (B, K)


@pytest.mark.parametrize("chunk_tokens", [1, 4, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_entropy_equals_the_full_vocabulary_one(tiny_policy, chunk_tokens, temperature):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        _, entropy = response_logprobs(model, batch, temperature, chunk_tokens, with_entropy=True)
    expected = full_vocabulary_entropy(model, batch, temperature)
    is_real = batch.response_mask.bool()
    assert entropy.shape == expected.shape
    assert (expected[is_real] > 0.1).all()  # a random model spreads its mass: the figure is not trivially 0
    torch.testing.assert_close(entropy[is_real], expected[is_real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chunk_tokens", [1, 4, 1024])
def test_asking_for_the_entropy_leaves_every_log_probability_bit_for_bit(tiny_policy, chunk_tokens):
    model, tokenizer = tiny_policy(seed=5)
    batch = pad_batch(sequences(), tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        without = response_logprobs(model, batch, 0.7, chunk_tokens)
        with_entropy, _ = response_logprobs(model, batch, 0.7, chunk_tokens, with_entropy=True)
    assert torch.equal(without, with_entropy)
