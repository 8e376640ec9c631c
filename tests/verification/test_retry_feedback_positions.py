"""The Lean feedback of a retry prompt marks the line Lean complained about, after a multi-line header."""

from trainer.config import RetryConfig
from trainer.recipe.retry import build_lean_feedback
from trainer.verification.verdicts import Verdict

MULTI_LINE_STATEMENT = (
    "/-- Two and two make four, written over several lines. -/\n"
    "theorem two_plus_two :\n"
    "    (2 : ℕ) + 2\n"
    "      = 4 := by"
)


def marked_line(feedback: str) -> str:
    [line] = [row for row in feedback.splitlines() if ">|" in row]
    return line


def test_the_marker_sits_on_the_failing_tactic_after_a_multi_line_header_and_statement(standin, helpers):
    code = helpers.checked("\n  norm_num\n  -- the goal is closed already\n  decide", statement=MULTI_LINE_STATEMENT)
    [result], _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.LEAN_ERROR
    feedback = build_lean_feedback(str(code), result.errors, RetryConfig())
    number, text = marked_line(feedback).split(">|")
    assert text.strip() == "decide"
    assert int(number) == code.body_line + 2


def test_the_marker_sits_on_the_statement_when_lean_blames_the_by_block(standin, helpers):
    code = helpers.checked("\n  norm_num", statement=MULTI_LINE_STATEMENT.replace("= 4", "= 5"))
    [result], _ = helpers.verify(standin.url, [code])
    feedback = build_lean_feedback(str(code), result.errors, RetryConfig())
    assert marked_line(feedback).split(">|")[1].strip() == "= 5 := by"
