"""The corners where a re-implementation drifts from the release's FormatReward: each gets the
release's verdict by default, and where we think the release is wrong, a named option gives ours."""

from __future__ import annotations

import pytest

from trainer.config import RewardConfig
from trainer.recipe.format_reward import COMMON_STOPWORDS, FormatError, check_format

from tests.recipe.answers import STATEMENT, VALID_LEAN_CODE, VALID_REASONING, make_answer

RELEASE = RewardConfig()


def verdict(response, problem, **options):
    return check_format(response, problem, RewardConfig(**options)).error


def test_a_lean4_closing_fence_at_the_end_of_a_code_line_fails_the_count(problem):
    answer = make_answer().replace("positivity\n```", "positivity```")
    assert answer.endswith("positivity```")
    assert verdict(answer, problem) is FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT


def test_spaces_after_the_opening_lean4_fence_fail_the_count(problem):
    assert verdict(make_answer().replace("```lean4\n", "```lean4 \n"), problem) is FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT


def test_a_crlf_answer_fails_by_default_and_passes_with_the_crlf_option(problem):
    answer = make_answer().replace("\n", "\r\n")
    check = check_format(answer, problem, RELEASE)
    assert check.error is FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT
    assert "crlf_line_endings_accepted" in check.detail
    assert verdict(answer, problem, crlf_line_endings_accepted=True) is None


def test_a_closing_think_before_the_first_think_is_not_looked_at(problem):
    assert verdict("</think>\n" + make_answer(), problem) is None


def test_an_indented_tactics_closing_fence_still_closes_the_block_for_the_line_reader_only(problem):
    # The regex count (fence at a line start) sees one block; the release counts blocks first.
    indented = VALID_REASONING.replace("  positivity\n```", "  positivity\n  ```")
    assert verdict(make_answer(reasoning=indented), problem) is FormatError.INSUFFICIENT_TACTICS_BLOCKS
    # With three well-formed blocks besides, the line reader accepts the indented fence.
    extra = "```tactics\n  positivity\n```\n"
    assert verdict(make_answer(reasoning=indented + extra + extra), problem) is None


def test_an_inline_tactics_closing_fence_is_counted_before_it_is_found_malformed(problem):
    inline = VALID_REASONING.replace("  positivity\n```", "  positivity```")
    # Counted first (release order): the inline fence leaves too few blocks.
    assert verdict(make_answer(reasoning=inline), problem) is FormatError.INSUFFICIENT_TACTICS_BLOCKS
    # Enough blocks counted: the line reader then finds a ``` inside a block.
    extra = "```tactics\n  positivity\n```\n"
    assert verdict(make_answer(reasoning=inline + extra + extra), problem) is FormatError.TACTIC_BLOCK_FORMATTING_ERROR


@pytest.mark.parametrize("name", ["Classical.axiom_of_choice", "my_local_instance"])
def test_axiom_letters_inside_a_name_fail_by_default_and_pass_with_the_token_option(problem, name):
    code = VALID_LEAN_CODE + f"\n  have := {name}"
    answer = make_answer(lean_code=code)
    options = {"min_tactics_lean4_match": None}
    assert verdict(answer, problem, **options) is FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    assert verdict(answer, problem, axiom_check_by_token=True, **options) is None


def test_an_axiom_declaration_fails_with_the_token_option_too(problem):
    answer = make_answer(lean_code="axiom cheat : False\n" + VALID_LEAN_CODE)
    assert verdict(answer, problem, axiom_check_by_token=True, min_tactics_lean4_match=None) \
        is FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT


def test_repeated_lines_are_judged_against_the_releases_stopwords(problem):
    assert {"the", "hence", "therefore", "we", "three"} <= COMMON_STOPWORDS
    # "would", "about", "what" are not release stopwords: 10 content words, so 6 copies repeat.
    line = "what would happen about squares would tell what about sums would happen"
    assert verdict(make_answer(reasoning=VALID_REASONING + (line + "\n") * 6), problem) is FormatError.GENERATION_REPEATS
    # Nine content words: never a repeat, however often.
    short = "therefore the squares hence sums thus positivity closes every goal nicely now again"
    assert verdict(make_answer(reasoning=VALID_REASONING + (short + "\n") * 9), problem) is None


def test_two_lean4_blocks_are_no_valid_lean4_code_block_as_in_the_release(problem):
    two = make_answer() + "\n```lean4\n" + VALID_LEAN_CODE + "\n```"
    assert verdict(two, problem) is FormatError.NO_VALID_LEAN4_CODE_BLOCK


def test_comments_follow_the_releases_rule_by_default_and_leans_with_the_lexer_option(problem):
    # A nested comment ends at the first -/ for the release, so each "tail … -/" is a line of code
    # that no tactics block tried: 3 of 5 final lines tried, under 70 %. Read as Lean reads it,
    # both lines are comments: 3 of 3.
    nested = STATEMENT + "\n  /- outer /- inner -/ tail one -/\n  /- again /- inner -/ tail two -/\n  positivity"
    answer = make_answer(lean_code=nested)
    assert verdict(answer, problem) is FormatError.TACTICS_LEAN4_NOT_MATCH
    assert verdict(answer, problem, comments_read_by_lean_lexer=True) is None


def test_every_earlier_turn_of_the_conversation_is_checked_as_the_release_does(problem):
    bad_first = make_answer().replace("<think>", "")
    check = check_format(make_answer(), problem, RELEASE, earlier_answers=[bad_first])
    assert check.error is FormatError.NO_VALID_THINK_BLOCK
    assert "earlier answer 1" in check.detail
    assert check_format(make_answer(), problem, RELEASE, earlier_answers=[make_answer()]).is_valid


def test_a_sorry_in_the_code_is_removed_before_the_statement_is_looked_for(problem):
    code = STATEMENT.replace(":= by", ":= by sorry") + "\n  positivity"
    assert verdict(make_answer(lean_code=code), problem, min_tactics_lean4_match=None) is None
