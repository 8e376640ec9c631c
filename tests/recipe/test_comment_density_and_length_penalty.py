"""The share of comments in Lean code, and the reward multiplier for long answers."""

from __future__ import annotations

import pytest

from trainer.config import RewardConfig
from trainer.recipe.format_reward import comment_density, length_penalty


@pytest.mark.parametrize(
    ("text", "density"),
    [
        pytest.param("", 0.0, id="empty"),
        pytest.param("  \n\t", 0.0, id="only-whitespace"),
        pytest.param("simp\nring", 0.0, id="no-comments"),
        pytest.param("-- all comment", 1.0, id="only-a-line-comment"),
        pytest.param("simp -- ab", 4 / 8, id="line-comment-after-code"),
        pytest.param("/- x -/ simp", 5 / 9, id="block-comment"),
        pytest.param('#eval "--x"', 0.0, id="dashes-in-a-string"),
        pytest.param("/- a /- b -/ c -/ ab", 11 / 13, id="nested-block-comment"),
    ],
)
def test_comment_density_is_the_share_of_visible_characters_in_comments(text, density):
    assert comment_density(text) == pytest.approx(density)


def test_an_unclosed_block_comment_runs_to_the_end():
    assert comment_density("simp /- never closed\nring") == pytest.approx(17 / 21)


def test_the_length_penalty_is_off_by_default():
    config = RewardConfig()
    assert config.length_penalty_start_tokens is None
    assert length_penalty(24_576, 24_576, config) == 1.0
    assert length_penalty(0, 24_576, config) == 1.0


@pytest.mark.parametrize(
    ("num_tokens", "multiplier"),
    [(0, 1.0), (600, 1.0), (700, 0.75), (800, 0.5), (999, 0.0025), (1000, 0.0), (1200, 0.0)],
)
def test_the_length_penalty_falls_linearly_from_its_start_to_the_budget(num_tokens, multiplier):
    config = RewardConfig(length_penalty_start_tokens=600)
    assert length_penalty(num_tokens, 1000, config) == pytest.approx(multiplier)


def test_a_penalty_starting_at_the_budget_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"length_penalty_start_tokens \(1000\) must be below the response budget \(1000 tokens\)"):
        length_penalty(10, 1000, RewardConfig(length_penalty_start_tokens=1000))


def test_negative_token_counts_are_refused():
    with pytest.raises(ValueError, match="num_tokens must be ≥ 0, got -1"):
        length_penalty(-1, 1000, RewardConfig())
