"""The plan's method against reality: the same micro-step, planned on fake tensors and run for real on this CPU."""

from __future__ import annotations

import torch

from tests.memory_plan.tiny_gpu import tiny_gpu_config
from trainer import memory_plan
from trainer.config import RunConfig


def test_the_planned_peak_of_a_small_qwen3_step_is_within_a_quarter_of_the_measured_one():
    validated = memory_plan.validate_on_cpu(RunConfig.from_preset("h100x8"))
    assert 0.75 <= validated["predicted_mib"] / validated["measured_mib"] <= 1.25, validated
    assert validated["measured_mib"] > 300  # a real step of a 151,936-token vocabulary, not an empty reading


def test_what_a_rank_keeps_between_steps_is_its_shard_of_weights_gradients_and_adams_two_moments():
    config = tiny_gpu_config(cluster={"num_gpus": 2})
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_config(memory_plan.architecture_of(config), dtype=torch.float32)
    float32_bytes = sum(p.numel() for p in model.parameters()) * 4
    resident = memory_plan.plan_learner(config).resident_bytes
    # Weights, gradients, exp_avg and exp_avg_sq, each split over the 2 ranks (FSDP pads shards a little).
    assert 4 * float32_bytes / 2 <= resident <= 1.02 * 4 * float32_bytes / 2


def test_more_ranks_shard_more_and_a_longer_answer_costs_more():
    two = memory_plan.plan_learner(tiny_gpu_config(cluster={"num_gpus": 2}))
    four = memory_plan.plan_learner(tiny_gpu_config(cluster={"num_gpus": 4}))
    assert four.resident_bytes < 0.6 * two.resident_bytes
    longer = memory_plan.plan_learner(tiny_gpu_config(rollout={"max_response_tokens": 960},
                                                      optimizer={"micro_batch_tokens": 1024}))
    assert longer.peak_bytes > two.peak_bytes
