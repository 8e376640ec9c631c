"""The memory plan of an asynchronous run's two pools (trainer/memory/memory_plan.py, ``cluster.rollout_gpus`` > 0).

The learner pool shards the learner over its own GPUs and holds no vLLM; each rollout GPU holds vLLM's
share and, during a weight push, the layer vLLM's reload rebuilds, nothing of the learner; learner rank 0
gathers one float32 parameter at a time on its GPU before the push travels through host memory. The
figures are computed by hand from the tiny random model (49,152 × 64 tied embedding, its largest
parameter); the learner's own figures come from the same fake-tensor plan as a run without pools of as
many ranks.
"""

from __future__ import annotations

import json

import pytest

from tests.memory.tiny_gpu import memory_plan_of_eight_tiny_gpus, tiny_gpu_config, two_pools
from trainer.memory import memory_fit, memory_plan
from trainer.memory.memory_plan import CUDA_CONTEXT_GIB, GIB, VLLM_ASLEEP_GIB, learner_plan_key

EMBEDDING_ELEMENTS = 49152 * 64  # the tiny model's largest parameter


@pytest.fixture(scope="module")
def pools():
    return memory_plan.plan(two_pools())


@pytest.fixture(scope="module")
def shared_two_ranks():
    """The same learner on 2 GPUs it shares with vLLM: tiny_gpu_config's own run."""
    return memory_plan.plan(tiny_gpu_config())


def test_the_learner_pool_shards_over_its_own_gpus_as_a_run_of_that_many_ranks(pools, shared_two_ranks):
    assert (pools.ranks, pools.learner_gpus, pools.rollout_gpus) == (4, 2, 2)
    assert pools.learner == shared_two_ranks.learner


def test_the_learner_pool_holds_no_vllm_memory(pools, shared_two_ranks):
    assert pools.learner_step_peak_gib == pytest.approx(pools.learner.peak_bytes / GIB + CUDA_CONTEXT_GIB, abs=1e-12)
    assert pools.learner_step_peak_gib == pytest.approx(shared_two_ranks.learner_peak_gib - VLLM_ASLEEP_GIB, abs=1e-12)


def test_a_push_adds_the_largest_parameter_in_the_rollout_dtype_and_as_float32(pools):
    assert pools.push.largest_parameter_bytes == EMBEDDING_ELEMENTS * 2 == 6_291_456  # bfloat16, rebuilt by vLLM
    assert pools.push.largest_master_parameter_bytes == EMBEDDING_ELEMENTS * 4 == 12_582_912  # float32, gathered


def test_each_rollout_gpu_holds_vllms_share_and_the_layer_a_push_rebuilds_alone(pools):
    # 1 GiB CUDA context + 0.85 × 40 GiB vLLM share (the pool's) + 6,291,456 B = 0.005859375 GiB
    assert pools.rollout_peak_gib == pytest.approx(1 + 34 + 0.005859375, abs=1e-9)


def test_learner_rank_0_gathering_a_push_holds_its_shards_and_one_gathered_parameter(pools):
    # 12,582,912 B = 0.01171875 GiB beside the resident shards and the context
    expected = pools.learner.resident_bytes / GIB + 1 + 0.01171875
    assert pools.learner_push_gib == pytest.approx(expected, abs=1e-9)
    assert pools.learner_peak_gib == max(pools.learner_step_peak_gib, expected)


def test_a_learner_too_big_beside_vllm_fits_in_a_pool_of_its_own():
    # 2 GiB GPUs: 1.8 GiB usable. Beside vLLM's asleep 1.5 GiB the learner step is 2.6 GiB; alone, 1.1 GiB.
    shared = tiny_gpu_config(cluster={"gpu_memory_gib": 2.0}, rollout={"vllm_gpu_memory_utilization": 0.05})
    assert any(message.startswith("learner step: ") for message in memory_fit.check_fits(shared))
    pools = two_pools(cluster={"gpu_memory_gib": 2.0}, rollout={"vllm_pool_gpu_memory_utilization": 0.05})
    messages = memory_fit.check_fits(pools)
    assert not any(message.startswith("learner pool") for message in messages), messages
    # ...while vLLM's 0.1 GiB share is still too small for its own 2 GiB of activations: the rollout pool says so.
    assert [message.split(":")[0] for message in messages] == ["rollout pool (2 GPUs)"]


def test_a_rollout_pool_over_its_gpus_is_named_with_its_excess_and_the_fix():
    config = two_pools(rollout={"vllm_pool_gpu_memory_utilization": 0.95})
    # 1 + 38 + 0.005859375 = 39.005859375 GiB against 36 GiB usable: 3.0 GiB over
    assert memory_fit.check_fits_by_field(config) == {"rollout.vllm_pool_gpu_memory_utilization": [
        "rollout pool (2 GPUs): 39.0 GiB per GPU (vLLM's share 38.0 GiB, the layer a weight push rebuilds 0.0 GiB), "
        "over the 36.0 GiB a GPU may use (40 GiB GPU, 10% kept spare) by 3.0 GiB; lower "
        "rollout.vllm_pool_gpu_memory_utilization"]}


def test_a_learner_pool_over_its_gpus_is_named_with_the_pool():
    config = two_pools(cluster={"gpu_memory_gib": 1.0}, rollout={"vllm_pool_gpu_memory_utilization": 0.05})
    messages = memory_fit.check_fits(config)
    assert any(message.startswith("learner pool (2 GPUs): learner step ") and "give the learner more GPUs" in message
               for message in messages), messages
    assert any(message.startswith("learner pool (2 GPUs): the weight push ") for message in messages), messages


def test_the_json_contract_gains_both_pools_only_for_a_run_that_has_them(pools, shared_two_ranks):
    assert "pools" not in shared_two_ranks.to_json()
    shown = pools.to_json()
    assert shown["pools"]["learner"]["gpus"] == 2 and shown["pools"]["rollout"]["gpus"] == 2
    assert shown["pools"]["rollout"]["peak_gib"] == round(1 + 34 + 0.005859375, 2) == 35.01
    assert shown["pools"]["rollout"]["vllm_share_gib"] == 34.0
    assert shown["per_rank_peak_gib"] == {"learner": round(pools.learner_peak_gib, 2), "rollout": 35.01}


def test_a_run_without_a_pool_keeps_the_learner_plan_key_it_had():
    assert "rollout_gpus" not in json.loads(learner_plan_key(tiny_gpu_config()))
    assert json.loads(learner_plan_key(two_pools()))["rollout_gpus"] == 2


def test_the_command_prints_both_pools():
    printed = memory_plan_of_eight_tiny_gpus("rollout.max_staleness=1", "cluster.rollout_gpus=4")
    assert "8 GPUs of 40 GiB in two pools (4 learner, 4 rollout)" in printed
    assert "learner pool: 4 GPUs, FSDP2 over 4 ranks, no vLLM" in printed
    assert "rollout pool peak" in printed and "35.01" in printed
