"""Which scored first attempts become error-correction prompts, and what those prompts hold."""

from __future__ import annotations

import pytest

from trainer.config import RetryConfig
from trainer.recipe.format_reward import FormatCheck, FormatError
from trainer.recipe.prompts import first_attempt_messages
from trainer.recipe.retry import RetryDropReason, RetryPrompt, make_retry
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult

from tests.recipe.answers import VALID_REASONING, make_answer

BODY = "\n  linarith"
VALID_FORMAT = FormatCheck(None, "format valid", VALID_REASONING, "", BODY)
REJECTED = VerificationResult(Verdict.LEAN_ERROR, (LeanMessage("error", "linarith failed", 10, 2),))


def count_words(messages: list[dict]) -> int:
    return sum(len(message["content"].split()) for message in messages)


def attempt(problem, config=None, *, first_messages="default", format_check=VALID_FORMAT, verification=REJECTED, count_tokens=count_words):
    return make_retry(
        problem=problem,
        first_messages=first_attempt_messages(problem) if first_messages == "default" else first_messages,
        response=make_answer(),
        format_check=format_check,
        verification=verification,
        checked_code=problem.lean_prefix + BODY,
        parent_rollout_key="s3-p1-r0",
        step=3,
        config=config or RetryConfig(),
        count_tokens=count_tokens,
    )


def test_a_rejected_well_formed_attempt_becomes_a_retry_prompt(problem):
    retry = attempt(problem)
    assert isinstance(retry, RetryPrompt)
    system, user, answer, feedback = retry.messages
    assert [system, user] == first_attempt_messages(problem)
    assert answer == {"role": "assistant", "content": make_answer()}
    assert feedback == {"role": "user", "content": retry.feedback}
    assert retry.feedback.startswith("# Error 1:\nError message: \nlinarith failed\n")
    assert "010 >|   linarith" in retry.feedback
    assert (retry.problem, retry.parent_rollout_key, retry.created_step) == (problem, "s3-p1-r0", 3)


def test_without_first_messages_the_problems_first_prompt_is_used(problem):
    retry = attempt(problem, first_messages=None)
    assert retry.messages[:2] == first_attempt_messages(problem)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ({"format_check": FormatCheck(FormatError.NO_VALID_THINK_BLOCK, "no <think>")}, RetryDropReason.FORMAT_INVALID),
        ({"verification": VerificationResult(Verdict.INFRA_ERROR, reasons=("stand-in cannot decide",))}, RetryDropReason.CENSORED),
        ({"verification": VerificationResult(Verdict.VALID)}, RetryDropReason.ACCEPTED),
        ({"verification": VerificationResult(Verdict.SORRY, (LeanMessage("warning", "declaration uses 'sorry'", 10, 2),))}, RetryDropReason.EMPTY_FEEDBACK),
        ({"verification": VerificationResult(Verdict.LEAN_ERROR)}, RetryDropReason.EMPTY_FEEDBACK),
        ({"count_tokens": lambda messages: 8193}, RetryDropReason.PROMPT_TOO_LONG),
    ],
    ids=["format-invalid", "infra-error", "accepted", "sorry-only-warning", "no-messages", "prompt-too-long"],
)
def test_it_drops_attempts_with_nothing_to_correct_or_no_room(problem, case, reason):
    assert attempt(problem, **case) is reason


def test_a_proof_that_ran_into_leans_timeout_becomes_a_system_error_retry(problem):
    timed_out = VerificationResult(
        Verdict.TIMEOUT, reasons=("Lean timed out",), system_error="Lean REPL command timed out in 60.0 seconds"
    )
    retry = attempt(problem, verification=timed_out)
    assert isinstance(retry, RetryPrompt)
    assert retry.feedback == "# System Error:\nError message: \nLean REPL command timed out in 60.0 seconds\n\n"
    assert retry.messages[-1] == {"role": "user", "content": retry.feedback}


def test_feedback_longer_than_the_limit_drops_the_retry_and_feedback_at_the_limit_keeps_it(problem):
    feedback_length = len(attempt(problem).feedback)
    assert isinstance(attempt(problem, RetryConfig(max_feedback_chars=feedback_length)), RetryPrompt)
    assert attempt(problem, RetryConfig(max_feedback_chars=feedback_length - 1)) is RetryDropReason.FEEDBACK_TOO_LONG


def test_a_retry_prompt_at_the_token_limit_is_kept(problem):
    assert isinstance(attempt(problem, RetryConfig(max_prompt_tokens=100), count_tokens=lambda messages: 100), RetryPrompt)


def test_a_retry_is_not_retried_again(problem):
    earlier = attempt(problem)
    assert attempt(problem, first_messages=earlier.messages) is RetryDropReason.ALREADY_A_RETRY


def test_no_retries_when_they_are_turned_off(problem):
    assert attempt(problem, RetryConfig(enabled=False)) is RetryDropReason.RETRIES_DISABLED
    assert attempt(problem, RetryConfig(max_retries=0)) is RetryDropReason.RETRIES_DISABLED
