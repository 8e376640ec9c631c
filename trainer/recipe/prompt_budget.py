"""The prompt budget: a first-attempt prompt longer than ``rollout.max_prompt_tokens`` is left out, never truncated
(a cut statement is another theorem), as the release's data filter drops prompts over ``max_prompt_length``.

The one home of the rule and of its reason in words. An evaluation (trainer/loop/run_evaluation.py) and a training
run (trainer/loop/driver.py) name each problem they leave out with this reason, so a problem never vanishes from a
report without a word: before, an evaluation of 39 PutnamBench problems reported 38, and nothing said that
``putnam_1962_a2`` (1,862 characters of statement) had been dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trainer.observability.events import ProblemNotAttempted
from trainer.recipe.prompts import first_attempt_messages, render_prompt


def over_budget_reason(prompt_tokens: int, max_prompt_tokens: int) -> str | None:
    """Why a prompt of ``prompt_tokens`` is left out under a budget of ``max_prompt_tokens``; None when it fits."""
    if prompt_tokens <= max_prompt_tokens:
        return None
    return (f"its prompt is {prompt_tokens:,} tokens, over rollout.max_prompt_tokens ({max_prompt_tokens:,}); "
            f"shorten the statement, or launch with a preset whose prompt budget holds it")


def problems_over_budget(problems: Sequence, prompt_tokens: Callable[[object], int],
                         max_prompt_tokens: int) -> list[ProblemNotAttempted]:
    """Each of ``problems`` whose first-attempt prompt (``prompt_tokens(problem)`` tokens) is over the budget."""
    left_out = []
    for problem in problems:
        reason = over_budget_reason(prompt_tokens(problem), max_prompt_tokens)
        if reason is not None:
            left_out.append(ProblemNotAttempted(problem_id=problem.problem_id, reason=reason))
    return left_out


def first_attempts_over_budget(problems: Sequence, tokenizer, max_prompt_tokens: int) -> list[ProblemNotAttempted]:
    """``problems_over_budget`` for first-attempt prompts rendered with ``tokenizer``, as a run renders them, for a
    whole promptset at launch: a prompt of no more UTF-8 bytes than the budget cannot be over it (every token of a
    byte-level tokenizer, or a SentencePiece one with byte fallback, stands for at least one byte), so only the
    longer ones are tokenized."""
    def prompt_tokens(problem) -> int:
        text = render_prompt(tokenizer, first_attempt_messages(problem))
        if len(text.encode()) <= max_prompt_tokens:
            return 0
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return problems_over_budget(problems, prompt_tokens, max_prompt_tokens)
