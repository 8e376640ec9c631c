"""Micro-batches by a token budget per device (optimizer.micro_batch_tokens), as verl's dynamic batch size."""

from __future__ import annotations

import pytest

from tests.learning.conftest import tiny_run_config
from trainer.config import RunConfig
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence, sequence_tokens, token_budget_micro_batches


def sequence(prompt_tokens: int, response_tokens: int, name: str) -> TrainingSequence:
    return TrainingSequence([1] * prompt_tokens, [2] * response_tokens, 1.0, rollout_key=name)


def names(micro_batches) -> list[list[str]]:
    return [[s.rollout_key for s in micro] for micro in micro_batches]


def test_every_micro_batch_fits_the_budget_and_every_sequence_is_in_exactly_one():
    sequences = [sequence(100, length, f"s{i}") for i, length in enumerate([900, 20, 3000, 400, 1200, 50, 2500, 700])]
    micro_batches = token_budget_micro_batches(sequences, budget=4096)
    assert all(sum(sequence_tokens(s) for s in micro) <= 4096 for micro in micro_batches)
    assert sorted(name for micro in names(micro_batches) for name in micro) == sorted(s.rollout_key for s in sequences)
    assert len(micro_batches) == 3  # 9,570 tokens: the fewest bins of 4,096 that can hold them


def test_each_micro_batch_keeps_its_sequences_in_the_given_order():
    sequences = [sequence(10, length, f"s{i}") for i, length in enumerate([5, 80, 6, 70, 7, 60])]
    for micro in names(token_budget_micro_batches(sequences, budget=150)):
        assert micro == sorted(micro, key=lambda name: int(name[1:]))


def test_one_long_answer_and_many_short_ones_cost_what_their_tokens_cost():
    long_answer = sequence(8192, 24576, "long")
    short_answers = [sequence(300, 200, f"short{i}") for i in range(8)]
    micro_batches = token_budget_micro_batches([long_answer, *short_answers], budget=32768)
    assert ["long"] in names(micro_batches)
    assert len(micro_batches) == 2  # 32,768 + 4,000 tokens: the long one alone, the short ones together


def test_a_sequence_longer_than_the_budget_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="exceeds optimizer.micro_batch_tokens \\(1000\\); raise the budget"):
        token_budget_micro_batches([sequence(500, 600, "too long")], budget=1000)


def test_the_config_refuses_a_budget_that_cannot_hold_the_longest_possible_sequence():
    with pytest.raises(ValueError, match="set it to at least 32768"):
        RunConfig.from_preset("h100x8", {"optimizer": {"micro_batch_tokens": 24576}})


def test_the_h100x8_preset_fits_one_whole_answer_at_the_recipes_longest_in_one_forward_pass():
    config = RunConfig.from_preset("h100x8")
    longest = config.rollout.max_prompt_tokens + config.rollout.max_response_tokens
    assert config.optimizer.micro_batch_tokens == longest == 32768


class RankOf(Learner):
    """One rank's view of a two-rank world, without a process group: only the plan is asked of it."""

    def __init__(self, config, model, tokenizer, rank: int):
        super().__init__(config, model, tokenizer)
        self.rank = rank

    @property
    def rank_and_world(self):
        return self.rank, 2


def test_every_rank_runs_as_many_passes_as_the_busiest_the_others_padding_with_two_token_placeholders(tiny_policy):
    config = tiny_run_config(rollout={"max_prompt_tokens": 16, "max_response_tokens": 48},
                             retry={"max_prompt_tokens": 16}, optimizer={"micro_batch_tokens": 64})
    model, tokenizer = tiny_policy()
    # Rank 0 takes sequences 0, 2, 4 (120 tokens: two passes), rank 1 takes 1, 3 (20 tokens: one).
    sequences = [sequence(8, 48, "a"), sequence(5, 5, "b"), sequence(8, 48, "c"), sequence(5, 5, "d"), sequence(4, 4, "e")]
    plans = [RankOf(config, model, tokenizer, rank)._micro_batch_plan(sequences) for rank in (0, 1)]
    assert [len(plan) for plan in plans] == [2, 2]
    assert [is_placeholder for _, is_placeholder in plans[0]] == [False, False]
    real, placeholder = plans[1]
    assert names([real[0]]) == [["b", "d"]] and not real[1]
    assert placeholder[1] and [sequence_tokens(s) for s in placeholder[0]] == [2]
