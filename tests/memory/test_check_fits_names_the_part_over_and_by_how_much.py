"""check_fits: empty when a run fits; otherwise one message per part over, with the amount and the fix."""

from __future__ import annotations

import re

import pytest

from tests.memory.tiny_gpu import tiny_gpu_config
from trainer.config import RunConfig
from trainer.memory import memory_fit, memory_plan
from trainer.ranks import tensor_parallel_problem


def amount_over(message: str) -> float:
    return float(re.search(r"by (\d+\.\d) GiB", message)[1])


def test_a_run_that_fits_has_nothing_to_say():
    assert memory_fit.check_fits(tiny_gpu_config()) == []


def test_a_cpu_run_is_not_planned():
    assert memory_fit.check_fits(RunConfig.from_preset("cpu-demo")) == []


def test_a_learner_over_the_usable_memory_is_named_with_its_excess():
    config = tiny_gpu_config(cluster={"gpu_memory_gib": 2.0}, rollout={"vllm_gpu_memory_utilization": 0.05})
    result = memory_plan.plan(config)
    [learner_message] = [m for m in memory_fit.check_fits(config) if m.startswith("learner step")]
    assert "over the 1.8 GiB a rank may use (2 GiB GPU, 10% kept spare)" in learner_message
    assert amount_over(learner_message) == pytest.approx(result.learner_peak_gib - 1.8, abs=0.06)
    assert "optimizer.micro_batch_tokens" in learner_message


def test_a_vllm_share_that_leaves_the_learner_no_room_is_named_with_its_excess():
    config = tiny_gpu_config(rollout={"vllm_gpu_memory_utilization": 0.95})
    [message] = memory_fit.check_fits(config)
    assert message.startswith("rollout: ")
    assert "vLLM's share 38.0 GiB" in message
    assert amount_over(message) == pytest.approx(memory_plan.plan(config).rollout_peak_gib - 36.0, abs=0.06)
    assert "lower rollout.vllm_gpu_memory_utilization" in message


def test_a_vllm_share_too_small_for_one_full_sequence_says_so():
    config = tiny_gpu_config(cluster={"gpu_memory_gib": 4.0}, rollout={"vllm_gpu_memory_utilization": 0.5})
    messages = memory_fit.check_fits(config)
    assert any("not the key/value cache of one 256-token sequence" in m for m in messages)


def test_a_model_whose_architecture_the_plan_cannot_find_is_refused_with_the_reason():
    config = tiny_gpu_config(model={"source": "huggingface", "name_or_path": "someone/unknown-model"})
    [message] = memory_fit.check_fits(config)
    assert "does not know the architecture of model 'someone/unknown-model'" in message
    assert "Qwen/Qwen2.5-7B" in message  # the models it does know


def test_messages_are_keyed_by_the_field_a_person_would_change():
    config = tiny_gpu_config(rollout={"vllm_gpu_memory_utilization": 0.95})
    assert list(memory_fit.check_fits_by_field(config)) == ["rollout.vllm_gpu_memory_utilization"]


def test_a_vllm_engine_spanning_two_of_the_ranks_fits_with_half_its_weights_and_cache_on_each():
    one, two = (tiny_gpu_config(rollout={"vllm_tensor_parallel_size": size}) for size in (1, 2))
    assert memory_fit.check_fits(two) == [] and memory_fit.check_fits_by_field(two) == {}
    vllm_one, vllm_two = (memory_plan.plan(config).vllm for config in (one, two))
    assert vllm_two.weights_bytes == vllm_one.weights_bytes // 2
    assert vllm_two.kv_bytes_per_token == vllm_one.kv_bytes_per_token // 2  # the tiny model's 2 KV heads, one per rank


def test_a_run_the_trainer_would_refuse_for_its_ranks_is_refused_unplanned_on_the_field_to_change():
    config = tiny_gpu_config(rollout={"vllm_tensor_parallel_size": 4})  # an engine of 4 on 2 GPUs
    [message] = memory_fit.check_fits(config)
    assert message == f"ranks: {tensor_parallel_problem(4, 2)}"
    assert list(memory_fit.check_fits_by_field(config)) == ["rollout.vllm_tensor_parallel_size"]
    thin = tiny_gpu_config(cluster={"num_gpus": 4}, rollout={"prompts_per_step": 1, "samples_per_prompt": 2},
                           optimizer={"mini_batch_prompts": 1})
    assert memory_fit.check_fits_by_field(thin) == {"optimizer.mini_batch_prompts": [
        "ranks: optimizer.mini_batch_prompts (1) × rollout.samples_per_prompt (2) is 2 sequences per optimizer step, "
        "fewer than the 4 ranks that share each mini-batch's sequences: 2 of them would hold none in any mini-batch "
        "and only run zero-weighted placeholder passes; set optimizer.mini_batch_prompts to at least 2 (and "
        "rollout.prompts_per_step to a multiple of it), or rollout.samples_per_prompt to at least 4"]}
    with pytest.raises(ValueError, match=r"must divide the run's 2 ranks .* but is 4"):
        memory_plan.plan(config)
