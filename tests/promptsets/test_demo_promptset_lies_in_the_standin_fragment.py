"""The demo statements are valid rows, and the stand-in Lean server decides each one as its data says."""

import pytest

from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS
from promptsets.validation import validate_lean_statement
from trainer.verification.standin import decide_snippet


def errors_of(code: str) -> list[str]:
    return [m["data"] for m in decide_snippet(code).get("messages", []) if m.get("severity") == "error"]


def test_there_are_about_two_dozen_demo_problems_with_unique_keys_and_informal_text():
    assert 20 <= len(DEMO_PROBLEMS) <= 30
    assert len({p.key for p in DEMO_PROBLEMS}) == len(DEMO_PROBLEMS)
    assert all(p.informal_statement for p in DEMO_PROBLEMS)
    assert sum(not p.is_true for p in DEMO_PROBLEMS) >= 2
    assert {p.closing_tactic for p in DEMO_PROBLEMS if p.is_true} == {"decide", "norm_num"}


@pytest.mark.parametrize("problem", DEMO_PROBLEMS, ids=lambda p: p.key)
def test_each_demo_statement_passes_validation_with_the_demo_header(problem):
    statement = validate_lean_statement(problem.formal_statement, header=DEMO_HEADER)
    assert statement.formal_statement == problem.formal_statement


@pytest.mark.parametrize("problem", DEMO_PROBLEMS, ids=lambda p: p.key)
def test_the_standin_accepts_true_statements_with_their_tactic_and_refuses_false_ones(problem):
    tactic = problem.closing_tactic or "norm_num"
    errors = errors_of(f"{DEMO_HEADER}\n\n{problem.formal_statement}\n  {tactic}")
    assert (errors == []) is problem.is_true, errors
