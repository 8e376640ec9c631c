"""Rounds of correction (retry.max_rounds): a retry Lean rejects becomes the next round's prompt, up to N rounds,
carrying the last attempt (history=last) or every earlier one, the oldest dropped first to fit (history=all)."""

from __future__ import annotations

from trainer.config import RetryConfig, RetryHistory
from trainer.recipe.format_reward import FormatCheck
from trainer.recipe.prompts import first_attempt_messages
from trainer.recipe.retry import RetryDropReason, RetryPrompt, make_retry
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult

from tests.recipe.answers import VALID_REASONING, make_answer

BODY = "\n  linarith"
VALID_FORMAT = FormatCheck(None, "format valid", VALID_REASONING, "", BODY)


def rejected(text: str) -> VerificationResult:
    return VerificationResult(Verdict.LEAN_ERROR, (LeanMessage("error", text, 10, 2),))


def count_words(messages: list[dict]) -> int:
    return sum(len(message["content"].split()) for message in messages)


def next_round(problem, config, messages, answer, error, answer_round, count_tokens=count_words):
    return make_retry(problem, messages, answer, VALID_FORMAT, rejected(error), problem.lean_prefix + BODY,
                      "s3-p1-r0", 3, config, count_tokens, answer_round=answer_round)


def chain(problem, config, rounds, count_tokens=count_words):
    """Rounds 0, 1, … answered with distinct answers and rejected with distinct errors, as far as they go."""
    messages, made = first_attempt_messages(problem), []
    for answer_round in range(rounds):
        outcome = next_round(problem, config, messages, make_answer(f"  tactic_{answer_round}"),
                             f"error of round {answer_round}", answer_round, count_tokens)
        made.append(outcome)
        if not isinstance(outcome, RetryPrompt):
            break
        messages = outcome.messages
    return made


def test_by_default_a_retry_is_never_retried_again(problem):
    first_retry, second = chain(problem, RetryConfig(), rounds=2)
    assert isinstance(first_retry, RetryPrompt) and first_retry.round == 1
    assert second is RetryDropReason.ALREADY_A_RETRY


def test_with_three_rounds_a_chain_reaches_round_three_and_stops(problem):
    made = chain(problem, RetryConfig(max_rounds=3), rounds=4)
    assert [retry.round for retry in made[:3]] == [1, 2, 3]
    assert made[3] is RetryDropReason.ALREADY_A_RETRY


def test_history_last_carries_the_first_prompt_and_the_last_attempt_only(problem):
    third = chain(problem, RetryConfig(max_rounds=3, history=RetryHistory.LAST), rounds=3)[2]
    system, user, answer, feedback = third.messages
    assert [system, user] == first_attempt_messages(problem)
    assert "tactic_2" in answer["content"] and "error of round 2" in feedback["content"]
    assert third.dropped_turns == 0  # left out by design, not trimmed to fit


def test_history_all_carries_every_earlier_attempt_and_its_errors_in_order(problem):
    third = chain(problem, RetryConfig(max_rounds=3, history=RetryHistory.ALL), rounds=3)[2]
    assert third.messages[:2] == first_attempt_messages(problem)
    turns = third.messages[2:]
    assert [message["role"] for message in turns] == ["assistant", "user"] * 3
    assert [f"tactic_{r}" in turns[2 * r]["content"] for r in range(3)] == [True] * 3
    assert [f"error of round {r}" in turns[2 * r + 1]["content"] for r in range(3)] == [True] * 3
    assert third.dropped_turns == 0


def test_history_all_drops_the_oldest_attempts_first_to_fit_the_prompt_budget(problem):
    full = chain(problem, RetryConfig(max_rounds=3, history=RetryHistory.ALL), rounds=3)[2]
    pair = count_words(full.messages[2:4])
    budget = count_words(full.messages) - pair  # room for all but one earlier (answer, feedback) pair
    third = chain(problem, RetryConfig(max_rounds=3, history=RetryHistory.ALL, max_prompt_tokens=budget), rounds=3)[2]
    assert isinstance(third, RetryPrompt) and third.dropped_turns == 1
    contents = " ".join(message["content"] for message in third.messages)
    assert "tactic_0" not in contents and "error of round 0" not in contents
    assert "tactic_1" in contents and "tactic_2" in contents


def test_a_prompt_that_cannot_fit_even_with_the_last_attempt_alone_is_dropped_and_counted(problem):
    config = RetryConfig(max_rounds=3, history=RetryHistory.ALL)
    first_retry = chain(problem, config, rounds=1)[0]
    too_tight = RetryConfig(max_rounds=3, history=RetryHistory.ALL, max_prompt_tokens=count_words(first_retry.messages) - 1)
    assert chain(problem, too_tight, rounds=1) == [RetryDropReason.PROMPT_TOO_LONG]


def test_the_round_survives_a_checkpoint_of_the_replay_buffer(problem):
    second = chain(problem, RetryConfig(max_rounds=3), rounds=2)[1]
    restored = RetryPrompt.from_dict(second.to_dict())
    assert (restored.round, restored.dropped_turns, restored.messages) == (2, second.dropped_turns, second.messages)
