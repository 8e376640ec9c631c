"""The model's copy of the statement is found after whitespace normalisation; only the body after it is kept."""

from __future__ import annotations

import pytest

from trainer.config import RewardConfig
from trainer.recipe.format_reward import check_format, find_statement_end, normalize_lean_whitespace
from trainer.verification.lean_lexer import strip_comments

from tests.recipe.answers import STATEMENT, make_answer

NO_MATCH_CHECK = RewardConfig(min_tactics_lean4_match=None)


def body_of(lean_code: str) -> str | None:
    end = find_statement_end(lean_code, STATEMENT)
    return None if end is None else lean_code[end:]


@pytest.mark.parametrize(
    "copy",
    [
        pytest.param(STATEMENT, id="verbatim"),
        pytest.param(" ".join(STATEMENT.split()), id="joined-onto-one-line"),
        pytest.param(STATEMENT.replace("\n    ", "\n\t\t").replace(" : 0 ≤ a ^ 2", "  :  0 ≤ a ^ 2"), id="reindented-and-extra-spaces"),
        pytest.param(STATEMENT.replace(" := by", " :=\n  by"), id="by-on-its-own-line"),
        pytest.param("/-- the problem -/\n" + STATEMENT, id="with-a-doc-comment"),
        pytest.param(STATEMENT.replace("(h₁ : 0 ≤ b)", "(h₁ : 0 ≤ b) -- second hypothesis\n   "), id="with-a-line-comment-inside"),
        pytest.param(STATEMENT.replace("(h₁", "/- nested /- comment -/ here -/ (h₁"), id="with-a-nested-block-comment-inside"),
    ],
)
def test_it_finds_the_statement_however_the_model_spaced_it(copy):
    assert body_of(copy + "\n  positivity") == "\n  positivity"


@pytest.mark.parametrize(
    "copy",
    [
        pytest.param(STATEMENT.replace(" := by", " :=by"), id="glued-by"),
        pytest.param(STATEMENT.replace("h₀", "h0"), id="renamed-hypothesis"),
        pytest.param(STATEMENT.replace("0 ≤ a ^ 2 + b ^ 2", "0 ≤ a ^ 2"), id="weakened-goal"),
        pytest.param(STATEMENT.replace("sum_sq_nonneg", "sum_sq_nonneg'"), id="primed-name"),
        pytest.param(STATEMENT[: -len(" := by")] + " := by_contra", id="by-glued-to-an-identifier"),
        pytest.param("-- " + " ".join(STATEMENT.split()), id="only-inside-a-comment"),
    ],
)
def test_it_does_not_accept_a_changed_statement(copy):
    assert body_of(copy + "\n  positivity") is None


def test_the_body_is_everything_after_the_statement_including_later_declarations():
    code = "import Mathlib\n\n" + STATEMENT + "\n  nlinarith [sq_nonneg a]\n\ntheorem extra : True := trivial\n"
    assert body_of(code) == "\n  nlinarith [sq_nonneg a]\n\ntheorem extra : True := trivial\n"


def test_text_before_the_statement_is_left_out_of_the_proof_body(problem):
    lean_code = "import Mathlib\nlemma helper : 1 = 1 := rfl\n" + " ".join(STATEMENT.split()) + "\n  positivity"
    check = check_format(make_answer(lean_code=lean_code), problem, NO_MATCH_CHECK)
    assert check.is_valid, check.detail
    assert check.lean_code == lean_code
    assert check.proof_body == "\n  positivity"


def test_the_first_of_two_copies_of_the_statement_starts_the_body():
    code = STATEMENT + "\n  positivity\n" + STATEMENT + "\n  simp"
    assert body_of(code) == "\n  positivity\n" + STATEMENT + "\n  simp"


def test_a_string_with_dashes_is_not_a_comment():
    assert strip_comments('#eval "a -- b" -- note\nx') == '#eval "a -- b" \nx'


def test_primes_in_names_do_not_open_a_character_literal():
    assert strip_comments("have h' : a' = a' := rfl -- fine") == "have h' : a' = a' := rfl "


def test_a_character_literal_holding_a_quote_does_not_open_a_string():
    assert strip_comments("#eval '\"' -- a quote") == "#eval '\"' "


def test_normalisation_maps_each_character_back_to_the_original():
    code = "  theorem   x\n/- c -/ :  True"
    normalized, origins = normalize_lean_whitespace(code)
    assert normalized == "theorem x : True"
    assert all(code[origin] == character for character, origin in zip(normalized, origins) if character != " ")
    assert origins[normalized.index(":")] == code.index(":")
