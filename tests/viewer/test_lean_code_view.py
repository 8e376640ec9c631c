"""Lean code for the viewer: highlighted tokens that add up to the code, messages at the lines Lean meant."""

from hypothesis import given, settings
from hypothesis import strategies as st

from promptsets.lean_view import code_view, highlighted_html, highlighted_lines
from proofs.views import code_diff
from trainer.verification.lean_lexer import comment_mask

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


COMMENT_CLASSES = {"c1", "cm", "sd"}


def drawn_as_comment(code: str) -> list[bool]:
    """For each character of ``code`` (newlines aside), whether the viewer draws it as a comment."""
    return [css_class in COMMENT_CLASSES for line in highlighted_lines(code) for css_class, text in line for _ in text]


def test_what_looks_like_a_comment_inside_a_name_or_a_string_is_drawn_as_code():
    code = 'theorem t : True := by\n  exact «odd -- name» "a -- b" /- a /- nested -/ c -/ trivial -- end'
    second = highlighted_lines(code)[1]
    assert ["", "  exact «odd -- name» "] in second and ["s2", '"a -- b"'] in second
    assert ["cm", "/- a /- nested -/ c -/"] in second and second[-1] == ["c1", "-- end"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["theorem", " t", ":", "--", "/-", "-/", "/--", '"', "«", "»", "'a'", "\n", " x ", "r#\"", "\"#"]),
                max_size=25).map("".join))
def test_the_viewer_draws_as_comments_exactly_what_the_lean_lexer_reads_as_comments(code):
    mask = comment_mask(code, strict=False)
    assert drawn_as_comment(code) == [is_comment for character, is_comment in zip(code, mask) if character != "\n"]


def test_statements_become_escaped_html():
    html = highlighted_html('theorem t : "<b>" = "<b>" := by')
    assert html.startswith('<span class="kn">theorem</span> t <span class="o">:</span>')
    assert "&lt;b&gt;" in html and "<b>" not in html
