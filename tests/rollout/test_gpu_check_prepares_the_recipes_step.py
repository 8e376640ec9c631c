"""deploy/gpu_check.py's preparations, checked here: the GPU day has 15 minutes and no second try."""

from __future__ import annotations

import argparse

from deploy import gpu_check


def arguments(**values) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    gpu_check.add_arguments(parser)
    return parser.parse_args([f"--{name.replace('_', '-')}={value}" for name, value in values.items()])


def test_its_learner_step_is_the_recipes_full_length_sequence_on_one_gpu():
    config = gpu_check._one_gpu_config(arguments(), gpu_memory_gib=131.0)
    assert (config.rollout.max_prompt_tokens, config.rollout.max_response_tokens) == (8192, 24576)
    assert config.optimizer.micro_batch_tokens == 8192 + 24576  # one whole sequence per forward pass
    assert config.cluster.num_gpus == 1 and config.model.name_or_path == "Qwen/Qwen3-1.7B"
    assert config.model.gradient_checkpointing and config.model.dtype == "bfloat16"


def test_its_tokenizer_covers_exactly_qwen3s_vocabulary_without_a_download():
    tokenizer = gpu_check._tokenizer_of_the_vocabulary()
    assert len(tokenizer) == 151_936
    assert tokenizer.eos_token_id is not None and tokenizer.pad_token_id is not None
    ids = tokenizer("w100 w151935", add_special_tokens=False)["input_ids"]
    assert ids == [100, 151_935] and tokenizer.decode(ids) == "w100 w151935"


def test_its_sequences_carry_both_signs_of_advantage_at_the_requested_lengths():
    config = gpu_check._one_gpu_config(arguments(), gpu_memory_gib=131.0)
    sequences = gpu_check._sequences(config, 8192, 24576)
    assert [(len(s.prompt_ids), len(s.response_ids)) for s in sequences] == [(8192, 24576)] * 2
    assert sorted(s.advantage for s in sequences) == [-0.5, 0.5]
    assert max(max(s.prompt_ids + s.response_ids) for s in sequences) < 151_936


def test_its_generation_check_runs_the_transformers_engine_and_counts_what_it_asked_for():
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer.config import RunConfig

    tokenizer = gpu_check._tokenizer_of_the_vocabulary()
    model = LlamaForCausalLM(LlamaConfig(vocab_size=151_936, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    figures = gpu_check._transformers_generation(RunConfig.from_preset("cpu-smoke"), SimpleNamespace(model=model),
                                                 tokenizer, arguments(generate_tokens=8, samples=2, prompts=3))
    assert figures["samples"] == 6 and 0 < figures["tokens"] <= 6 * 8
    assert figures["tokens_per_second"] > 0
