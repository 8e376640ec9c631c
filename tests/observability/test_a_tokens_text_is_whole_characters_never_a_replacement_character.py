"""The token records' texts are whole characters (issue 45): SmolLM2's byte-level vocabulary (Kimina's Qwen vocabulary
is byte-level too) splits a character such as ℚ over tokens, and each such token decoded alone was U+FFFD, so the
proof viewer drew `(1 : ℚ)` as `(1 : ���)`. Now a character's last token carries it whole and the tokens before it
the empty text (frontend/src/_tokens.js draws them as one); their texts joined are the answer."""

from trainer.learning.models import smollm2_tokenizer
from trainer.observability.token_records import REPLACEMENT_CHARACTER, TokenTexts

ANSWER = "theorem q : (1 : ℚ) + 1 = 2 ∧ ∀ x : ℝ, x ∈ Set.univ → 0 ≤ x ^ 2 := by\n  norm_num"


def test_the_texts_of_an_answer_full_of_lean_symbols_join_into_it_with_no_replacement_character():
    tokenizer = smollm2_tokenizer()
    ids = tokenizer.encode(ANSWER, add_special_tokens=False)
    assert any(REPLACEMENT_CHARACTER in tokenizer.decode([token]) for token in ids), "no character is split: nothing tested"

    texts = list(TokenTexts(tokenizer)(ids))

    assert len(texts) == len(ids)
    assert "".join(texts) == ANSWER
    assert not any(REPLACEMENT_CHARACTER in text for text in texts)


def test_a_split_characters_tokens_before_the_last_have_the_empty_text_and_the_last_has_it_whole():
    tokenizer = smollm2_tokenizer()
    ids = tokenizer.encode("(1 : ℚ)", add_special_tokens=False)
    texts = list(TokenTexts(tokenizer)(ids))
    carrier = next(index for index, text in enumerate(texts) if "ℚ" in text)
    parts = [index for index, token in enumerate(ids) if REPLACEMENT_CHARACTER in tokenizer.decode([token])]
    assert carrier == parts[-1] and all(texts[index] == "" for index in parts[:-1])
    assert texts[carrier] == tokenizer.decode([ids[index] for index in parts])


def test_a_character_cut_off_by_the_length_limit_is_drawn_once_as_decoded():
    tokenizer = smollm2_tokenizer()
    cut = tokenizer.encode("x : ℚ", add_special_tokens=False)[:-1]  # the last of ℚ's bytes was never written
    assert REPLACEMENT_CHARACTER in tokenizer.decode(cut[-1:])
    texts = list(TokenTexts(tokenizer)(cut))
    assert "".join(texts) == tokenizer.decode(cut) == "x : " + REPLACEMENT_CHARACTER
    assert sum(REPLACEMENT_CHARACTER in text for text in texts) == 1
