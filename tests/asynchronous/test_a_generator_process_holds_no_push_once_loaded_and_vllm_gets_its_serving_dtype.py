"""A weight push to a generator process costs shared memory once: in vLLM's serving dtype, and only until loaded.

Pushes travel through /dev/shm (torch.multiprocessing). A vLLM generator casts every weight to its serving dtype
anyway, so the push is cast before it travels (bfloat16 on GPUs: half the learner's float32 master weights); a
transformers generator samples from the weights as the learner keeps them. Once the generator has loaded a push, it
unmaps it: a push still referenced while the next is awaited would keep two copies in /dev/shm.
"""

from __future__ import annotations

import copy

import psutil
import torch

from tests.learning.conftest import tiny_run_config
from trainer.asynchronous.generator_process import GeneratorProcess, packed_weights, push_dtype
from trainer.config import RunConfig
from trainer.rollout.base import SamplingSettings


def test_a_vllm_generator_is_sent_weights_in_its_serving_dtype_and_a_transformers_one_as_the_learner_keeps_them():
    state_dict = {"embed.weight": torch.randn(4, 3), "norm.weight": torch.ones(3), "steps": torch.tensor([7])}
    on_gpus = RunConfig.from_preset("h100x8", {})
    assert push_dtype(on_gpus) == torch.bfloat16
    sent = {flat.dtype: flat for _, flat in packed_weights(state_dict, push_dtype(on_gpus))}
    assert set(sent) == {torch.bfloat16, torch.int64}
    assert sent[torch.bfloat16].numel() == 15
    transformers = tiny_run_config()
    assert push_dtype(transformers) is None
    assert {flat.dtype for _, flat in packed_weights(state_dict, push_dtype(transformers))} == {torch.float32, torch.int64}


def mapped_pushes(pid: int) -> list[str]:
    """torch.multiprocessing's shared-memory segments mapped into the process (file descriptors it received)."""
    return sorted({region.path for region in psutil.Process(pid).memory_maps() if "/torch_" in region.path})


def test_a_generator_process_unmaps_a_push_once_it_has_loaded_it(smollm2_tokenizer_once):
    from trainer.learning.models import tiny_random_policy

    config = tiny_run_config(rollout={"max_response_tokens": 2, "max_staleness": 1})
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    generator = GeneratorProcess(config, tokenizer, seed=0)
    try:
        for version in (1, 2):
            generator.push_weights(model, version=version)
            # Commands are served in order: once this job is answered, the push before it has been loaded.
            list(generator.generate([[5, 6, 7]], SamplingSettings.greedy(max_tokens=2)))
            assert mapped_pushes(generator.pid) == [], version
    finally:
        generator.close()
