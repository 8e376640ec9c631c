"""A statement may need definitions before its theorem (nine PutnamBench problems do): they are accepted, and
they belong to the statement, not the header, so the prompt shows them, the format check requires the answer to
copy them unchanged, and Lean checks the promptset's copy. What could change the environment beyond them, or run
code, stays refused with its reason."""

import pytest

from promptsets.validation import StatementRejected, validate_lean_statement

TETRATION = (
    "def tetration : ℕ → ℕ → ℕ\n"
    "  | _, 0 => 1\n"
    "  | b, (m + 1) => b^(tetration b m)\n"
)
THEOREM = "/-- Prove it. -/\ntheorem putnam_1997_b5 (n : ℕ) (hn : n ≥ 2) : tetration 2 n ≡ tetration 2 (n-1) [MOD n] := by"


def rejection(text: str) -> str:
    with pytest.raises(StatementRejected) as caught:
        validate_lean_statement(text)
    return str(caught.value)


def test_a_definition_before_the_theorem_is_accepted_and_kept_with_the_statement():
    statement = validate_lean_statement(f"import Mathlib\n\n{TETRATION}{THEOREM}\n")
    assert statement.header == "import Mathlib"
    assert statement.formal_statement == TETRATION + THEOREM
    assert (statement.declaration_kind, statement.theorem_name) == ("theorem", "putnam_1997_b5")


@pytest.mark.parametrize("definitions", [
    "noncomputable def dist_to_int : ℝ → ℝ := fun r => |r - round r|\n",
    "def GameString (n : ℕ) := Fin n → Fin 3\n\n"
    "inductive Reaches (n : ℕ) : List (GameString n) → Prop where\n  | start : Reaches n []\n",
    "abbrev Point := ℝ × ℝ\n\nstructure Segment where\n  start : Point\n  stop : Point\n",
], ids=["noncomputable def", "def and inductive", "abbrev and structure"])
def test_each_kind_of_definition_is_accepted(definitions):
    statement = validate_lean_statement(f"import Mathlib\n\nopen Real\n\n{definitions}\ntheorem t : True := by")
    assert statement.header == "import Mathlib\n\nopen Real"
    assert statement.formal_statement == f"{definitions}\ntheorem t : True := by"


def test_a_doc_comment_above_the_first_definition_belongs_to_the_statement():
    statement = validate_lean_statement(f"import Mathlib\n-- the answer: 2\n/-- Tetration. -/\n{TETRATION}{THEOREM}")
    assert statement.header == "import Mathlib\n-- the answer: 2"
    assert statement.formal_statement.startswith("/-- Tetration. -/\ndef tetration")


def test_a_noncomputable_section_before_the_definitions_is_accepted():
    statement = validate_lean_statement(
        "import Mathlib\n\nnoncomputable section\n\ndef g (n : ℕ) : ℝ := Real.sqrt (n + 1) - Real.sqrt n\n\n"
        "theorem t : g 0 = 1 := by")
    assert statement.header == "import Mathlib\n\nnoncomputable section"
    assert statement.formal_statement.startswith("def g (n : ℕ)")


@pytest.mark.parametrize(("text", "reason"), [
    ("instance : Inhabited ℕ := ⟨3⟩\ntheorem t : True := by", "'instance' at line 1, column 1 is not allowed"),
    ("axiom cheat : False\ntheorem t : True := by", "'axiom' at line 1, column 1 is not allowed"),
    ("partial def loop (n : ℕ) : ℕ := loop n\ntheorem t : True := by", "'partial' at line 1, column 1 is not allowed"),
    ("unsafe def f : ℕ := 3\ntheorem t : True := by", "'unsafe' at line 1, column 1 runs code"),
    ("@[implemented_by g] def f : ℕ := 3\ntheorem t : True := by", "an attribute '@[…]' at line 1, column 1"),
    ("private def f : ℕ := 3\ntheorem t : True := by", "unexpected 'def' at line 1, column 9"),
    ("def f : ℕ := by native_decide\ntheorem t : True := by", "'native_decide' at line 1, column 17 runs code"),
    ("def f : ℕ := 3\n#eval f\ntheorem t : True := by", "'#eval' at line 2, column 1 runs code"),
    ("def f : ℕ := sorry\ntheorem t : f = f := by", "'sorry' at line 1, column 14 inside the definition 'f'"),
    ("def := 3\ntheorem t : True := by", "'def' at line 1, column 1 has no name"),
    ("def f : ℕ := 3\nimport Mathlib\ntheorem t : True := by", "'import' at line 2, column 1 comes after another command"),
    ("def f : ℕ := 3\nnoncomputable theorem t : True := by", "'noncomputable' at line 2, column 1 is not allowed"),
    ("def f : ℕ := 3", "no theorem, lemma or example found"),
    ("theorem t : True := by\ndef f : ℕ := 3\ntheorem u : f = 3 := by", "a second command 'def' at line 2, column 1"),
], ids=["instance", "axiom", "partial", "unsafe", "attribute", "private", "native_decide", "#eval between",
        "sorry", "nameless", "import after", "noncomputable theorem", "no theorem", "after the theorem"])
def test_what_could_change_the_environment_or_run_code_stays_refused_with_its_place(text, reason):
    assert reason in rejection(text)
