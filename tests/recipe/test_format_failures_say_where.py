"""Each format verdict marks the lines of the answer where the check failed, for the viewer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.config import RewardConfig
from trainer.recipe.format_reward import FormatError, check_format, merge_lines
from trainer.recipe.problems import Problem

from tests.recipe.answers import STATEMENT, VALID_LEAN_CODE, VALID_REASONING, make_answer

RELEASE = RewardConfig()
REPEATED = "Let me reconsider the whole inequality carefully, expanding both squares and bounding every cross term."


def line_number(answer: str, needle: str) -> int:
    return answer[:answer.index(needle)].count("\n") + 1


def test_consecutive_lines_merge_into_ranges():
    assert merge_lines([7, 3, 4, 5, 9, 4]) == ((3, 5), (7, 7), (9, 9))


def test_a_closing_fence_at_the_end_of_a_code_line_is_marked(problem):
    answer = make_answer().replace("positivity\n```", "positivity```")
    check = check_format(answer, problem, RELEASE)
    assert check.error is FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT
    fence_line = answer.count("\n") + 1  # the last line: "  positivity```"
    assert (fence_line, fence_line) in check.failure_lines
    assert (line_number(answer, "```lean4"),) * 2 in check.failure_lines
    assert "'  positivity```'" in check.detail


def test_every_copy_of_a_repeated_line_is_marked(problem):
    reasoning = VALID_REASONING + (REPEATED + "\n") * 3 + "A break.\n" + (REPEATED + "\n") * 3
    answer = make_answer(reasoning=reasoning)
    check = check_format(answer, problem, RELEASE)
    assert check.error is FormatError.GENERATION_REPEATS
    first = line_number(answer, REPEATED)
    assert check.failure_lines == ((first, first + 2), (first + 4, first + 6))
    assert "occurs 6 times" in check.detail


def test_a_missing_statement_marks_where_it_should_be(problem):
    answer = make_answer(lean_code=VALID_LEAN_CODE.replace("h₁ : 0 ≤ b", "h₁ : 0 < b"))
    check = check_format(answer, problem, RewardConfig(min_tactics_lean4_match=None))
    assert check.error is FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    code_start = line_number(answer, "```lean4") + 1
    assert check.failure_lines == ((code_start, code_start + STATEMENT.count("\n")),)
    assert "does not contain the formal statement" in check.detail


def test_text_after_the_lean4_block_is_marked_to_the_end(problem):
    answer = make_answer(after="\nHope this helps!\nBye.")
    check = check_format(answer, problem, RELEASE)
    assert check.error is FormatError.NO_VALID_LEAN4_CODE_BLOCK
    last = answer.count("\n") + 1
    assert check.failure_lines[-1] == (last - 1, last)


def test_the_untried_lines_of_the_final_code_are_marked(problem):
    answer = make_answer(reasoning="\nTry things.\n```tactics\n  simp\n```\nthen\n```tactics\n  norm_num\n```\n")
    check = check_format(answer, problem, RELEASE)
    assert check.error is FormatError.TACTICS_LEAN4_NOT_MATCH
    code_start = line_number(answer, "```lean4") + 1
    assert check.failure_lines == ((code_start, code_start + 2),)


def test_a_valid_answer_marks_nothing(problem):
    check = check_format(make_answer(), problem, RELEASE)
    assert check.is_valid and check.failure_lines == ()


FRAGMENTS = ["<think>", "</think>", "```lean4\n", "```lean4 \n", "```tactics\n", "```\n", "```", "\n", "\r\n", "  ",
             STATEMENT, "\n  positivity", "axiom", "/- c -/", "-- c\n", REPEATED + "\n", "sorry", "text", "\u2028"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_any_answer_gets_a_verdict_whose_marked_lines_lie_inside_it(pieces):
    answer = "".join(pieces)
    problem = Problem(problem_id="p", formal_statement=STATEMENT)
    check = check_format(answer, problem, RELEASE)
    assert check.is_valid == (check.error is None) and check.detail
    last_line = answer.count("\n") + 1
    for first, last in check.failure_lines:
        assert 1 <= first <= last <= last_line
