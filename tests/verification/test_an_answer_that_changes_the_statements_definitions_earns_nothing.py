"""A statement may begin with the definitions its theorem is about (PutnamBench's `def tetration …`). An answer
that redefines one to make the theorem trivial earns nothing: the format check refuses an answer whose code lacks
the definition as the promptset states it (the release's own check), an answer that slips a changed definition
past that check has no copy of the statement to take a proof from, and Lean only ever checks the promptset's
definitions, never the answer's. Scored through the real client against the stand-in Lean server."""

from __future__ import annotations

import asyncio

from trainer.recipe.format_reward import FormatError
from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier

# False as the promptset defines f (f 1 = 2), true if f were redefined as n + 2.
DEFINITION = "def f (n : ℕ) : ℕ := n + 1"
STATEMENT = f"{DEFINITION}\n\ntheorem f_one : f 1 = 3 := by"


def score(url, helpers, lean_code):
    config = helpers.make_config(url)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await RewardScorer(config, verifier).score(helpers.problem(STATEMENT), helpers.answer(lean_code))
        finally:
            await verifier.aclose()

    return asyncio.run(go())


def test_an_answer_that_redefines_the_statements_definition_fails_the_format_check(standin, helpers):
    scored = score(standin.url, helpers, "def f (n : ℕ) : ℕ := n + 2\n\ntheorem f_one : f 1 = 3 := by\n  rfl")
    assert scored.reward == 0.0 and not scored.is_censored
    assert scored.format_check.error is FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    assert "def f (n : ℕ) : ℕ := n + 1" in scored.reasons[0]
    assert scored.lean_interval is None


def test_a_changed_definition_that_keeps_the_original_as_its_prefix_leaves_no_proof_to_check(standin, helpers):
    # The release's check looks for each paragraph as a substring, and "n + 1 + 1" contains "n + 1".
    scored = score(standin.url, helpers, "def f (n : ℕ) : ℕ := n + 1 + 1\n\ntheorem f_one : f 1 = 3 := by\n  rfl")
    assert scored.format_check.is_valid and scored.format_check.proof_body is None
    assert scored.reward == 0.0 and not scored.is_censored and scored.verification is None
    assert "the definitions before its theorem included" in scored.reasons[0]
    assert scored.lean_interval is None  # nothing sent to Lean


def test_lean_checks_the_promptsets_definition_never_one_the_answer_wrote_before_its_copy(standin, helpers):
    scored = score(standin.url, helpers,
                   f"def f (n : ℕ) : ℕ := n + 2\n\n{DEFINITION}\n\ntheorem f_one : f 1 = 3 := by\n  rfl")
    assert scored.format_check.is_valid and scored.format_check.proof_body.strip() == "rfl"
    assert "n + 2" not in scored.checked_code
    assert scored.checked_code.count(DEFINITION) == 1
    assert scored.checked_code.index(DEFINITION) < scored.checked_code.index("theorem f_one : f 1 = 3 := by\n  rfl")
    # The stand-in decides closed arithmetic only: a definition is beyond it, so the verdict is censored, never 0.
    assert scored.reward is None and scored.is_censored and scored.is_standin_verdict
