"""Lean code for the viewer: highlighted tokens that add up to the code, messages at the lines Lean meant."""

from proofs.lean_view import code_view, highlighted_lines
from proofs.views import code_diff

CODE = "theorem t (x : 𝔽) : x ≤ x₀ := by\n  -- a comment\n  exact le_refl _\n"


def test_the_tokens_of_each_line_add_up_to_the_line():
    lines = highlighted_lines(CODE)
    assert ["".join(text for _, text in line) for line in lines] == CODE.splitlines()


def test_keywords_and_comments_get_their_own_classes():
    first, second, _ = highlighted_lines(CODE)
    assert ["kn", "theorem"] in first
    assert second[-1] == ["c1", "-- a comment"]


def test_messages_stay_on_the_lines_of_the_checked_code_they_were_stored_with():
    checked = "import Mathlib\nimport Aesop\n\ntheorem t : True := by\n  simp\n\n#print axioms t\n"
    view = code_view(checked, [{"severity": "error", "line": 5, "column": 2, "end_line": 5, "end_column": 6, "text": "no"}])
    message = view["messages"][0]
    assert (message["line"], message["column"], message["end_line"]) == (5, 2, 5)
    assert "".join(t for _, t in view["lines"][message["line"] - 1]) == "  simp"


def test_a_rollout_never_sent_to_lean_shows_its_own_code_block():
    view = code_view("", [], fallback_code="theorem t : True := by\n  trivial")
    assert view["is_checked_code"] is False
    assert len(view["lines"]) == 2


def test_the_retry_diff_marks_removed_and_added_lines():
    first = "theorem t : 1 = 1 := by\n  simp\n  done"
    retry = "theorem t : 1 = 1 := by\n  rfl\n  done"
    assert code_diff(first, retry) == [(" ", "theorem t : 1 = 1 := by"), ("-", "  simp"), ("+", "  rfl"), (" ", "  done")]
