"""A rollout pool's vLLM engine claims ``rollout.vllm_pool_gpu_memory_utilization`` of the GPUs it owns.

An asynchronous run's pool GPUs hold no learner: at the colocated share (0.6, which leaves room for the
learner's shards) 40% of each would sit idle while the key/value cache stays small. The stand-in ``vllm``
(tests/rollout/conftest.py) records what the engine is built with: the share is a GPU setting, and vLLM's CPU
platform reads it as a share of host memory instead.
"""

from __future__ import annotations

from trainer.asynchronous.generator_process import pool_engine_config
from trainer.config import RunConfig
from trainer.rollout.vllm_engine import VllmEngine

SMALL_LENGTHS = {"max_prompt_tokens": 64, "max_response_tokens": 64}


def pool_run(**rollout) -> RunConfig:
    return RunConfig.from_preset("h100x8", {
        "cluster": {"rollout_gpus": 2}, "retry": {"max_prompt_tokens": 64},
        "rollout": {"max_staleness": 1, **SMALL_LENGTHS, **rollout}})


def test_a_pool_engine_is_built_with_the_pools_share_not_the_colocated_one(fake_vllm, random_llama, tokenizer):
    config = pool_run(vllm_gpu_memory_utilization=0.5, vllm_pool_gpu_memory_utilization=0.8)
    VllmEngine.from_config(pool_engine_config(config), random_llama, tokenizer)
    (llm,) = fake_vllm.instances
    assert llm.kwargs["gpu_memory_utilization"] == 0.8
    assert llm.kwargs["enable_sleep_mode"] is False


def test_the_pools_share_defaults_to_most_of_a_gpu_the_engine_owns():
    config = pool_run()
    assert config.rollout.vllm_gpu_memory_utilization == 0.6
    assert pool_engine_config(config).rollout.vllm_gpu_memory_utilization == 0.85


def test_an_engine_sharing_its_gpus_with_the_learner_keeps_the_colocated_share(fake_vllm, random_llama, tokenizer):
    config = RunConfig.from_preset("h100x8", {"retry": {"max_prompt_tokens": 64}, "rollout": {
        **SMALL_LENGTHS, "vllm_gpu_memory_utilization": 0.5, "vllm_pool_gpu_memory_utilization": 0.8}})
    VllmEngine.from_config(config, random_llama, tokenizer)
    (llm,) = fake_vllm.instances
    assert llm.kwargs["gpu_memory_utilization"] == 0.5
