"""The recipe's prompts: a system turn and a user turn holding the problem and its formal statement.

The wording is the Kimina-Prover model cards' (the format Kimina-Prover-Distill was trained on and the
release's data preparation reproduces): the informal problem after ``# Problem:``, then the header and
formal statement in a lean4 block after ``# Formal statement:``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer.problems import Problem

SYSTEM_PROMPT = "You are an expert in mathematics and proving theorems in Lean 4."
TASK_INSTRUCTION = "Think about and solve the following problem step by step in Lean 4."

CHAT_ROLES = ("system", "user", "assistant")


def first_attempt_user_prompt(problem: Problem) -> str:
    text = TASK_INSTRUCTION
    # Without an informal statement the line is left out rather than shown empty.
    if problem.informal_statement.strip():
        text += f"\n# Problem:{problem.informal_statement.strip()}"
    text += f"\n# Formal statement:\n```lean4\n{problem.lean_prefix}\n```\n"
    return text


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
