"""The platform's export may give each problem its history in earlier runs: prior_attempts, prior_solves and
prior_signal_less_streak, each a nullable non-negative integer (issue 47's export contract). The trainer's reader
takes them; absent or null means no history, and anything else is refused saying which row, which field and what
it was."""

from __future__ import annotations

import json

import pytest

from tests.recipe.answers import STATEMENT
from trainer.recipe.problems import load_problems_jsonl


def load(tmp_path, **fields):
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps({"problem_id": "p1", "formal_statement": STATEMENT, **fields}) + "\n")
    return load_problems_jsonl(path)


def test_a_row_with_history_gives_its_problem_the_three_prior_counts(tmp_path):
    [problem] = load(tmp_path, prior_attempts=24, prior_solves=0, prior_signal_less_streak=3)
    assert (problem.prior_attempts, problem.prior_solves, problem.prior_signal_less_streak) == (24, 0, 3)


@pytest.mark.parametrize("fields", [{}, {"prior_attempts": None, "prior_solves": None, "prior_signal_less_streak": None}])
def test_a_row_without_history_or_with_nulls_has_none(tmp_path, fields):
    [problem] = load(tmp_path, **fields)
    assert (problem.prior_attempts, problem.prior_solves, problem.prior_signal_less_streak) == (None, None, None)


@pytest.mark.parametrize("value", [-1, 2.5, "3", True])
def test_a_prior_count_that_is_no_non_negative_integer_is_refused_naming_the_line_field_and_value(tmp_path, value):
    with pytest.raises(ValueError, match=rf"line 1: problem 'p1': prior_signal_less_streak must be a non-negative "
                                         rf"integer or null \(no history\), got {value!r}"):
        load(tmp_path, prior_signal_less_streak=value)
