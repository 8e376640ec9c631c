"""memory-plan --smallest-fit: the fewest ranks, then the smallest vLLM tensor parallel size, then the largest vLLM share."""

from __future__ import annotations

from tests.memory_plan.tiny_gpu import tiny_gpu_config
from trainer import memory_plan


def test_a_small_model_fits_one_gpu_with_the_largest_vllm_share_that_leaves_the_learner_room():
    sizing = memory_plan.smallest_fit(tiny_gpu_config(cluster={"gpu_memory_gib": 8.0}))
    assert (sizing.ranks, sizing.vllm_tensor_parallel_size, sizing.vllm_gpu_memory_utilization) == (1, 1, 0.7)
    assert sizing.micro_batch_tokens == 64 + 192  # one full-length sequence per forward pass
    assert sizing.plan.fits and sizing.plan.rollout_peak_gib <= 0.9 * 8.0


def test_gpus_too_small_for_any_rank_count_give_no_answer_rather_than_a_wrong_one():
    config = tiny_gpu_config(cluster={"gpu_memory_gib": 2.0})
    assert memory_plan.smallest_fit(config) is None
    assert "does not fit even 64 GPUs of 2 GiB" in memory_plan.format_sizing(None, config)
