"""The memory plan counts a rollout pool's GPUs at ``rollout.vllm_pool_gpu_memory_utilization``, the share its
engines are built with (trainer/asynchronous/generator_process.py ``pool_engine_config``), and names that field when the pool
does not fit; GPUs shared with the learner keep ``rollout.vllm_gpu_memory_utilization``."""

from __future__ import annotations

import pytest

from tests.memory.tiny_gpu import tiny_gpu_config, two_pools
from trainer.memory import memory_fit, memory_plan
from trainer.memory.memory_plan import GIB

SHARES = {"vllm_gpu_memory_utilization": 0.3, "vllm_pool_gpu_memory_utilization": 0.7}


def test_a_rollout_pools_vllm_share_is_the_pools_own():
    planned = memory_plan.plan(two_pools(rollout=SHARES))
    assert planned.vllm.share_bytes == int(0.7 * 40 * GIB)
    assert planned.settings["vllm_pool_gpu_memory_utilization"] == 0.7
    assert "vllm_gpu_memory_utilization" not in planned.settings


def test_gpus_shared_with_the_learner_keep_the_colocated_share():
    planned = memory_plan.plan(tiny_gpu_config(rollout=SHARES))
    assert planned.vllm.share_bytes == int(0.3 * 40 * GIB)
    assert planned.settings["vllm_gpu_memory_utilization"] == 0.3


def test_the_default_pool_share_fits_a_gpu_beside_its_context_and_a_push():
    planned = memory_plan.plan(two_pools())
    # 1 GiB context + 0.85 × 40 GiB + the rebuilt 6,291,456-byte embedding, under the 36 GiB usable
    assert planned.rollout_peak_gib == pytest.approx(35.005859375, abs=1e-9)
    assert planned.fits


def test_a_pool_share_too_small_for_one_sequence_names_the_pools_field():
    fields = memory_fit.check_fits_by_field(two_pools(cluster={"gpu_memory_gib": 2.0},
                                                      rollout={"vllm_pool_gpu_memory_utilization": 0.05}))
    assert list(fields) == ["rollout.vllm_pool_gpu_memory_utilization"]
    assert "raise rollout.vllm_pool_gpu_memory_utilization" in fields["rollout.vllm_pool_gpu_memory_utilization"][0]
