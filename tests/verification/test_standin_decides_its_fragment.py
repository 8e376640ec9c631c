"""The stand-in decides closed arithmetic honestly and refuses everything else."""

import pytest

from trainer.verification.standin import STANDIN_NOTE, CannotDecide, decide_snippet

HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
# After the stripped import lines (3), the theorem is on Lean's line 5 and the first tactic on line 6.


def snippet(statement: str, body: str) -> str:
    return f"{HEADER}theorem t : {statement} := by\n{body}\n\n#print axioms t\n"


def errors(response):
    return [message for message in response["messages"] if message["severity"] == "error"]


TRUE_STATEMENTS = [
    ("(2 : ℕ) + 3 = 5", "norm_num"),
    ("(6 : ℤ) * 7 = 42", "norm_num"),
    ("(3 : ℚ) / 4 < 1", "norm_num"),
    ("(2 : ℤ) - 5 = -3", "norm_num"),
    ("(1 : ℚ) / 3 + 1 / 6 = 1 / 2", "norm_num"),
    ("7 - 10 = 0", "decide"),
    ("2 ^ 10 = 1024", "rfl"),
    ("(2 < 3 ∧ 4 ≤ 4) ∨ False", "simp"),
    ("(17 : ℤ) % 5 = 2 ∧ ¬ (3 : ℤ) = 4", "omega"),
    ("5 % 3 = 2 → 1 < 2", "decide"),
    ("((2 : ℤ) + 3 = 5) ↔ True", "norm_num"),
    ("(2 + 3) * 4 = 20", "decide"),
    ("2 ^ 100 > 0", "norm_num"),
]


@pytest.mark.parametrize("statement, tactic", TRUE_STATEMENTS)
def test_a_true_statement_closed_by_a_fitting_tactic_has_no_errors(statement, tactic):
    response = decide_snippet(snippet(statement, f"  {tactic}"))
    assert errors(response) == []
    assert response["sorries"] == []
    assert response["messages"][0]["data"] == STANDIN_NOTE


def test_a_false_statement_gets_leans_decide_error_at_the_tactic():
    response = decide_snippet(snippet("7 - 10 = 1", "  decide"))
    [error] = errors(response)
    assert error["pos"] == {"line": 6, "column": 2}
    assert error["endPos"] == {"line": 6, "column": 8}
    assert "proved that the proposition" in error["data"] and "is false" in error["data"]


def test_norm_num_on_a_false_statement_leaves_the_goal_false_at_by():
    response = decide_snippet(snippet("(2 : ℕ) + 2 = 5", "  norm_num"))
    [error] = errors(response)
    assert error["data"] == "unsolved goals\n⊢ False"
    assert error["pos"] == {"line": 5, "column": len("theorem t : (2 : ℕ) + 2 = 5 := ")}


def test_a_tactic_after_the_goal_is_closed_gets_no_goals_at_its_own_line():
    response = decide_snippet(snippet("10 / 3 = 3", "  norm_num\n    \n  decide"))
    [error] = errors(response)
    assert error["data"] == "no goals to be proved"
    assert error["pos"] == {"line": 8, "column": 2}


@pytest.mark.parametrize("statement", ["(1 : ℚ) / 2 + 1 / 3 = 5 / 6", "(3 : ℚ) / 4 < 1 ∧ ¬ (1 : ℚ) / 3 = 1 / 4",
                                       "(1 : ℚ) / 2 + 1 / 2 = 2"])
def test_omega_over_the_rationals_finds_no_facts_and_fails_true_or_false(statement):
    response = decide_snippet(snippet(statement, "  omega"))
    [error] = errors(response)
    assert error["data"].startswith("omega could not prove the goal")
    assert error["pos"] == {"line": 6, "column": 2}


def test_sorry_gives_the_warning_and_the_sorries_entry_lean_gives():
    response = decide_snippet(snippet("2 + 2 = 4", "  sorry"))
    assert errors(response) == []
    assert response["sorries"][0]["pos"] == {"line": 6, "column": 2}
    assert any(m["severity"] == "warning" and m["data"] == "declaration uses 'sorry'" for m in response["messages"])


def test_the_axioms_query_is_answered_on_its_own_line():
    response = decide_snippet(snippet("2 + 2 = 4", "  decide"))
    report = response["messages"][-1]
    assert report["data"] == "'t' does not depend on any axioms"
    assert report["pos"]["line"] == 8


OUTSIDE_THE_FRAGMENT = [
    ("(2 : ℝ) = 2", "norm_num"),  # reals
    ("x = 2", "norm_num"),  # a variable
    ("-2 ^ 2 = (-4 : ℤ)", "norm_num"),  # notation levels not pinned down
    ("2 + 2 = 4", "linarith"),  # an unknown tactic
    ("2 + 2 = 4", "norm_num [foo]"),  # tactic arguments
    ("(2 : ℕ) + (3 : ℤ) = 5", "norm_num"),  # coercions
    ("(1 : ℚ) / 2 < 1", "decide"),  # decide on ℚ may not reduce
    ("(1 : ℤ) + 1 = 2", "simp"),  # simp outside ℕ
    ("2 ^ 3 = 8", "omega"),  # omega and powers
    ("1 / 0 = 0", "norm_num"),  # division by zero
    ("(7 : ℤ) / -2 = -3", "norm_num"),  # negative divisors
    ("2 ≤ 3", "rfl"),  # rfl on an inequality
    ("2 + 2 = 4", "exact rfl"),
    ("2 ^ 100 > 0", "decide"),  # Lean's evaluator refuses large powers
    ("2 < 3 ∨ False", "omega"),  # omega and propositional constants
    ("(1 : ℚ) / 2 < 1 ∨ True", "omega"),  # omega over ℚ, but with a constant it may use
]


@pytest.mark.parametrize("statement, tactic", OUTSIDE_THE_FRAGMENT)
def test_anything_outside_the_fragment_cannot_be_decided(statement, tactic):
    with pytest.raises(CannotDecide):
        decide_snippet(snippet(statement, f"  {tactic}"))


def test_theorems_with_hypotheses_and_unknown_imports_cannot_be_decided():
    with pytest.raises(CannotDecide):
        decide_snippet(HEADER + "theorem t (n : ℕ) (h : n = 2) : n + 1 = 3 := by\n  omega\n")
    with pytest.raises(CannotDecide):
        decide_snippet("import Mathlib.Tactic.Ring\n\ntheorem t : 2 + 2 = 4 := by\n  norm_num\n")
