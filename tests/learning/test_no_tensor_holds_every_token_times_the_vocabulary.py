"""No operation on the learner's path makes a tensor of (tokens × vocabulary), at Qwen3's vocabulary of 151,936.

Every tensor that any ATen operation returns, in the forward passes, the backward passes and
the optimizer step, is watched through PyTorch's dispatch hooks (TorchDispatchMode); the
largest may hold ``optimizer.logprob_chunk_tokens`` rows of the vocabulary, not one per token.
"""

from __future__ import annotations

import pytest
import torch

from tests.learning.tensor_watch import LargestTensorWatch
from tests.learning.conftest import tiny_run_config
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence, pack_batch
from trainer.learning.token_logprobs import full_vocabulary_response_logprobs

QWEN3_VOCABULARY = 151_936
CHUNK_TOKENS = 64
RESPONSE_TOKENS = 300  # per sequence; two sequences, so 600 response tokens in one packed row


def qwen3_vocabulary_policy():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=QWEN3_VOCABULARY, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True, pad_token_id=0)
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def long_sequences() -> list[TrainingSequence]:
    generator = torch.Generator().manual_seed(0)
    return [
        TrainingSequence(
            prompt_ids=torch.randint(1, QWEN3_VOCABULARY, (6,), generator=generator).tolist(),
            response_ids=torch.randint(1, QWEN3_VOCABULARY, (RESPONSE_TOKENS,), generator=generator).tolist(),
            advantage=advantage, group_key="p0",
        )
        for advantage in (0.5, -0.5)
    ]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_learner_step_never_holds_more_than_a_chunk_of_vocabulary_rows(smollm2_tokenizer_once, dtype):
    config = tiny_run_config(
        model={"dtype": dtype},
        rollout={"prompts_per_step": 2, "max_response_tokens": 512},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 2, "logprob_chunk_tokens": CHUNK_TOKENS},
    )
    learner = Learner(config, qwen3_vocabulary_policy(), smollm2_tokenizer_once)
    sequences = long_sequences()
    watch = LargestTensorWatch()
    with watch:
        metrics = learner.step(sequences)

    assert metrics["tokens"] == 2 * RESPONSE_TOKENS and metrics["optimizer_steps"] == 1
    # The backward passes and the optimizer are watched too: the embedding's gradient, AdamW's update.
    assert "aten.embedding_dense_backward" in watch.operations
    assert {"aten.addcdiv_", "aten._foreach_addcdiv_", "aten._fused_adamw_"} & watch.operations  # loop, foreach, fused
    assert watch.largest_numel <= CHUNK_TOKENS * QWEN3_VOCABULARY, watch.largest


def test_the_watch_catches_the_full_vocabulary_function_it_replaced():
    model = qwen3_vocabulary_policy()
    batch = pack_batch(long_sequences()[:1], torch.device("cpu"))
    watch = LargestTensorWatch()
    with watch, torch.no_grad():
        full_vocabulary_response_logprobs(model, batch)
    assert watch.largest_numel >= RESPONSE_TOKENS * QWEN3_VOCABULARY, watch.largest
