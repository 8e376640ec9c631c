"""memory-plan --smallest-fit: the fewest ranks, then the smallest vLLM tensor parallel size, then the largest vLLM share."""

from __future__ import annotations

from tests.memory.tiny_gpu import tiny_gpu_config
from trainer.memory import memory_fit


def test_a_small_model_fits_one_gpu_with_the_largest_vllm_share_that_leaves_the_learner_room():
    sizing = memory_fit.smallest_fit(tiny_gpu_config(cluster={"gpu_memory_gib": 8.0}))
    assert (sizing.ranks, sizing.vllm_tensor_parallel_size, sizing.vllm_gpu_memory_utilization) == (1, 1, 0.7)
    assert sizing.micro_batch_tokens == 64 + 192  # one full-length sequence per forward pass
    assert sizing.plan.fits and sizing.plan.rollout_peak_gib <= 0.9 * 8.0


def test_gpus_too_small_for_any_rank_count_give_no_answer_rather_than_a_wrong_one():
    config = tiny_gpu_config(cluster={"gpu_memory_gib": 2.0})
    assert memory_fit.smallest_fit(config) is None
    assert memory_fit.format_sizing(None, config) == "tiny_random: does not fit even 64 GPUs of 2 GiB"
    # 64 ranks would share a mini-batch of 32 prompts × 1 sample: 32 of them would hold no sequence, which the
    # trainer refuses, so they are not tried.
    one_sample = tiny_gpu_config(cluster={"gpu_memory_gib": 2.0}, rollout={"samples_per_prompt": 1})
    assert memory_fit.format_sizing(None, one_sample) == (
        "tiny_random: does not fit even 32 GPUs of 2 GiB; more ranks than a mini-batch's 32 sequences "
        "(optimizer.mini_batch_prompts × rollout.samples_per_prompt) are not tried")


def test_only_rank_counts_the_trainer_accepts_the_mini_batch_at_are_tried():
    # Uneven shares are exact (tests/learning/test_uneven_rank_shares_train_as_one_process.py), so 24 prompts × 8
    # samples = 192 sequences may split over any count up to 192.
    assert memory_fit.allowed_rank_counts(tiny_gpu_config()) == [1, 2, 4, 8, 16, 32, 64]
    assert memory_fit.allowed_rank_counts(
        tiny_gpu_config(rollout={"prompts_per_step": 48}, optimizer={"mini_batch_prompts": 24})) == [1, 2, 4, 8, 16, 32, 64]
    assert memory_fit.allowed_rank_counts(
        tiny_gpu_config(rollout={"prompts_per_step": 48, "samples_per_prompt": 1},
                        optimizer={"mini_batch_prompts": 24})) == [1, 2, 4, 8, 16]
