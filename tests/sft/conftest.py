"""Fixtures of the SFT tests: SmolLM2's tokenizer (parsed once), tiny random Llamas, small problems."""

from __future__ import annotations

import copy

import pytest

from trainer.config import RunConfig
from trainer.recipe.problems import Problem

SHORT_HEADER = "import Mathlib"


def tiny_config(**sections) -> RunConfig:
    """The cpu-demo preset on the tiny random model, with per-test overrides nested by section."""
    base = {"model": {"source": "tiny_random", "dtype": "float32", "gradient_checkpointing": False},
            "rollout": {"engine": "transformers"}}  # SFT and the learner; vLLM's tests are tests/rollout's
    for section, values in sections.items():
        base.setdefault(section, {}).update(values)
    return RunConfig.from_preset("cpu-demo", base)


def nat_sum_problems(pairs) -> list[Problem]:
    """``theorem tN : (a : ℕ) + b = a + b`` for each pair: true, and decided by the stand-in."""
    return [
        Problem(f"p{index}", f"theorem t{index} : ({a} : ℕ) + {b} = {a + b} := by", header=SHORT_HEADER)
        for index, (a, b) in enumerate(pairs)
    ]


@pytest.fixture(scope="session")
def smollm2_tokenizer_once():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture
def tokenizer(smollm2_tokenizer_once):
    return copy.deepcopy(smollm2_tokenizer_once)


@pytest.fixture
def tiny_policy(smollm2_tokenizer_once):
    """build(seed) -> a fresh (model, tokenizer); the same seed gives the same weights."""
    from trainer.learning.models import tiny_random_policy

    def build(seed: int = 0):
        return tiny_random_policy(seed, tokenizer=copy.deepcopy(smollm2_tokenizer_once))

    return build
