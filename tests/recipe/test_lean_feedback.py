"""Lean's feedback for the error-correction turn: messages and numbered snippets of the checked code."""

from __future__ import annotations

from trainer.config import RetryConfig
from trainer.retry import build_lean_feedback
from trainer.verification.checked_code import build_checked_code
from trainer.verification.verdicts import LeanMessage

BODY = "\n  nlinarith [sq_nonneg (a - b), h₀]\n  linarith"


def error(text: str, line: int | None, column: int | None = 2) -> LeanMessage:
    return LeanMessage(severity="error", text=text, line=line, column=column)


def test_the_marker_sits_on_the_absolute_line_after_a_multi_line_header(problem, recipe_retry):
    checked_code = problem.lean_prefix + BODY
    # The 7-line header puts the statement on lines 8-9 and the two tactics on lines 10-11.
    assert checked_code.split("\n")[10] == "  linarith"
    feedback = build_lean_feedback(checked_code, [error("linarith failed to find a contradiction", 11)], recipe_retry)
    assert feedback == (
        "# Error 1:\n"
        "Error message: \n"
        "linarith failed to find a contradiction\n"
        "\n"
        "Lean 4 code snippet with error:\n"
        "```lean4\n"
        "007  | \n"
        "008  | theorem sum_sq_nonneg (a b : ℝ) (h₀ : 0 ≤ a)\n"
        "009  |     (h₁ : 0 ≤ b) : 0 ≤ a ^ 2 + b ^ 2 := by\n"
        "010  |   nlinarith [sq_nonneg (a - b), h₀]\n"
        "011 >|   linarith\n"
        "```\n"
    )


def test_a_line_with_unicode_symbols_is_quoted_whole_and_centred(problem, recipe_retry):
    checked_code = problem.lean_prefix + BODY
    feedback = build_lean_feedback(checked_code, [error("unknown identifier 'h₁'", 9, column=5)], recipe_retry)
    snippet = feedback.split("```lean4\n")[1].split("\n```")[0].split("\n")
    assert [row[:5] for row in snippet] == ["007  ", "008  ", "009 >", "010  ", "011  "]
    assert snippet[2] == "009 >|     (h₁ : 0 ≤ b) : 0 ≤ a ^ 2 + b ^ 2 := by"


def test_it_quotes_at_most_the_configured_number_of_errors_and_skips_warnings(problem):
    checked_code = problem.lean_prefix + BODY
    messages = [LeanMessage("warning", "unused variable", 10, 2)] + [error(f"problem {n}", 10) for n in range(1, 5)]
    feedback = build_lean_feedback(checked_code, messages, RetryConfig(max_errors=3))
    assert [line for line in feedback.split("\n") if line.startswith("# Error")] == ["# Error 1:", "# Error 2:", "# Error 3:"]
    assert "problem 3" in feedback and "problem 4" not in feedback and "unused variable" not in feedback


def test_the_snippet_length_follows_the_config(problem):
    checked_code = problem.lean_prefix + BODY
    feedback = build_lean_feedback(checked_code, [error("bad", 10)], RetryConfig(snippet_lines=3))
    assert "009  |" in feedback and "010 >|" in feedback and "011  |" in feedback and "008" not in feedback


def test_an_error_without_a_position_is_quoted_without_a_snippet(problem, recipe_retry):
    feedback = build_lean_feedback(problem.lean_prefix + BODY, [error("(kernel) deep recursion detected", None)], recipe_retry)
    assert feedback == "# Error 1:\nError message: \n(kernel) deep recursion detected\n"


def test_an_error_past_the_last_line_marks_the_last_line(problem, recipe_retry):
    feedback = build_lean_feedback(problem.lean_prefix + BODY, [error("unexpected end of input", 12, 0)], recipe_retry)
    assert "011 >|   linarith" in feedback


def test_an_error_on_the_first_line_shows_the_lines_after_it(recipe_retry):
    feedback = build_lean_feedback("import Mathlb\nimport Aesop\n\ntheorem t : True := by\n  trivial\n  done", [error("unknown module", 1, 0)], recipe_retry)
    assert "001 >| import Mathlb\n002  | import Aesop\n003  | \n004  | theorem t : True := by\n005  |   trivial\n```" in feedback


def test_without_errors_the_feedback_is_empty(problem, recipe_retry):
    assert build_lean_feedback(problem.lean_prefix + BODY, [LeanMessage("warning", "declaration uses 'sorry'", 10, 2)], recipe_retry) == ""


def test_the_marker_follows_the_verifiers_checked_code_layout(problem, recipe_retry):
    checked_code = build_checked_code(problem, BODY)
    error_line = checked_code.body_line + 1  # the `linarith` line, wherever the layout puts it
    feedback = build_lean_feedback(str(checked_code), [error("linarith failed", error_line)], recipe_retry)
    marked = [row for row in feedback.split("\n") if row[:5].rstrip().endswith(">")]
    assert marked == [f"{error_line:03d} >| " + checked_code.split("\n")[error_line - 1]]
    assert marked[0].endswith("linarith")
