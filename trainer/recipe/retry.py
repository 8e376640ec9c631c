"""The error-correction turn: a first attempt Lean rejected, plus Lean's feedback, becomes a new prompt.

As in the release (kimina-prover-rl, ``dataset.py`` and ``reward/error_fixing.py``): the retry
prompt is the first conversation, the model's answer as an assistant turn, then a user turn that is
Lean's feedback alone, at most three errors, each with its message and a numbered snippet of the
lines around it (two before, two after, cut where the code starts or ends) with the error line
marked, the sections joined as the release joins them. A proof that ran into Lean's timeout (no
error message to quote) gets the release's ``# System Error`` section with the server's words.
Retry prompts wait in a replay buffer of the latest 5,000; each prompt slot of a batch draws from
it with probability 0.5.

Where this departs from the release, on purpose:

* no retry for a first attempt that failed the format check (the release retried any non-valid
  proof), none when Lean gave no error to quote (a timeout excepted), and none for a censored
  verdict, which the release retried with the server's error as ``# System Error``: a Lean outage
  says nothing the model could fix;
* snippet line numbers are those of the checked code, header included, because the verifier reports
  positions in it (the release numbered lines after the imports); the snippet never shows the
  ``#print axioms`` line we append (the model never wrote it);
* a drawn retry leaves the buffer, so each attempt is retried at most once (the release kept
  it and could draw it again);
* goal states are not quoted: the verifier does not return Lean's info trees.

Beyond the release, off by default: rounds of correction (``retry.max_rounds`` > 1). The first attempt
is round 0, its retry round 1, and a round-r answer Lean rejects becomes a round r+1 prompt while r <
max_rounds. ``retry.history`` says what that prompt carries: ``last``, the first prompt, the last answer
and Lean's feedback on it (the release's retry, whatever the round), or ``all``, every earlier answer
with its feedback, the oldest pairs dropped first until the prompt fits ``retry.max_prompt_tokens``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainer.config import RetryConfig, RetryHistory
from trainer.recipe.format_reward import FormatCheck
from trainer.recipe.problems import Problem
from trainer.recipe.prompts import check_messages, first_attempt_messages
from trainer.verification.checked_code import layout_of
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult


class RetryDropReason(StrEnum):
    """Why a first attempt did not become a retry prompt."""

    RETRIES_DISABLED = "retries_disabled"
    ALREADY_A_RETRY = "already_a_retry"
    FORMAT_INVALID = "format_invalid"
    CENSORED = "censored"
    ACCEPTED = "accepted"
    EMPTY_FEEDBACK = "empty_feedback"
    FEEDBACK_TOO_LONG = "feedback_too_long"
    PROMPT_TOO_LONG = "prompt_too_long"


@dataclass
class RetryPrompt:
    problem: Problem
    messages: list[dict]
    parent_rollout_key: str
    feedback: str
    created_step: int
    round: int = 1  # the correction round this prompt opens: 1 for a first attempt's retry
    # Earlier (answer, feedback) pairs left out so that it fits (retry.history=all); 0 otherwise.
    dropped_turns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem.to_dict(),
            "messages": [dict(message) for message in self.messages],
            "parent_rollout_key": self.parent_rollout_key,
            "feedback": self.feedback,
            "created_step": self.created_step,
            "round": self.round,
            "dropped_turns": self.dropped_turns,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RetryPrompt":
        return cls(
            problem=Problem.from_dict(data["problem"]),
            messages=[dict(message) for message in data["messages"]],
            parent_rollout_key=data["parent_rollout_key"],
            feedback=data["feedback"],
            created_step=int(data["created_step"]),
            # Checkpoints written before rounds existed hold first attempts' retries only.
            round=int(data.get("round", 1)),
            dropped_turns=int(data.get("dropped_turns", 0)),
        )


def numbered_snippet(code_lines: Sequence[str], error_line: int, snippet_lines: int) -> str:
    """The lines around ``error_line`` (1-based), each numbered, the error line marked with ``>``.

    As the release's ``format_error_output``: ``(snippet_lines - 1) // 2`` lines before the error
    line and the rest after it, cut (not shifted) where the code starts or ends, so an error on
    the first line shows it and the lines after it only; an error past the end marks nothing.
    """
    before = (snippet_lines - 1) // 2
    first = max(1, error_line - before)
    last = min(len(code_lines), error_line - before + snippet_lines - 1)
    rows = []
    for number in range(first, last + 1):
        marker = " >" if number == error_line else "  "
        # As the release, which removes `count_heartbeats in` from every quoted line.
        rows.append(f"{number:03d}{marker}| {code_lines[number - 1].replace('count_heartbeats in', '')}")
    return "\n".join(rows)


def model_code_lines(checked_code: str) -> list[str]:
    """The lines of the checked code a snippet may quote: all but the ``#print axioms`` query we
    append and the blank line before it (the model wrote neither)."""
    lines = checked_code.split("\n")
    axioms_line = layout_of(checked_code)["axioms_line"]
    if axioms_line is not None:
        lines = lines[: axioms_line - 1]
        while lines and not lines[-1].strip():
            lines.pop()
    return lines


def build_lean_feedback(
    checked_code: str, errors: Sequence[LeanMessage], config: RetryConfig, system_error: str | None = None
) -> str:
    """Lean's feedback on ``checked_code`` in the release's layout (``create_tool_message``).

    The first ``config.max_errors`` error-severity messages, each as ``# Error i:``, its message and
    a numbered snippet of the checked code (line numbers as in ``checked_code``, where the verifier
    reports them), concatenated with no separator, as the release does. With no error to quote,
    the server's own error (``system_error``: a timeout) as ``# System Error:``. Empty when there is
    neither.
    """
    code_lines = model_code_lines(checked_code)
    quoted = [message for message in errors if message.severity == "error"][: config.max_errors]
    feedback = ""
    for index, message in enumerate(quoted, 1):
        feedback += f"# Error {index}:\nError message: \n{message.text.strip()}\n\n"
        if message.line is not None:
            snippet = numbered_snippet(code_lines, message.line, config.snippet_lines)
            rows = snippet + "\n" if snippet else ""
            feedback += f"Lean 4 code snippet with error:\n```lean4\n{rows}```\n"
    if not feedback and system_error and system_error.strip():
        feedback = f"# System Error:\nError message: \n{system_error.strip()}\n\n"
    return feedback


def retry_messages(
    problem: Problem, first_messages: Sequence[dict] | None, first_response: str, feedback: str
) -> list[dict]:
    """The first conversation (the problem's first-attempt prompt when None), the model's answer,
    then Lean's feedback as the user's next turn."""
    previous = first_attempt_messages(problem) if first_messages is None else [dict(message) for message in first_messages]
    check_messages(previous)
    return previous + [
        {"role": "assistant", "content": first_response},
        {"role": "user", "content": feedback},
    ]


def make_retry(
    problem: Problem,
    first_messages: Sequence[dict] | None,
    response: str,
    format_check: FormatCheck,
    verification: VerificationResult,
    checked_code: str,
    parent_rollout_key: str,
    step: int,
    config: RetryConfig,
    count_tokens: Callable[[list[dict]], int],
    answer_round: int | None = None,
) -> RetryPrompt | RetryDropReason:
    """The next round's prompt for one scored answer, or the reason there is none.

    ``first_messages`` is the prompt the answer replied to; ``answer_round`` its round (0: a first
    attempt), counted from that prompt's assistant turns when not given (right for one round of
    correction; with ``history=last`` a later round's prompt shows only the last answer, so the driver
    says which round it is).
    """
    if not config.enabled or config.max_retries == 0:
        return RetryDropReason.RETRIES_DISABLED
    if answer_round is None:
        answer_round = sum(1 for message in first_messages or () if message.get("role") == "assistant")
    if answer_round >= config.max_rounds:
        return RetryDropReason.ALREADY_A_RETRY
    if not format_check.is_valid:
        return RetryDropReason.FORMAT_INVALID
    if verification.is_censored:
        return RetryDropReason.CENSORED
    if verification.verdict is Verdict.VALID:
        return RetryDropReason.ACCEPTED
    feedback = build_lean_feedback(checked_code, verification.errors, config, verification.system_error)
    if not feedback.strip():
        return RetryDropReason.EMPTY_FEEDBACK
    if len(feedback) > config.max_feedback_chars:
        return RetryDropReason.FEEDBACK_TOO_LONG
    fitted = fitted_round_messages(problem, first_messages, response, feedback, config, count_tokens)
    if fitted is None:
        return RetryDropReason.PROMPT_TOO_LONG
    messages, dropped_turns = fitted
    return RetryPrompt(
        problem=problem,
        messages=messages,
        parent_rollout_key=parent_rollout_key,
        feedback=feedback,
        created_step=step,
        round=answer_round + 1,
        dropped_turns=dropped_turns,
    )


def fitted_round_messages(
    problem: Problem, first_messages: Sequence[dict] | None, response: str, feedback: str, config: RetryConfig,
    count_tokens: Callable[[list[dict]], int],
) -> tuple[list[dict], int] | None:
    """The next round's conversation and how many earlier (answer, feedback) pairs ``all`` left out to fit
    ``config.max_prompt_tokens``; None when even the first prompt with the last answer alone is too long.

    ``last`` keeps the first prompt (everything before the first answer) and the last answer only;
    ``all`` keeps every earlier pair, dropping the oldest first. A first attempt's retry is the
    release's either way."""
    previous = first_attempt_messages(problem) if first_messages is None else [dict(message) for message in first_messages]
    first_answer = next((index for index, message in enumerate(previous) if message.get("role") == "assistant"),
                        len(previous))
    opening, earlier = previous[:first_answer], previous[first_answer:]
    pairs = [earlier[index:index + 2] for index in range(0, len(earlier), 2)]
    kept = pairs if config.history is RetryHistory.ALL else []
    dropped = 0  # ``last`` leaves the earlier pairs out by design: only a trim to fit is counted
    while True:
        messages = retry_messages(problem, opening + [message for pair in kept for message in pair], response, feedback)
        if count_tokens(messages) <= config.max_prompt_tokens:
            return messages, dropped
        if not kept:
            return None
        kept, dropped = kept[1:], dropped + 1


