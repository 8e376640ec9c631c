"""What is sent to Lean: our header, the canonical statement, the model's body, an axioms query."""

import pytest

from trainer.recipe.problems import Problem
from trainer.verification.checked_code import build_checked_code, leading_import_line_count
from trainer.verification.line_numbering import LineNumbering


def test_it_checks_the_canonical_statement_followed_by_the_proof_body_and_an_axioms_query(helpers):
    code = build_checked_code(helpers.problem(), "\n  norm_num")
    lines = code.split("\n")
    assert lines[code.statement_line - 1] == "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"
    assert lines[code.body_line - 1] == "  norm_num"
    assert lines[code.axioms_line - 1] == "#print axioms two_plus_two"
    assert code.theorem_name == "two_plus_two"


def test_every_snippet_starts_with_identical_import_lines_whatever_the_problems_header_spacing():
    tidy = Problem("a", "theorem a : (1 : ℕ) = 1 := by", header="import Mathlib\nimport Aesop\n\nopen Nat\n")
    messy = Problem("b", "theorem b : (1 : ℕ) = 1 := by", header="  import Mathlib \n\nimport Aesop\nimport Mathlib\nopen Nat\n")
    first, second = build_checked_code(tidy, " rfl"), build_checked_code(messy, " rfl")
    assert first.split("\n")[:2] == second.split("\n")[:2] == ["import Mathlib", "import Aesop"]
    assert first.import_line_count == second.import_line_count == leading_import_line_count(first)


def test_it_maps_lean_lines_counted_after_the_import_header_back_to_the_checked_code(helpers):
    code = build_checked_code(helpers.problem(), "\n  norm_num\n  decide")
    # kimina-lean-server 2.0.0 runs the import lines as the environment; Lean numbers lines after them.
    lean_line_of_decide = code.body_line + 1 - code.import_line_count
    assert code.lean_line_to_code_line(lean_line_of_decide, LineNumbering.AFTER_HEADER) == code.body_line + 1
    assert code.split("\n")[code.body_line] == "  decide"


def test_it_keeps_lean_lines_counted_in_the_code_as_sent(helpers):
    code = build_checked_code(helpers.problem(), "\n  norm_num\n  decide")
    # kimina-lean-server since #56 adds the header back itself.
    assert code.lean_line_to_code_line(code.body_line + 1, LineNumbering.AS_SENT) == code.body_line + 1
    assert code.lean_line_to_code_line(None, LineNumbering.AS_SENT) is None


def test_a_body_written_at_column_zero_is_indented_under_the_statement(helpers):
    code = build_checked_code(helpers.problem(), "\nnorm_num\nsimp")
    assert code.split("\n")[code.body_line - 1 : code.body_line + 1] == ["  norm_num", "  simp"]
    assert code.body_column_shift == 2


def test_an_example_gets_a_theorem_name_so_lean_can_be_asked_its_axioms():
    code = build_checked_code(Problem("e", "example : (1 : ℕ) + 1 = 2 := by"), " norm_num")
    assert "theorem checked_statement : (1 : ℕ) + 1 = 2 := by" in code
    assert code.rstrip().endswith("#print axioms checked_statement")


def test_it_refuses_a_statement_that_declares_no_theorem():
    class Bare:
        header = ""
        formal_statement = "def f : ℕ := 1"

    with pytest.raises(ValueError, match="declares no theorem"):
        build_checked_code(Bare(), "")


def test_a_line_of_a_doc_comment_or_definition_above_the_theorem_is_not_taken_for_the_declaration():
    statement = (
        "/-- Tetration, for instance\nexample: tetration 2 2 = 4. -/\n"
        "def tetration : ℕ → ℕ → ℕ\n  | _, 0 => 1\n  | b, (m + 1) => b^(tetration b m)\n\n"
        "/-- The theorem\ntheorem: it holds. -/\ntheorem putnam_1997_b5 (n : ℕ) (hn : n ≥ 2) : tetration 2 n ≥ 1 := by"
    )
    code = build_checked_code(Problem("putnam_1997_b5", statement, header="import Mathlib\n"), "\n  simp")
    assert code.theorem_name == "putnam_1997_b5"
    assert statement in code  # the definitions and doc comments as the promptset states them, nothing renamed
    assert code.rstrip().endswith("#print axioms putnam_1997_b5")
