"""data.selection history (trainer/loop/prompt_selection.py): a problem whose last k first-attempt groups gave no
signal is kept with probability max(floor, base^k), so skipped more often as k grows and never always; a group with
signal resets k, a group with no scored answer is no evidence, an error-correction group does not count, and k
starts from the promptset's prior_signal_less_streak."""

from __future__ import annotations

import math
import random

import pytest
import torch

from trainer.config import DataConfig, PromptSelection, RunConfig
from trainer.loop.prompt_selection import HistorySelection, keep_probability
from trainer.recipe.problems import Problem

HISTORY = DataConfig(selection=PromptSelection.HISTORY, keep_base=0.5, min_keep_probability=0.05)
NAN = math.nan


def problem(problem_id: str, prior_streak: int | None = None) -> Problem:
    return Problem(problem_id, f"theorem {problem_id} : (1 : ℕ) = 1 := by", prior_signal_less_streak=prior_streak)


def test_the_keep_probability_halves_with_each_signal_less_group_down_to_the_floor_and_no_further():
    assert [keep_probability(streak, HISTORY) for streak in range(7)] == [1.0, 0.5, 0.25, 0.125, 0.0625, 0.05, 0.05]
    assert keep_probability(10_000, HISTORY) == 0.05  # 0.5 ** 10_000 underflows to 0; the floor still holds


def test_the_uniform_default_keeps_no_selection_state():
    assert RunConfig().data.selection is PromptSelection.UNIFORM
    assert HistorySelection.for_run(RunConfig().data, [problem("a")]) is None


def test_streaks_start_from_the_promptsets_prior_streak_and_a_missing_one_from_zero():
    selection = HistorySelection(HISTORY, [problem("known", prior_streak=4), problem("new")])
    assert selection.streaks == {"known": 4, "new": 0}


def test_a_group_with_signal_resets_the_streak_one_without_lengthens_it_and_an_unscored_one_leaves_it():
    selection = HistorySelection(HISTORY, [problem(name, prior_streak=2) for name in "abcde"])
    rewards = torch.tensor([
        [1.0, 0.0, NAN],  # a: one passed, one failed: signal
        [0.0, 0.0, NAN],  # b: every scored answer failed
        [1.0, 1.0, 1.0],  # c: every answer passed
        [NAN, NAN, NAN],  # d: Lean censored every answer: no evidence either way
        [1.0, 0.0, 0.0],  # e's retry: error-correction groups do not count
    ])  # (G, N)
    selection.record_groups(["a", "b", "c", "d", None], rewards)
    assert selection.streaks == {"a": 0, "b": 3, "c": 3, "d": 2, "e": 2}


def test_a_skipped_problem_is_counted_against_the_step_whose_batch_was_drawn_and_read_once():
    selection = HistorySelection(DataConfig(selection=PromptSelection.HISTORY, keep_base=0.5, min_keep_probability=0.05),
                                 [problem("always_failed", prior_streak=50)])
    rng = random.Random(0)
    selection.count_skips(3)
    kept = [selection.keeps(problem("always_failed"), rng, 3) for _ in range(2000)]
    skipped = kept.count(False)
    assert 0 < kept.count(True) and skipped == selection.take_skipped(3)
    assert skipped / len(kept) == pytest.approx(0.95, abs=0.02)  # the floor: kept 5 % of the time, never never
    assert selection.take_skipped(3) is None  # read once; an unknown draw is absent, never 0


def test_a_problem_with_no_streak_is_kept_without_drawing_so_the_random_stream_is_the_uniform_runs():
    selection = HistorySelection(HISTORY, [problem("fresh")])
    rng = random.Random(0)
    before = rng.getstate()
    assert selection.keeps(problem("fresh"), rng, 1)
    assert rng.getstate() == before


def test_the_state_comes_back_from_its_checkpoint_form_exactly():
    selection = HistorySelection(HISTORY, [problem("a", prior_streak=1), problem("b")])
    selection.record_groups(["a", "b"], torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    selection.skipped_by_step = {7: 2, 8: 0}
    restored = HistorySelection(HISTORY, [problem("a"), problem("b", prior_streak=9)])
    restored.load_state_dict(selection.state_dict())
    assert (restored.streaks, restored.skipped_by_step) == ({"a": 2, "b": 0}, {7: 2, 8: 0})


@pytest.mark.parametrize(("field", "value"), [("keep_base", 1.0), ("keep_base", 0.0), ("min_keep_probability", 0.0)])
def test_a_rule_that_could_skip_a_problem_for_good_or_never_shrink_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        RunConfig.from_preset("cpu-smoke", {"data": {"selection": "history", field: value}})
