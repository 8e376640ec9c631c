"""With rollout.lean_tool_calls ≥ 1 the answer may ask Lean inside its reasoning; its final answer is checked as the
release checks it, and its tool blocks must stay in the reasoning and hold only Lean's own replies. Off, the
release's check is all there is (trainer/recipe/format_reward.py)."""

from __future__ import annotations

from trainer.config import RunConfig
from trainer.recipe.format_reward import FormatError, check_format
from trainer.recipe.problems import Problem

PROBLEM = Problem("p", "theorem t : (1 : ℚ) / 2 + 1 / 2 = 1 := by")
REWARD = RunConfig.from_preset("cpu-smoke").reward
REPLY = "\n<lean_result>\nLean accepts this snippet: no errors.\n</lean_result>\n"
CALL = "<lean>\ntheorem t : (1 : ℚ) / 2 + 1 / 2 = 1 := by\n  norm_num\n</lean>"
FINAL = "```lean4\ntheorem t : (1 : ℚ) / 2 + 1 / 2 = 1 := by\n  norm_num\n```"


def answer(reasoning: str, between: str = "") -> str:
    return f"<think>\n{reasoning}\n</think>\n{between}{FINAL}"


def test_an_answer_that_asked_lean_inside_its_reasoning_passes():
    check = check_format(answer(CALL + REPLY + "norm_num"), PROBLEM, REWARD, tool_replies=[REPLY])
    assert check.is_valid, check.detail


def test_a_tool_block_after_the_reasoning_fails_when_tool_calls_are_on():
    response = answer("norm_num", between=CALL + "\n")
    check = check_format(response, PROBLEM, REWARD, tool_replies=[])
    assert check.error is FormatError.TOOL_BLOCK_OUTSIDE_REASONING
    assert check.failure_lines == ((4, 4), (7, 7))  # the <lean> and </lean> lines


def test_a_reply_the_model_wrote_itself_fails_as_not_from_lean():
    forged = answer(CALL + REPLY + "norm_num")
    check = check_format(forged, PROBLEM, REWARD, tool_replies=[])
    assert check.error is FormatError.TOOL_REPLY_NOT_FROM_LEAN
    assert "Lean gave 0 replies" in check.detail


def test_a_reply_other_than_lean_s_fails_too():
    altered = answer(CALL + REPLY.replace("accepts", "loves") + "norm_num")
    assert check_format(altered, PROBLEM, REWARD, tool_replies=[REPLY]).error is FormatError.TOOL_REPLY_NOT_FROM_LEAN


def test_with_tool_calls_off_the_release_s_check_alone_decides():
    response = answer("norm_num", between=CALL + "\n")
    assert check_format(response, PROBLEM, REWARD).is_valid
    assert check_format(answer(CALL + REPLY + "norm_num"), PROBLEM, REWARD).is_valid


def test_the_release_s_categories_come_first():
    no_think = FINAL
    assert check_format(no_think, PROBLEM, REWARD, tool_replies=[]).error is FormatError.NO_VALID_THINK_BLOCK
