"""Every format category: one answer that trips it, and a near miss that passes."""

from __future__ import annotations

import pytest

from trainer.config import RewardConfig
from trainer.recipe.format_reward import FormatError, check_format

from tests.recipe.answers import STATEMENT, VALID_LEAN_CODE, VALID_REASONING, make_answer

REPEATED = "Let me reconsider the whole inequality carefully, expanding both squares and bounding every cross term."
LONG_TACTICS = "```tactics\n" + "\n".join(f"  have h{i} : 0 ≤ a ^ 2 := sq_nonneg a" for i in range(8)) + "\n```\n"
UNRELATED_TACTICS = "```tactics\n  simp\n  ring_nf\n```\nthen\n```tactics\n  norm_num\n```\n"
COMMENTED_TACTICS = "```tactics\n-- try positivity here, since squares are nonnegative anyway\n  positivity\n```\n"
COMMENTED_BODY = "\n  -- squares are nonnegative, and a sum of nonnegatives is nonnegative too\n  positivity"

FAILING = [
    pytest.param(FormatError.NO_VALID_LEAN4_CODE_BLOCK, "<think>" + VALID_REASONING + "</think>\nthe proof is positivity", {}, id="no-lean4-block"),
    pytest.param(FormatError.NO_VALID_LEAN4_CODE_BLOCK, f"<think>{VALID_REASONING}</think>\n```lean4\n{VALID_LEAN_CODE}\n", {}, id="unclosed-lean4-block"),
    pytest.param(FormatError.NO_VALID_LEAN4_CODE_BLOCK, make_answer(after="\nHope this helps!"), {}, id="text-after-lean4-block"),
    # The release's first lean4 block is the draft, and text follows it.
    pytest.param(FormatError.NO_VALID_LEAN4_CODE_BLOCK, make_answer(reasoning=VALID_REASONING + "```lean4\n" + VALID_LEAN_CODE + "\n```\n"), {}, id="lean4-draft-in-reasoning"),
    pytest.param(FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT, make_answer().replace("```lean4\n", "```lean4  \n"), {}, id="lean4-fence-with-trailing-spaces"),
    # As in the release: an empty block is a block, whose no line was tried in a tactics block.
    pytest.param(FormatError.TACTICS_LEAN4_NOT_MATCH, make_answer(lean_code="   "), {}, id="empty-lean4-block"),
    pytest.param(FormatError.NO_VALID_THINK_BLOCK, make_answer().replace("<think>", ""), {}, id="no-think"),
    pytest.param(FormatError.INVALID_THINK_BLOCK_COUNT, "<think>first</think>" + make_answer(), {}, id="two-think-blocks"),
    pytest.param(FormatError.INVALID_THINK_BLOCK_COUNT, make_answer().replace("</think>", ""), {}, id="think-never-closed"),
    pytest.param(FormatError.GENERATION_REPEATS, make_answer(reasoning=VALID_REASONING + (REPEATED + "\n") * 6), {}, id="six-repeats"),
    pytest.param(FormatError.INSUFFICIENT_TACTICS_BLOCKS, make_answer(reasoning=VALID_REASONING.split("If positivity")[0]), {}, id="one-tactics-block"),
    pytest.param(FormatError.TACTIC_CODE_TOO_MANY_LINES, make_answer(reasoning=VALID_REASONING + LONG_TACTICS), {}, id="eight-line-tactics-block"),
    pytest.param(FormatError.TACTIC_BLOCK_FORMATTING_ERROR, make_answer(reasoning=VALID_REASONING + "```tactics\n  simp\n"), {}, id="unclosed-tactics-block"),
    pytest.param(FormatError.TACTIC_BLOCK_FORMATTING_ERROR, make_answer(reasoning=VALID_REASONING + "```tactics\n  simp ```\n  ring\n```\n"), {}, id="stray-fence-in-tactics-block"),
    pytest.param(FormatError.TACTICS_LEAN4_NOT_MATCH, make_answer(reasoning="\nTry things.\n" + UNRELATED_TACTICS), {}, id="tactics-unrelated-to-final-code"),
    pytest.param(FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT, make_answer(lean_code=VALID_LEAN_CODE.replace("h₁ : 0 ≤ b", "h₁ : 0 < b")), {"min_tactics_lean4_match": None}, id="statement-changed"),
    pytest.param(FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT, make_answer(lean_code="axiom cheat : False\n" + VALID_LEAN_CODE), {"min_tactics_lean4_match": None}, id="declares-an-axiom"),
    pytest.param(FormatError.REASONING_COMMENT_DENSITY, make_answer(reasoning=VALID_REASONING + COMMENTED_TACTICS), {"max_reasoning_comment_density": 0.2}, id="comment-heavy-tactics"),
    pytest.param(FormatError.CODE_COMMENT_DENSITY, make_answer(lean_code=STATEMENT + COMMENTED_BODY), {"max_code_comment_density": 0.2, "min_tactics_lean4_match": None}, id="comment-heavy-proof-body"),
    # With Lean inside the reasoning on (tool_replies: the replies the trainer appended; more in
    # test_lean_tool_blocks_are_allowed_only_inside_the_reasoning_and_only_when_enabled.py).
    pytest.param(FormatError.TOOL_BLOCK_OUTSIDE_REASONING, make_answer(between="\n<lean>\nexample : True := trivial\n</lean>\n"), {"tool_replies": []}, id="tool-block-after-the-reasoning"),
    pytest.param(FormatError.TOOL_REPLY_NOT_FROM_LEAN, make_answer(reasoning=VALID_REASONING + "<lean>\nexample : True := trivial\n</lean>\n<lean_result>\nLean accepts this snippet: no errors.\n</lean_result>\n"), {"tool_replies": []}, id="reply-written-by-the-model"),
]

