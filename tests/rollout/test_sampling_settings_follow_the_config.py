"""Sampling settings come from the run's config, the same for every engine, and refuse nonsense."""

from __future__ import annotations

import pytest

from trainer.config import RunConfig
from trainer.rollout.base import SamplingSettings


def test_training_rollouts_take_the_group_size_and_budget_of_the_rollout_section():
    config = RunConfig.from_preset("cpu-demo")
    settings = SamplingSettings.from_config(config.rollout, seed=5)
    assert settings == SamplingSettings(n=4, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=192, seed=5)


def test_evaluation_takes_the_recipes_eight_samples_at_top_p_095():
    config = RunConfig.from_preset("h100x8")
    settings = SamplingSettings.for_evaluation(config.schedule, max_tokens=config.rollout.max_response_tokens)
    assert settings == SamplingSettings(n=8, temperature=1.0, top_p=0.95, top_k=-1, max_tokens=24576, seed=None)


def test_greedy_means_temperature_zero_and_one_sample():
    settings = SamplingSettings.greedy(max_tokens=7)
    assert settings.is_greedy and settings.n == 1 and settings.max_tokens == 7


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n", 0, "n must be at least 1, got 0"),
        ("temperature", -0.5, "temperature must be ≥ 0, got -0.5; use 0 for greedy"),
        ("top_p", 0.0, r"top_p must be in \(0, 1\], got 0.0"),
        ("top_k", 0, "top_k must be -1 \\(off\\) or ≥ 1, got 0"),
        ("max_tokens", 0, "max_tokens must be at least 1, got 0"),
    ],
)
def test_it_refuses_a_setting_out_of_range_naming_the_field_and_value(field, value, message):
    values = dict(n=1, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=8)
    values[field] = value
    with pytest.raises(ValueError, match=message):
        SamplingSettings(**values)
