"""What a row's Lean statement must be before it may enter a promptset."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptsets import validation
from promptsets.validation import StatementRejected, informal_from_doc_comment, validate_lean_statement

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"


def rejection(text: str, **options) -> str:
    with pytest.raises(StatementRejected) as caught:
        validate_lean_statement(text, **options)
    return str(caught.value)


def test_it_accepts_a_theorem_ending_in_by_and_splits_off_the_header():
    statement = validate_lean_statement(f"{HEADER}\n\ntheorem two_add_two : 2 + 2 = 4 := by\n")
    assert statement.header == HEADER
    assert statement.formal_statement == "theorem two_add_two : 2 + 2 = 4 := by"
    assert (statement.declaration_kind, statement.theorem_name) == ("theorem", "two_add_two")


@pytest.mark.parametrize("text", ["lemma small (x : ℕ) (h : x < 2) : x ≤ 1 := by", "example : (2 : ℚ) / 4 = 1 / 2 := by"])
def test_it_accepts_lemmas_and_examples(text):
    assert validate_lean_statement(text).formal_statement == text


@pytest.mark.parametrize("ending", [" := by sorry", " := by\n  sorry", " := by\n  sorry -- to do", " := by -- nothing yet"])
def test_it_drops_a_trailing_sorry_and_comments_after_by(ending):
    statement = validate_lean_statement("theorem t : 1 + 1 = 2" + ending)
    assert statement.formal_statement == "theorem t : 1 + 1 = 2 := by"


def test_it_keeps_the_doc_comment_above_the_theorem_with_the_statement():
    statement = validate_lean_statement(f"{HEADER}\n/-- Two and two make four. -/\ntheorem t : 2 + 2 = 4 := by")
    assert statement.formal_statement.startswith("/-- Two and two make four. -/\ntheorem t")
    assert statement.header == HEADER


def test_it_reads_a_separate_header_column_as_the_preamble():
    statement = validate_lean_statement("theorem t : 2 + 2 = 4 := by", header=HEADER + "\n\n")
    assert statement.header == HEADER


def test_it_rejects_a_row_that_carries_a_proof():
    assert "a proof follows ':= by'" in rejection("theorem t : 1 + 1 = 2 := by\n  norm_num")


def test_it_rejects_a_term_mode_sorry_and_says_to_end_in_by():
    assert "':= sorry'" in rejection("theorem t : 1 + 1 = 2 := sorry")


def test_it_rejects_a_statement_without_assignment():
    assert "does not end in ':= by'" in rejection("theorem t : 1 + 1 = 2")


def test_it_rejects_a_sorry_inside_the_statement():
    assert "inside the statement" in rejection("theorem t (h : sorry) : 1 = 1 := by")


@pytest.mark.parametrize("command", ["#eval IO.println \"hi\"", "run_cmd pure ()", "macro \"x\" : term => `(1)",
                                     "elab \"x\" : term => pure default", "#exit"])
def test_it_rejects_commands_that_run_code_before_the_statement(command):
    assert "runs code" in rejection(f"{HEADER}\n{command}\ntheorem t : True := by")


def test_it_rejects_code_running_terms_inside_the_statement():
    assert "runs code" in rejection("theorem t : (by run_tac pure () ; exact 1) = 1 := by")
    assert "runs code" in rejection("theorem t : (2 : ℕ) = 2 ∧ (by native_decide : 1 = 1) := by")


def test_it_rejects_an_option_that_weakens_the_kernel_check():
    assert "debug.skipKernelTC" in rejection("set_option debug.skipKernelTC true\ntheorem t : True := by")


def test_it_accepts_harmless_options_including_unlimited_heartbeats():
    statement = validate_lean_statement("set_option maxHeartbeats 0\nset_option linter.unusedVariables false\ntheorem t : True := by")
    assert "maxHeartbeats 0" in statement.header


def test_it_accepts_check_binder_annotations_off_which_only_relaxes_how_binders_are_written():
    statement = validate_lean_statement("set_option checkBinderAnnotations false\ntheorem t [h : 1 = 1] : True := by")
    assert statement.header == "set_option checkBinderAnnotations false"


def test_it_rejects_attributes_which_can_run_code():
    assert "attribute" in rejection("@[simp] theorem t : True := by")


def test_it_rejects_two_declarations_in_one_row():
    assert "second command" in rejection("theorem a : True := by\ntheorem b : True := by")


def test_it_rejects_imports_after_other_commands():
    assert "move it up" in rejection("open Nat\nimport Mathlib\ntheorem t : True := by")


def test_it_rejects_an_unclosed_block_comment_that_would_swallow_the_proof():
    assert "never closed" in rejection("theorem t : True := by /- sorry")


def test_it_counts_nested_block_comments_as_lean_does():
    assert "never closed" in rejection("/- outer /- inner -/ still outer\ntheorem t : True := by")
    assert validate_lean_statement("/- outer /- inner -/ -/\ntheorem t : True := by").theorem_name == "t"


def test_it_rejects_a_stray_comment_closer():
    assert "never opened" in rejection("theorem t : True := by -/")


def test_it_ignores_a_theorem_hidden_in_a_comment():
    assert "no theorem, lemma or example" in rejection("-- theorem t : True := by\n/- theorem u : True := by -/")


def test_it_is_not_fooled_by_comment_markers_inside_strings():
    statement = validate_lean_statement('theorem t : "/-" ++ "-/" = "/--/" := by')
    assert statement.theorem_name == "t"


def test_it_rejects_an_unclosed_string():
    assert "string opened" in rejection('theorem t : "abc = "abc" := by')


def test_it_rejects_unbalanced_brackets_of_a_truncated_statement():
    assert "never closed" in rejection("theorem t (x : ℕ : x = x := by")
    assert "closes nothing" in rejection("theorem t (x : ℕ)) : x = x := by")


def test_it_rejects_statements_over_the_size_limit_and_names_the_limit():
    reason = rejection("theorem t : " + " + ".join(["1"] * 5000) + " = 5000 := by", max_chars=1000)
    assert "the limit is 1,000" in reason


def test_it_rejects_nul_characters_and_empty_statements():
    assert "NUL" in rejection("theorem t : True := by\x00")
    assert "empty" in rejection("   ")


def test_it_rejects_text_with_undecodable_bytes():
    assert "not valid UTF-8" in rejection("theorem t : True := by\udcff")


def test_it_tells_where_the_problem_is():
    assert "line 3, column 1" in rejection("import Mathlib\n\n#eval 1\ntheorem t : True := by")


def test_it_accepts_unicode_identifiers_subscripts_and_primes():
    text = "theorem t (x₀ x' : ℝ) (h₀ : x₀ = x') (hα : ∀ α : ℕ, α ≥ 0) : x' = x₀ := by"
    assert validate_lean_statement(text).formal_statement == text


def test_it_rejects_a_theorem_that_states_no_goal():
    assert "states no goal" in rejection("theorem t := by")
    assert "states no goal" in rejection("theorem t (h : 1 = 1) := by")


@pytest.mark.parametrize(("informal", "expected"), [
    ("/-- Show that $2 + 2 = 4$. -/", "Show that $2 + 2 = 4$."),
    ("  /--\n  Nested /- comments -/ stay. -/\n", "Nested /- comments -/ stay."),
    ("Show that 2 + 2 = 4.", "Show that 2 + 2 = 4."),
    ('An unmatched " quote in prose.', 'An unmatched " quote in prose.'),
    ("/-- Not closed, as Lean reads it: /- -/", "/-- Not closed, as Lean reads it: /- -/"),
    ("/-- One -/ /-- two -/", "/-- One -/ /-- two -/"),
])
def test_an_informal_statement_written_as_a_doc_comment_is_its_inside(informal, expected):
    assert informal_from_doc_comment(informal) == expected


# Rows made of a preamble (mostly well formed, so that rows share it) and lines of every kind, good and bad.
PREAMBLE_LINES = st.sampled_from(["import Mathlib", "import Aesop", "open Real", "set_option maxHeartbeats 400000",
                                  "universe u", "-- a note", "/- a block -/", ""])
ROW_LINES = st.sampled_from([
    "import Mathlib", "import Aesop", "open Real", "open BigOperators Real Nat", "set_option maxHeartbeats 400000",
    "set_option maxHeartbeats", "set_option debug.skipKernelTC true", "universe u", "open Real in", "open", "-- a note",
    "/- a block", "-/", "/-- The problem. -/", "/-- doc -/ Nat", "#eval 1", "\"", "«", "@[simp]", "private", "protected",
    "theorem_x", "theorem t (x : ℕ) (h : x = 1) :", "  x + 1 = 2 := by", "lemma l : True := by", "example : 1 = 1 := by",
    "theorem", "  sorry", "def f := 1", "", "(", "⟩", "open scoped Real", "noncomputable def g : ℝ := 2",
    "noncomputable section", "inductive T | a", "def", "  | 0 => 1",
])


def reading(function, text: str):
    try:
        return function(text)
    except StatementRejected as error:
        return str(error)


@settings(max_examples=800, deadline=None)
@given(st.lists(PREAMBLE_LINES, max_size=5), st.lists(ROW_LINES, min_size=1, max_size=5))
def test_a_preamble_read_once_for_many_rows_gives_each_row_the_whole_texts_reading(preamble, lines):
    text = "\n".join(preamble + lines)
    whole = reading(validation._read_whole, text)
    assert reading(validation._tokens_and_declaration_start, text) == whole  # the preamble maybe new
    assert reading(validation._tokens_and_declaration_start, text) == whole  # the preamble remembered


def test_rows_that_repeat_a_preamble_keep_their_own_doc_comments_and_names():
    first = validate_lean_statement(f"{HEADER}\n\n/-- One. -/\ntheorem one : 1 = 1 := by\n")
    second = validate_lean_statement(f"{HEADER}\n\ntheorem two (x : ℕ) : x = x := by sorry")
    assert (first.header, first.formal_statement, first.theorem_name) == (
        HEADER, "/-- One. -/\ntheorem one : 1 = 1 := by", "one")
    assert (second.header, second.formal_statement, second.theorem_name) == (
        HEADER, "theorem two (x : ℕ) : x = x := by", "two")
    assert "'sorry' at line 7, column 2" in rejection(f"{HEADER}\n\ntheorem three : 1 = 1 ∧\n sorry := by")