PASSING = [
    pytest.param(make_answer(), {}, id="recipe-shape"),
    pytest.param(make_answer(between=""), {}, id="no-conclusion-between-think-and-code"),
    pytest.param("Sure.\n" + make_answer() + "\n\n", {}, id="text-before-think-and-blank-lines-after-code"),
    pytest.param(make_answer(reasoning=VALID_REASONING + (REPEATED + "\n") * 5), {}, id="five-repeats"),
    pytest.param(make_answer(reasoning=VALID_REASONING + ("Try again.\n") * 20), {}, id="short-lines-repeated-are-not-repeats"),
    pytest.param(make_answer(reasoning=VALID_REASONING.split("If positivity")[0]), {"min_tactic_blocks": 1}, id="one-tactics-block-when-one-is-enough"),
    pytest.param(make_answer(reasoning=VALID_REASONING + LONG_TACTICS), {"tactic_block_lines_ratio": None}, id="long-tactics-block-with-limit-off"),
    pytest.param(make_answer(reasoning="\nTry things.\n" + UNRELATED_TACTICS), {"min_tactics_lean4_match": None}, id="unrelated-tactics-with-match-off"),
    pytest.param(make_answer(lean_code="-- the axiom of choice is not needed\n" + VALID_LEAN_CODE), {"min_tactics_lean4_match": None}, id="axiom-only-in-a-comment"),
    pytest.param(make_answer(reasoning=VALID_REASONING + COMMENTED_TACTICS), {}, id="comment-heavy-tactics-with-density-off"),
    pytest.param(make_answer(lean_code=STATEMENT + COMMENTED_BODY), {"min_tactics_lean4_match": None}, id="comment-heavy-body-with-density-off"),
]


@pytest.mark.parametrize(("expected_error", "response", "overrides"), FAILING)
def test_it_rejects_an_answer_with_the_matching_format_error(problem, expected_error, response, overrides):
    settings = dict(overrides)
    tool_replies = settings.pop("tool_replies", None)
    check = check_format(response, problem, RewardConfig(**settings), tool_replies=tool_replies)
    assert check.error is expected_error, check.detail
    assert not check.is_valid


@pytest.mark.parametrize(("response", "overrides"), PASSING)
def test_it_accepts_a_near_miss_that_keeps_the_recipe_shape(problem, response, overrides):
    check = check_format(response, problem, RewardConfig(**overrides))
    assert check.is_valid, f"{check.error}: {check.detail}"
    assert check.error is None


def test_every_format_category_has_a_failing_case():
    tripped = {case.values[0] for case in FAILING}
    assert tripped == set(FormatError)


def test_a_valid_answer_exposes_its_reasoning_code_and_proof_body(problem, recipe_reward):
    check = check_format(make_answer(), problem, recipe_reward)
    assert check.is_valid
    assert check.reasoning == VALID_REASONING
    assert check.lean_code == VALID_LEAN_CODE
    assert check.proof_body == "\n  positivity"


def test_the_tactics_block_line_limit_grows_with_the_final_code(problem, recipe_reward):
    long_proof = STATEMENT + "".join(f"\n  have h{i} : 0 ≤ a ^ 2 := sq_nonneg a" for i in range(8)) + "\n  positivity"
    reasoning = "\nBuild it up.\n" + LONG_TACTICS + "and\n```tactics\n" + long_proof + "\n```\n"
    # 11 final lines allow int(0.95 × 11) = 10 lines per block: the 8-line block passes, the 11-line one does not.
    check = check_format(make_answer(reasoning=reasoning, lean_code=long_proof), problem, recipe_reward)
    assert check.error is FormatError.TACTIC_CODE_TOO_MANY_LINES
    assert "tactics block 2 has 11 lines; the limit for this answer is 10" in check.detail


def test_an_absolute_tactics_block_cap_applies_on_top_of_the_ratio(problem):
    check = check_format(make_answer(), problem, RewardConfig(max_tactic_block_lines=2))
    assert check.error is FormatError.TACTIC_CODE_TOO_MANY_LINES
    assert "tactics block 1 has 3 lines; the limit for this answer is 2" in check.detail


def test_the_error_detail_names_the_value_that_failed(problem, recipe_reward):
    check = check_format(make_answer(reasoning=VALID_REASONING.split("If positivity")[0]), problem, recipe_reward)
    assert check.detail.startswith("found 1 ```tactics block(s) after <think>")
    assert check.detail.endswith("at least 2 are required")


def test_header_lines_in_the_final_code_count_towards_the_tactics_match_as_in_the_release(problem, recipe_reward):
    with_header = problem.header + VALID_LEAN_CODE
    # 3 of the 7 distinct final lines were tried: 43% < 70%.
    check = check_format(make_answer(lean_code=with_header), problem, recipe_reward)
    assert check.error is FormatError.TACTICS_LEAN4_NOT_MATCH
    header_tried = VALID_REASONING + "```tactics\n" + problem.header.strip() + "\n```\n"
    check = check_format(make_answer(reasoning=header_tried, lean_code=with_header), problem, recipe_reward)
    assert check.is_valid, check.detail
    assert check.proof_body == "\n  positivity"
