"""A rollout pool's engine is built without vLLM's sleep mode.

A pool's GPUs hold no learner, so its engines never sleep: sleep mode (the colocated default) would put vLLM's
memory under its own allocator for nothing. (That a pool's engines start together is
test_a_pool_of_engine_actors_answers_as_one_generator.py's.)
"""

from __future__ import annotations

from trainer.asynchronous.generator_process import pool_engine_config
from trainer.config import RunConfig


def test_a_pool_engine_is_built_without_sleep_mode_and_otherwise_as_configured():
    config = RunConfig.from_preset("h100x8", {"cluster": {"rollout_gpus": 2}, "rollout": {"max_staleness": 1}})
    assert config.rollout.vllm_enable_sleep_mode
    pooled = pool_engine_config(config)
    assert not pooled.rollout.vllm_enable_sleep_mode
    # Its share of the GPU is the pool's own (test_a_pool_engine_claims_the_pools_share_of_the_gpus_it_owns.py).
    pool_settings = {"rollout": {"vllm_enable_sleep_mode", "vllm_gpu_memory_utilization"}}
    assert pooled.model_dump(exclude=pool_settings) == config.model_dump(exclude=pool_settings)
