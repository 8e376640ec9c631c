"""No operation of a learner step on a packed micro-batch makes a tensor of (tokens × tokens).

Four 2,048-token sequences packed into one row of T = 8,192 tokens: transformers' SDPA path
would build a (1, 1, T, T) mask and a bias of the same size in every attention call; the
learner's packed attention (trainer/learning/packed_attention.py) runs each sequence alone. Every tensor
that any ATen operation returns, forward, backward and AdamW, is watched through PyTorch's
dispatch hooks (TorchDispatchMode).
"""

from __future__ import annotations

import torch

from tests.learning.tensor_watch import LargestTensorWatch
from tests.learning.conftest import tiny_run_config
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence, pack_batch
from trainer.learning.token_logprobs import response_logprobs
from trainer.learning.packed_attention import SDPA_PER_PACKED_SEQUENCE

SEQUENCE_TOKENS = 2048
PACKED_TOKENS = 4 * SEQUENCE_TOKENS  # T
VOCABULARY = 256  # small, so that no (chunk × vocabulary) tensor comes near T × T


def small_vocabulary_policy():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCABULARY, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True, pad_token_id=0,
                         max_position_embeddings=SEQUENCE_TOKENS)
    config._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def four_packed_sequences(prompt_tokens: int = 48) -> list[TrainingSequence]:
    generator = torch.Generator().manual_seed(0)
    return [
        TrainingSequence(
            prompt_ids=torch.randint(1, VOCABULARY, (prompt_tokens,), generator=generator).tolist(),
            response_ids=torch.randint(1, VOCABULARY, (SEQUENCE_TOKENS - prompt_tokens,), generator=generator).tolist(),
            advantage=advantage, group_key=f"p{index // 2}",
        )
        for index, advantage in enumerate((0.5, -0.5, 1.0, -1.0))
    ]


def test_a_learner_step_on_four_sequences_packed_into_8192_tokens_holds_no_tokens_by_tokens_tensor(
        smollm2_tokenizer_once):
    config = tiny_run_config(
        rollout={"prompts_per_step": 2, "max_prompt_tokens": 64, "max_response_tokens": SEQUENCE_TOKENS},
        optimizer={"mini_batch_prompts": 2, "micro_batch_tokens": PACKED_TOKENS, "logprob_chunk_tokens": 256},
    )
    learner = Learner(config, small_vocabulary_policy(), smollm2_tokenizer_once)
    sequences = four_packed_sequences()
    assert learner.micro_batches(sequences) == [sequences]  # one micro-batch: all four in one row of T tokens
    assert learner.model.config._attn_implementation == SDPA_PER_PACKED_SEQUENCE
    assert "sdpa_per_packed_sequence" in learner.attention_note and "on cpu" in learner.attention_note

    watch = LargestTensorWatch()
    with watch:
        metrics = learner.step(sequences)

    assert metrics["trained_sequences"] == 4 and metrics["optimizer_steps"] == 1
    assert {"aten._scaled_dot_product_flash_attention_for_cpu_backward", "aten.embedding_dense_backward"} <= \
        watch.operations
    assert watch.largest_numel < PACKED_TOKENS * PACKED_TOKENS, watch.largest


def test_the_watch_catches_the_dense_mask_of_transformers_own_sdpa_path():
    # Without this the test above could pass with a watch that sees nothing.
    model = small_vocabulary_policy()
    batch = pack_batch(four_packed_sequences(), torch.device("cpu"))
    watch = LargestTensorWatch()
    with watch, torch.no_grad():
        response_logprobs(model, batch, chunk_tokens=256)
    assert watch.largest_numel >= PACKED_TOKENS * PACKED_TOKENS, watch.largest
