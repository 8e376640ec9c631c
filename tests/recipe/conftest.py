"""A problem with the recipe's multi-line header and a two-line statement, and the recipe's settings."""

from __future__ import annotations

import pytest

from trainer.config import RetryConfig, RewardConfig
from trainer.recipe.problems import Problem

from tests.recipe.answers import STATEMENT


@pytest.fixture
def problem() -> Problem:
    return Problem(
        problem_id="p-1",
        formal_statement=STATEMENT,
        informal_statement="Show that a² + b² ≥ 0 for nonnegative reals a and b.",
        name="sum_sq_nonneg",
    )


@pytest.fixture
def recipe_reward() -> RewardConfig:
    return RewardConfig()


@pytest.fixture
def recipe_retry() -> RetryConfig:
    return RetryConfig()
