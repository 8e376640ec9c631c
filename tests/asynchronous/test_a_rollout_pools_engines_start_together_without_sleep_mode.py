"""A rollout pool's engines start together, each without vLLM's sleep mode.

Each engine of a pool loads its model and starts vLLM on GPUs of its own: started one after another, a pool of
eight waited eight start-ups. And a pool's GPUs hold no learner, so its engines never sleep: sleep mode (the
colocated default) would put vLLM's memory under its own allocator for nothing.
"""

from __future__ import annotations

import copy

import psutil

from tests.learning.conftest import tiny_run_config
from trainer.asynchronous.generator_process import GeneratorPool, pool_engine_config
from trainer.config import RunConfig


def test_every_process_of_a_pool_is_started_before_the_first_is_ready(smollm2_tokenizer_once):
    config = tiny_run_config(rollout={"max_response_tokens": 2, "max_staleness": 1})
    pool = GeneratorPool.start(config, copy.deepcopy(smollm2_tokenizer_once), seed=0, devices=["1", "2"])
    try:
        first_ready = min(generator.ready_at for generator in pool.generators)
        started = [psutil.Process(generator.pid).create_time() for generator in pool.generators]
    finally:
        pool.close()
    assert max(started) < first_ready


def test_a_pool_engine_is_built_without_sleep_mode_and_otherwise_as_configured():
    config = RunConfig.from_preset("h100x8", {"cluster": {"rollout_gpus": 2}, "rollout": {"max_staleness": 1}})
    assert config.rollout.vllm_enable_sleep_mode
    pooled = pool_engine_config(config)
    assert not pooled.rollout.vllm_enable_sleep_mode
    # Its share of the GPU is the pool's own (test_a_pool_engine_claims_the_pools_share_of_the_gpus_it_owns.py).
    pool_settings = {"rollout": {"vllm_enable_sleep_mode", "vllm_gpu_memory_utilization"}}
    assert pooled.model_dump(exclude=pool_settings) == config.model_dump(exclude=pool_settings)
