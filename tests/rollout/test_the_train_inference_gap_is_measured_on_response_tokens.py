"""The train–inference gap (trainer/observability/gap.py) on hand-made log-probabilities with known answers."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config import RunConfig
from trainer.observability.gap import train_inference_gap


def test_it_averages_and_maxes_the_absolute_differences_over_every_token_of_every_answer():
    learner = [torch.tensor([-1.0, -2.0]), torch.tensor([-0.5])]
    engine = [[-1.1, -1.0], [-0.5]]
    gap = train_inference_gap(zip(learner, engine))
    assert gap["logprob_abs_diff_mean"] == pytest.approx((0.1 + 1.0 + 0.0) / 3)
    assert gap["logprob_abs_diff_max"] == pytest.approx(1.0)
    # exp(-1.0) ≈ 0.37 is outside [0.5, 2]; exp(0.1) and exp(0) are inside.
    assert gap["ratio_outside_share"] == pytest.approx(1 / 3)


def test_ratios_of_exactly_one_half_and_two_are_inside_the_bounds():
    learner = torch.tensor([math.log(0.5), math.log(2.0), math.log(2.01)])
    gap = train_inference_gap([(learner, [0.0, 0.0, 0.0])])
    assert gap["ratio_outside_share"] == pytest.approx(1 / 3)


def test_answers_without_engine_log_probabilities_are_left_out_and_none_at_all_gives_none():
    assert train_inference_gap([(torch.tensor([-1.0]), None)]) == {
        "logprob_abs_diff_mean": None, "logprob_abs_diff_max": None, "ratio_outside_share": None,
        "logprob_diff_tokens": 0}
    gap = train_inference_gap([(torch.tensor([-1.0]), None), (torch.tensor([-3.0]), [-2.0])])
    assert gap["logprob_abs_diff_mean"] == pytest.approx(1.0)


def test_an_engine_giving_a_log_probability_count_other_than_the_response_length_is_an_error():
    with pytest.raises(ValueError, match="the engine gave 1 log-probabilities for a response the learner scored in 2 tokens"):
        train_inference_gap([(torch.tensor([-1.0, -2.0]), [-1.0])])


def test_the_cpu_presets_run_vllm_on_cpu_from_the_command_line_and_a_cpu_run_may_not_ask_for_sleep_mode():
    for preset in ("cpu-smoke", "cpu-demo"):
        config = RunConfig.from_preset(preset, {"rollout": {"engine": "vllm"}})
        assert config.cluster.num_gpus == 0 and not config.rollout.vllm_enable_sleep_mode
    with pytest.raises(ValueError, match="vLLM runs on its CPU platform, which has no sleep mode; set rollout.vllm_enable_sleep_mode=false"):
        RunConfig.from_preset("cpu-demo", {"rollout": {"engine": "vllm", "vllm_enable_sleep_mode": True}})
