"""The plan's method against reality: the same micro-step, planned on fake tensors and run for real on this CPU.

Two ranks under FSDP2 (gloo), activation checkpointing, 4 layers of hidden 512, 2,048 packed tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.memory.tiny_gpu import tiny_gpu_config
from trainer.config import RunConfig
from trainer.memory import memory_measurement, memory_plan


def test_the_planned_peak_of_a_two_rank_fsdp_step_is_within_a_quarter_of_the_measured_one_and_says_what_ran():
    validated = memory_measurement.validate_on_cpu(RunConfig.from_preset("h100x8"))
    assert 0.75 <= validated["predicted_mib"] / validated["measured_mib"] <= 1.25, validated
    # Above what its shards of weights, gradients and AdamW's moments alone take (29.4M parameters × 16 bytes / 2):
    # a real step was measured, not an empty reading.
    assert validated["measured_mib"] > 29.4e6 * 16 / 2 / 2**20, validated
    what = validated["what"]
    for claim in ("4 layers of hidden 512", "2,048 tokens", "4 packed sequences", "2 ranks under FSDP2 (gloo",
                  "activation checkpointing", "imports", "load average"):
        assert claim in what, (claim, what)
    assert memory_measurement.validation_dtype(RunConfig.from_preset("h100x8"))[1] in what


def computes_bfloat16_natively(env: dict) -> str:
    return subprocess.run([sys.executable, "-c", "from trainer.compute_dtype import cpu_bfloat16_verdict, cpu_report; "
                           "print(cpu_bfloat16_verdict(cpu_report())[0])"],
                          capture_output=True, text=True, env=env, check=True).stdout.strip()


def validation_dtype_under(env: dict) -> list[str]:
    """The validation's dtype and reason for the h100x8 preset (bfloat16), in a process with ``env``."""
    script = ("import json; from trainer.config import RunConfig; from trainer.memory.memory_measurement import "
              "validation_config, validation_dtype; config = RunConfig.from_preset('h100x8'); "
              "print(json.dumps([*validation_dtype(config), validation_config(config).model.dtype]))")
    return json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                                     check=True).stdout)


AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def test_on_a_cpu_that_would_emulate_bfloat16_the_validation_computes_in_float32_and_says_why():
    dtype, why, configured = validation_dtype_under({**os.environ, **AVX2_ONLY})
    assert (dtype, configured) == ("float32", "float32")
    assert why.startswith("float32 compute (not the run's bfloat16: ") and "AVX2" in why


def test_on_a_cpu_with_bfloat16_instructions_the_validation_computes_in_the_runs_bfloat16():
    env = {key: value for key, value in os.environ.items() if key not in AVX2_ONLY}
    if computes_bfloat16_natively(env) != "True":
        pytest.skip("this CPU has no bfloat16 instructions (AVX512-BF16 or AMX)")
    assert validation_dtype_under(env) == ["bfloat16", "bfloat16 compute", "bfloat16"]


def test_the_validation_runs_the_least_the_plans_claims_need():
    small = memory_measurement.validation_config(RunConfig.from_preset("h100x8"))
    shape = memory_measurement.VALIDATION_ARCHITECTURE[1]
    assert shape["num_hidden_layers"] >= 4 and shape["hidden_size"] >= 512
    assert small.cluster.num_gpus == 2 and small.model.gradient_checkpointing
    assert small.optimizer.micro_batch_tokens >= 2048


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
