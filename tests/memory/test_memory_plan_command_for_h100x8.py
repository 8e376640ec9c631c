"""``python -m trainer memory-plan --preset h100x8 --json``: the contract, and the recipe's run fitting 8×H100."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.ranks import tensor_parallel_problem

ROOT = Path(__file__).resolve().parents[2]


def memory_plan(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer", "memory-plan", *arguments], capture_output=True, text=True,
                          cwd=ROOT, timeout=1800)


@pytest.fixture(scope="module")
def h100x8() -> dict:
    result = memory_plan("--preset", "h100x8", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_it_prints_exactly_the_contracts_fields(h100x8):
    assert set(h100x8) == {"preset", "model", "max_response_tokens", "ranks", "gpu_memory_gib", "per_rank_peak_gib",
                           "fits", "validated"}
    assert set(h100x8["per_rank_peak_gib"]) == {"learner", "rollout"}
    assert set(h100x8["validated"]) == {"predicted_mib", "measured_mib", "what"}
    assert "2 ranks under FSDP2" in h100x8["validated"]["what"]
    assert (h100x8["preset"], h100x8["model"], h100x8["max_response_tokens"], h100x8["ranks"],
            h100x8["gpu_memory_gib"]) == ("h100x8", "AI-MO/Kimina-Prover-Distill-1.7B", 24576, 8, 80.0)


def test_the_recipes_run_fits_80_gib_with_a_tenth_to_spare_on_every_rank(h100x8):
    assert h100x8["fits"] is True
    assert max(h100x8["per_rank_peak_gib"].values()) <= 0.9 * 80


def test_its_prediction_agrees_with_the_measurement_made_in_the_same_invocation(h100x8):
    validated = h100x8["validated"]
    assert 0.75 <= validated["predicted_mib"] / validated["measured_mib"] <= 1.25, validated


def test_overrides_use_the_same_set_syntax_and_a_run_that_does_not_fit_exits_1_with_the_reason():
    tiny_model = ["--set", "model.source=tiny_random", "--set", "rollout.max_prompt_tokens=64", "--set",
                  "retry.max_prompt_tokens=64", "--set", "rollout.max_response_tokens=192", "--set",
                  "optimizer.micro_batch_tokens=512"]
    result = memory_plan("--preset", "h100x8", *tiny_model, "--set", "cluster.gpu_memory_gib=2", "--set",
                         "rollout.vllm_gpu_memory_utilization=0.05", "--no-validate")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "DOES NOT FIT" in result.stdout and "learner step:" in result.stdout
    assert "--set cluster.gpu_memory_gib=2 --set rollout.vllm_gpu_memory_utilization=0.05" in result.stdout


def test_a_cpu_preset_has_no_gpu_memory_to_plan():
    result = memory_plan("--preset", "cpu-demo", "--json")
    assert result.returncode == 2
    assert "runs on CPU (cluster.num_gpus is 0)" in result.stderr


def test_a_run_the_trainer_would_refuse_for_its_ranks_is_not_planned_and_exits_2_with_the_rule():
    result = memory_plan("--preset", "h100x8", "--set", "rollout.vllm_tensor_parallel_size=3", "--no-validate")
    assert result.returncode == 2
    assert f"memory-plan: {tensor_parallel_problem(3, 8)}" in result.stderr
    assert "set it to one of 1, 2, 4, 8" in result.stderr