class ReplayBuffer:
    """The latest ``config.buffer_size`` retry prompts; older ones fall out as new ones arrive."""

    STATE_VERSION = 1

    def __init__(self, config: RetryConfig):
        self.config = config
        self._entries: deque[RetryPrompt] = deque(maxlen=config.buffer_size)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, retry: RetryPrompt) -> None:
        self._entries.append(retry)

    def draw(self, rng: random.Random) -> RetryPrompt:
        """A uniformly chosen entry, removed so it is retried once at most."""
        if not self._entries:
            raise IndexError("the replay buffer is empty; check len(buffer) or use choose_prompt_slots first")
        index = rng.randrange(len(self._entries))
        retry = self._entries[index]
        del self._entries[index]
        return retry

    def choose_prompt_slots(self, n_slots: int, rng: random.Random) -> list[bool]:
        """For each of ``n_slots`` prompt slots, whether it takes a retry from the buffer: each slot
        draws with probability ``config.replay_probability`` while entries remain undrawn."""
        if n_slots < 0:
            raise ValueError(f"n_slots must be ≥ 0, got {n_slots}")
        available = len(self._entries) if self.config.enabled else 0
        choices = []
        for _ in range(n_slots):
            takes_retry = available > 0 and rng.random() < self.config.replay_probability
            available -= takes_retry
            choices.append(takes_retry)
        return choices

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe contents, oldest first, for checkpoints."""
        return {"version": self.STATE_VERSION, "entries": [retry.to_dict() for retry in self._entries]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores ``state_dict()``'s contents; with a smaller buffer now, only the latest entries stay."""
        version = state.get("version")
        if version != self.STATE_VERSION:
            raise ValueError(
                f"replay buffer state has version {version!r}, this trainer reads version {self.STATE_VERSION}; "
                "resume with the trainer version that wrote the checkpoint"
            )
        self._entries = deque((RetryPrompt.from_dict(entry) for entry in state["entries"]), maxlen=self.config.buffer_size)
