"""Lean's feedback for the error-correction turn: messages and numbered snippets of the checked code."""

from __future__ import annotations

from trainer.config import RetryConfig
from trainer.recipe.retry import build_lean_feedback
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
    # The release's window is two lines either side, cut where the code ends.
    assert feedback == (
        "# Error 1:\n"
        "Error message: \n"
        "linarith failed to find a contradiction\n"
        "\n"
        "Lean 4 code snippet with error:\n"
        "```lean4\n"
        "009  |     (h₁ : 0 ≤ b) : 0 ≤ a ^ 2 + b ^ 2 := by\n"
        "010  |   nlinarith [sq_nonneg (a - b), h₀]\n"
        "011 >|   linarith\n"
        "```\n"
    )


def test_errors_follow_each_other_without_a_blank_line_as_the_release_joins_them(problem, recipe_retry):
    checked_code = problem.lean_prefix + BODY
    feedback = build_lean_feedback(checked_code, [error("first", 10), error("second", None)], recipe_retry)
    assert "011  |   linarith\n```\n# Error 2:\nError message: \nsecond\n\n" in feedback
    assert feedback.endswith("second\n\n")


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
    assert feedback == "# Error 1:\nError message: \n(kernel) deep recursion detected\n\n"


def test_an_error_past_the_last_line_shows_the_last_lines_unmarked_as_the_release_does(problem, recipe_retry):
    feedback = build_lean_feedback(problem.lean_prefix + BODY, [error("unexpected end of input", 12, 0)], recipe_retry)
    assert "```lean4\n010  |   nlinarith [sq_nonneg (a - b), h₀]\n011  |   linarith\n```\n" in feedback


def test_an_error_on_the_first_line_shows_it_and_the_two_lines_after_it(recipe_retry):
    code = "import Mathlb\nimport Aesop\n\ntheorem t : True := by\n  trivial\n  done"
    feedback = build_lean_feedback(code, [error("unknown module", 1, 0)], recipe_retry)
    assert "```lean4\n001 >| import Mathlb\n002  | import Aesop\n003  | \n```\n" in feedback


def test_the_snippet_never_shows_the_axioms_query_we_append(problem, recipe_retry):
    checked_code = build_checked_code(problem, BODY)
    last_body_line = checked_code.body_line + 1
    assert checked_code.split("\n")[checked_code.axioms_line - 1].startswith("#print axioms")
    at_the_end = build_lean_feedback(str(checked_code), [error("linarith failed", last_body_line)], recipe_retry)
    # A parse error that Lean places on the next command, the axioms query, marks nothing we never wrote.
    after_the_end = build_lean_feedback(str(checked_code), [error("unexpected token", checked_code.axioms_line, 0)], recipe_retry)
    for feedback in (at_the_end, after_the_end):
        assert "#print axioms" not in feedback
        assert feedback.split("```lean4\n")[1].split("```")[0].rstrip("\n").endswith("|   linarith")
    assert f"{last_body_line:03d} >|   linarith" in at_the_end


def test_a_timeout_without_error_messages_becomes_the_releases_system_error(problem, recipe_retry):
    feedback = build_lean_feedback(
        problem.lean_prefix + BODY, [], recipe_retry, system_error=" Lean REPL command timed out in 60.0 seconds\n"
    )
    assert feedback == "# System Error:\nError message: \nLean REPL command timed out in 60.0 seconds\n\n"


def test_without_errors_the_feedback_is_empty(problem, recipe_retry):
    assert build_lean_feedback(problem.lean_prefix + BODY, [LeanMessage("warning", "declaration uses 'sorry'", 10, 2)], recipe_retry) == ""


def test_the_marker_follows_the_verifiers_checked_code_layout(problem, recipe_retry):
    checked_code = build_checked_code(problem, BODY)
    error_line = checked_code.body_line + 1  # the `linarith` line, wherever the layout puts it
    feedback = build_lean_feedback(str(checked_code), [error("linarith failed", error_line)], recipe_retry)
    marked = [row for row in feedback.split("\n") if row[:5].rstrip().endswith(">")]
    assert marked == [f"{error_line:03d} >| " + checked_code.split("\n")[error_line - 1]]
    assert marked[0].endswith("linarith")
