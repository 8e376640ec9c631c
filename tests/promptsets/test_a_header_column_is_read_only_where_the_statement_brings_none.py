"""A separate header column (miniF2F's and ProofNet's DeepSeek layout) is the preamble of a statement that has
none; a statement that begins with its own imports carries its header, and the column is not put in front of it
a second time. Messages count lines of what the person wrote, in the column they wrote it in."""

import pytest

from promptsets.validation import StatementRejected, validate_lean_statement

HEADER = "import Mathlib\n\nopen Complex Filter\nopen scoped BigOperators Topology\n\n"
THEOREM = "/-- The modulus is nonnegative. -/\ntheorem abs_nonneg' (z : ℂ) : 0 ≤ Complex.abs z := by\n"


def test_a_statement_that_begins_with_its_own_imports_is_not_given_the_header_column_again():
    statement = validate_lean_statement(HEADER + THEOREM, header=HEADER)
    assert statement.header == HEADER.strip()
    assert statement.formal_statement == THEOREM.strip()


def test_a_statement_without_imports_is_given_the_header_column():
    statement = validate_lean_statement("open Real\n\n" + THEOREM, header="import Mathlib\n")
    assert statement.header == "import Mathlib\nopen Real"
    assert statement.formal_statement == THEOREM.strip()


def test_a_comment_above_the_statements_imports_does_not_hide_them():
    statement = validate_lean_statement("-- ProofNet, Shakarchi 1.13a\n" + HEADER + THEOREM, header=HEADER)
    assert statement.header.count("import Mathlib") == 1


def test_a_fault_in_the_statement_is_placed_by_the_lines_of_the_statement_not_of_the_joined_text():
    with pytest.raises(StatementRejected) as caught:
        validate_lean_statement("open Real\n\n#eval 1\n" + THEOREM, header=HEADER)
    assert "'#eval' at line 3, column 1 of the formal statement" in str(caught.value)


def test_a_fault_in_the_header_column_is_placed_by_the_lines_of_the_header():
    with pytest.raises(StatementRejected) as caught:
        validate_lean_statement(THEOREM, header="import Mathlib\nset_option debug.skipKernelTC true\n")
    assert "'set_option debug.skipKernelTC' at line 2, column 12 of the header" in str(caught.value)


def test_a_statement_read_alone_names_no_column():
    with pytest.raises(StatementRejected) as caught:
        validate_lean_statement("import Mathlib\n\n#eval 1\n" + THEOREM)
    assert "'#eval' at line 3, column 1 runs code" in str(caught.value)
