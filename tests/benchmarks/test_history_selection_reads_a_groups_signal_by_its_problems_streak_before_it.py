"""The history-selection benchmark's reading of GRESO's premise (benchmarks/history_selection.py): from a run's
events, each problem's first-attempt groups in step order, and the share of groups with signal by the streak of
groups without signal their problem had before them, on hand-made events."""

import pytest

from benchmarks.history_selection import first_attempt_groups, signal_by_streak


def rollout(step, problem_id, reward, *, turn="first", is_evaluation=False, is_censored=False):
    return {"type": "rollout_finished", "payload": {
        "step": step, "problem_id": problem_id, "reward": None if is_censored else reward, "turn": turn,
        "is_evaluation": is_evaluation, "is_censored": is_censored}}


def test_groups_are_first_attempts_of_training_steps_in_step_order_with_the_learners_signal():
    events = [
        {"type": "step_started", "payload": {"step": 2}},
        rollout(2, "a", 1.0), rollout(2, "a", 1.0),  # all pass: no signal
        rollout(1, "a", 1.0), rollout(1, "a", 0.0),  # step 1, written later: still first in order
        rollout(1, "b", 0.0), rollout(1, "b", 0.0, is_censored=True),  # a lone failure teaches nothing
        rollout(2, "b", 1.0), rollout(2, "b", 0.0, is_censored=True),  # a lone pass keeps its reward: signal
        rollout(2, "b", 1.0, turn="retry"), rollout(2, "b", 0.0, turn="retry"),  # a retry is its own prompt's
        rollout(3, "b", 1.0, is_evaluation=True), rollout(3, "b", 0.0, is_evaluation=True),
        rollout(3, "c", 0.0, is_censored=True), rollout(3, "c", 1.0, is_censored=True),  # no evidence either way
    ]
    assert first_attempt_groups(events) == {"a": [True, False], "b": [False, True]}


def test_each_group_is_counted_under_the_streak_its_problem_had_before_it():
    seed_0 = {"a": [False, False, False, True, False], "b": [True, True]}
    seed_1 = {"a": [True]}
    by_streak = signal_by_streak([seed_0, seed_1])["by_streak"]
    assert by_streak["first visit"] == {"groups": 3, "with_signal": 2, "share": pytest.approx(2 / 3)}
    assert by_streak["0"] == {"groups": 2, "with_signal": 1, "share": 0.5}  # b's second; a's fifth
    assert by_streak["1"] == {"groups": 1, "with_signal": 0, "share": 0.0}  # a's second
    assert by_streak["2 or more"] == {"groups": 2, "with_signal": 1, "share": 0.5}  # a's third and fourth


def test_groups_per_problem_counts_each_runs_problems_apart():
    assert signal_by_streak([{"a": [True, False, False], "b": [True]}, {"a": [False]}])["groups_per_problem"] == \
        pytest.approx(5 / 3)


def test_no_group_measures_nothing_rather_than_zero():
    result = signal_by_streak([{"a": [True]}])
    assert result["by_streak"]["1"] == {"groups": 0, "with_signal": 0, "share": None}
    assert signal_by_streak([])["groups_per_problem"] is None
