"""A GRPO group side by side: one prompt's answers at one step, each with what the learner made of it.

The advantages are computed by the trainer after the rollouts are published (the rollout events carry none); they
reach the platform in one place, the step's token records (trainer/observability/token_records.py), read here per step without
the tokens. A group whose step has no records (an evaluation, a step the retention removed) shows none: never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from proofs.models import ProofAttempt
from trainer.observability import token_records

# The columns a person may sort by (?sort=NAME, or -NAME for descending) and the value each sorts on.
SORTS = {
    "sample": lambda answer: answer.attempt.sample_index,
    "verdict": lambda answer: answer.attempt.verdict or answer.attempt.format_error,
    "reward": lambda answer: answer.attempt.reward,
    "advantage": lambda answer: answer.advantage,
    "length": lambda answer: answer.attempt.num_tokens,
}


@dataclass
class GroupAnswer:
    attempt: ProofAttempt
    advantage: float | None  # None: not recorded
    lean_error: str
    retries: list[ProofAttempt]  # the next round of correction: every answer to its retry prompt, earliest first


class UnknownSort(ValueError):
    pass


def group_answers(attempt: ProofAttempt, sort: str = "sample") -> list[GroupAnswer]:
    """The answers of ``attempt``'s group, sorted by ``sort``; answers without the figure sort last either way."""
    name = sort.removeprefix("-")
    if name not in SORTS:
        raise UnknownSort(f"cannot sort a group by {sort!r}; choose one of {', '.join(SORTS)} (a leading - reverses)")
    members = list(attempt.group().prefetch_related("retries"))
    summary = None
    if not attempt.is_evaluation:
        summary = token_records.read_step_summary(attempt.run.artifacts_dir, attempt.step, attempt.run_attempt)
    answers = [
        GroupAnswer(member, (summary or {}).get(member.rollout_key, {}).get("advantage"), member.first_lean_error(),
                    sorted(member.retries.all(), key=lambda retry: retry.pk))
        for member in members
    ]
    key = SORTS[name]
    known = sorted((a for a in answers if key(a) is not None), key=key, reverse=sort.startswith("-"))
    return known + [a for a in answers if key(a) is None]
