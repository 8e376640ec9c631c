"""`open scoped …` opens a namespace's scoped notations and instances: ordinary Lean 4 (every ProofNet row and 11
PutnamBench problems use it), accepted in the preamble as `open` is, and refused where `open` would be."""

import pytest

from promptsets.validation import StatementRejected, validate_lean_statement


@pytest.mark.parametrize("line", ["open scoped Real", "open scoped BigOperators Topology"])
def test_open_scoped_in_the_preamble_is_accepted_and_kept_in_the_header(line):
    statement = validate_lean_statement(f"import Mathlib\n\nopen Filter\n{line}\n\ntheorem t : (1 : ℝ) < 2 := by")
    assert statement.header == f"import Mathlib\n\nopen Filter\n{line}"
    assert statement.formal_statement == "theorem t : (1 : ℝ) < 2 := by"


def test_open_scoped_that_names_nothing_is_refused_with_an_example():
    with pytest.raises(StatementRejected, match=r"'open' at line 1, column 1 names nothing, e\.g\. 'open Real'"):
        validate_lean_statement("open scoped\ntheorem t : True := by")


def test_open_scoped_in_a_single_term_is_refused_in_the_preamble_as_open_in_is():
    with pytest.raises(StatementRejected, match=r"'open … in' at line 1, column 1 is not allowed in the preamble"):
        validate_lean_statement("open scoped Real in\ntheorem t : True := by")


def test_scoped_as_a_command_of_its_own_is_still_refused():
    with pytest.raises(StatementRejected, match=r"'scoped' at line 2, column 1 is not allowed before the statement"):
        validate_lean_statement("open Real\nscoped notation \"π\" => Real.pi\ntheorem t : True := by")
