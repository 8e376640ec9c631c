"""The history-selection benchmark's reading of GRESO's premise (benchmarks/history_selection.py): from a run's
events, each problem's first-attempt groups in step order, the share of groups with signal by the streak of
groups without signal their problem had before them, and the history an earlier run leaves each problem (what
``--earlier-run-seed`` writes into the next runs' promptset), on hand-made events."""

import pytest

from benchmarks.history_selection import first_attempt_groups, prior_history, signal_by_streak
from trainer.recipe.problems import load_problems_jsonl
from trainer.sft.smoke_model import write_smoke_promptset


def rollout(step, problem_id, reward, *, turn="first", is_evaluation=False, is_censored=False):
    return {"type": "rollout_finished", "payload": {
        "step": step, "problem_id": problem_id, "reward": None if is_censored else reward, "turn": turn,
        "is_evaluation": is_evaluation, "is_censored": is_censored,
        "verdict": None if is_censored else ("valid" if reward == 1.0 else "lean_error")}}


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


def test_an_earlier_run_leaves_each_problem_its_scored_attempts_solves_and_streak_at_the_end():
    events = [
        rollout(1, "a", 1.0), rollout(1, "a", 0.0),  # signal
        rollout(2, "a", 1.0), rollout(2, "a", 1.0),  # then two groups without
        rollout(3, "a", 0.0), rollout(3, "a", 0.0, is_censored=True),
        rollout(3, "a", 1.0, turn="retry"), rollout(4, "a", 1.0, is_evaluation=True),  # neither counts
        rollout(1, "b", 0.0), rollout(1, "b", 0.0),
        rollout(2, "b", 0.0), rollout(2, "b", 1.0),  # its last group had signal
        rollout(1, "c", 1.0, is_censored=True), rollout(1, "c", 0.0, is_censored=True),  # no evidence
    ]
    assert prior_history(events) == {
        "a": {"prior_attempts": 5, "prior_solves": 3, "prior_signal_less_streak": 2},
        "b": {"prior_attempts": 4, "prior_solves": 1, "prior_signal_less_streak": 0},
    }


def test_the_next_runs_promptset_carries_that_history_and_the_trainer_reads_it(tmp_path):
    promptset = tmp_path / "smoke.jsonl"
    history = {"smoke_false_mul": {"prior_attempts": 8, "prior_solves": 0, "prior_signal_less_streak": 4}}
    write_smoke_promptset(promptset, prior_history=history)
    problems = {problem.problem_id: problem for problem in load_problems_jsonl(promptset)}
    assert problems["smoke_false_mul"].prior_signal_less_streak == 4
    assert problems["smoke_false_mul"].prior_solves == 0
    assert [problem.prior_signal_less_streak for name, problem in problems.items() if name != "smoke_false_mul"] == \
        [None] * (len(problems) - 1)  # no history: the selection starts it at 0


def test_the_demo_promptset_carries_it_too(tmp_path):
    import plot_demo_curve  # scripts/, on the path the benchmark sets

    promptset = tmp_path / "demo.jsonl"
    plot_demo_curve.write_demo_promptset(promptset, {"demo_mul": {"prior_attempts": 11, "prior_solves": 11,
                                                                   "prior_signal_less_streak": 3}})
    streaks = {problem.problem_id: problem.prior_signal_less_streak for problem in load_problems_jsonl(promptset)}
    assert streaks.pop("demo_mul") == 3
    assert set(streaks.values()) == {None}
