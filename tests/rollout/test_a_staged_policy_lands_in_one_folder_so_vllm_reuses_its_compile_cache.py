"""A policy that exists only in memory (tiny_random, the SmolLM2 GGUF) is written out for vLLM into a folder named
by its content: vLLM keys its torch.compile cache by the model's path, so the same policy must land in the same
folder in every run and process for a second start to find the compiled graphs (trainer/rollout/vllm_engine.py)."""

import os

import torch
from safetensors.torch import load_file

from trainer.rollout.vllm_engine import staged_policy_folder


def weights_of(model):
    return {name: tensor.detach().to(torch.bfloat16).contiguous() for name, tensor in model.state_dict().items()}


def test_the_same_policy_lands_in_the_same_folder_twice_and_is_written_once(tmp_path, random_llama, tokenizer):
    first = staged_policy_folder(weights_of(random_llama), random_llama, tokenizer, root=str(tmp_path))
    written_at = os.stat(os.path.join(first, "model.safetensors")).st_mtime_ns
    second = staged_policy_folder(weights_of(random_llama), random_llama, tokenizer, root=str(tmp_path))
    assert second == first
    assert os.stat(os.path.join(first, "model.safetensors")).st_mtime_ns == written_at
    assert sorted(path.name for path in tmp_path.iterdir()) == [os.path.basename(first)], "no half-written folder left"


def test_the_folder_holds_the_weights_config_and_tokenizer_vllm_reads(tmp_path, random_llama, tokenizer):
    folder = staged_policy_folder(weights_of(random_llama), random_llama, tokenizer, root=str(tmp_path))
    stored = load_file(os.path.join(folder, "model.safetensors"))
    assert stored.keys() == weights_of(random_llama).keys()
    assert all(torch.equal(stored[name], tensor) for name, tensor in weights_of(random_llama).items())
    assert {"config.json", "tokenizer.json"} <= set(os.listdir(folder))


def test_other_weights_land_in_another_folder(tmp_path, random_llama, fresh_random_llama, tokenizer):
    first = staged_policy_folder(weights_of(random_llama), random_llama, tokenizer, root=str(tmp_path))
    other = staged_policy_folder(weights_of(fresh_random_llama), fresh_random_llama, tokenizer, root=str(tmp_path))
    assert other != first
