"""The recipe's prompts: a system turn and a user turn holding the problem and its formal statement.

The user turn is the release's template, byte for byte (kimina-prover-rl,
``recipe/kimina_prover_rl/prepare_data.py``, ``PROMPT``): the task line, a blank line, ``# Problem:``
on its own line with the informal problem under it, a blank line, ``# Formal Statement:`` and the
statement in a lean4 block. The release fills it with the promptset's ``formal_statement``,
preamble included; ours is ``problem.lean_prefix`` (header + statement), the same text. An empty
informal problem leaves its line empty, as the release's ``str.format`` does.
``tests/recipe/test_prompt_is_the_releases.py`` holds three prompts typed out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer.recipe.problems import Problem

SYSTEM_PROMPT = "You are an expert in mathematics and proving theorems in Lean 4."
USER_PROMPT_TEMPLATE = (
    "Think about and solve the following problems step by step in Lean 4.\n"
    "\n"
    "# Problem:\n"
    "{informal_problem}\n"
    "\n"
    "# Formal Statement:\n"
    "```lean4\n"
    "{formal_statement}\n"
    "```\n"
)

CHAT_ROLES = ("system", "user", "assistant")


def first_attempt_user_prompt(problem: Problem) -> str:
    return USER_PROMPT_TEMPLATE.format(informal_problem=problem.informal_statement, formal_statement=problem.lean_prefix)


def first_attempt_messages(problem: Problem) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": first_attempt_user_prompt(problem)},
    ]


def check_messages(messages: Sequence[dict]) -> None:
    if not messages:
        raise ValueError("a prompt needs at least one message, got an empty list")
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in CHAT_ROLES:
            raise ValueError(f"message {index} has role {role!r}; use one of {', '.join(CHAT_ROLES)}")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"message {index} ({role}) has content {message.get('content')!r}; it must be a string")


def plain_transcript(messages: Sequence[dict]) -> str:
    """A readable prompt for tokenizers without a chat template: one labelled paragraph per turn,
    ending with the label the model continues from."""
    turns = [f"{message['role'].capitalize()}: {message['content'].strip()}" for message in messages]
    return "\n\n".join(turns) + "\n\nAssistant:"


def render_prompt(tokenizer: Any, messages: Sequence[dict]) -> str:
    """The exact text the model is given: the tokenizer's chat template with the generation prompt
    added, or a plain transcript when the tokenizer has no template."""
    check_messages(messages)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    return plain_transcript(messages)


def prompt_token_count(tokenizer: Any, messages: Sequence[dict]) -> int:
    """Tokens of the rendered prompt. Special tokens come from the template itself, so none are added."""
    text = render_prompt(tokenizer, messages)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])
