"""The recipe's prompt, rendered with a chat template or, without one, as a plain transcript."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from tests.recipe.answers import STATEMENT
from trainer.recipe.prompts import SYSTEM_PROMPT, first_attempt_messages, prompt_token_count, render_prompt

# The ChatML layout SmolLM2 and Qwen3 use, written by hand: loading SmolLM2's GGUF tokenizer takes
# longer than this whole test file should.
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def whitespace_tokenizer(chat_template: str | None) -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.chat_template = chat_template
    return tokenizer


def test_the_user_turn_holds_the_problem_then_the_statement_in_a_lean4_block(problem):
    system, user = first_attempt_messages(problem)
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert user["content"] == (
        "Think about and solve the following problems step by step in Lean 4.\n\n"
        "# Problem:\nShow that a² + b² ≥ 0 for nonnegative reals a and b.\n\n"
        "# Formal Statement:\n```lean4\n" + problem.header + STATEMENT + "\n```\n"
    )


def test_it_renders_through_the_tokenizers_chat_template_with_the_generation_prompt(problem):
    messages = first_attempt_messages(problem)
    text = render_prompt(whitespace_tokenizer(CHATML_TEMPLATE), messages)
    assert text == (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
        f"<|im_start|>user\n{messages[1]['content']}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_a_tokenizer_without_a_template_gets_a_readable_transcript(problem):
    messages = first_attempt_messages(problem)
    text = render_prompt(whitespace_tokenizer(None), messages)
    assert text.startswith(f"System: {SYSTEM_PROMPT}\n\nUser: Think about")
    assert text.endswith("```\n\nAssistant:")


def test_the_token_count_is_that_of_the_rendered_prompt(problem):
    tokenizer = whitespace_tokenizer(CHATML_TEMPLATE)
    messages = first_attempt_messages(problem)
    assert prompt_token_count(tokenizer, messages) == len(render_prompt(tokenizer, messages).split())


def test_a_message_with_an_unknown_role_is_refused():
    with pytest.raises(ValueError, match="message 0 has role 'tool'; use one of system, user, assistant"):
        render_prompt(whitespace_tokenizer(CHATML_TEMPLATE), [{"role": "tool", "content": "x"}])
