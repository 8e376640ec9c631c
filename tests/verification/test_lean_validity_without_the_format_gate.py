"""The release's ``acc``: Lean validity of an answer's proof whatever its format, next to our gated reward."""

import asyncio

from trainer.recipe.reward import RewardScorer, release_proof_body
from trainer.verification.client import LeanVerifier

STATEMENT = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"


def scores(helpers, url, response):
    config = helpers.make_config(url)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        scorer = RewardScorer(config, verifier)
        try:
            scored = await scorer.score(helpers.problem(), response, key="a")
            return scored, await scorer.lean_validity(helpers.problem(), response, scored, key="a-acc")
        finally:
            await verifier.aclose()

    return asyncio.run(go())


def test_a_proof_lean_accepts_in_an_answer_that_fails_the_format_check_is_valid_for_acc_only(standin, helpers):
    no_think_block = f"Here it is.\n```lean4\n{STATEMENT}\n  norm_num\n```"
    scored, lean_valid = scores(helpers, standin.url, no_think_block)
    assert scored.reward == 0.0 and not scored.format_check.is_valid
    assert lean_valid == 1.0


def test_a_well_formed_accepted_answer_counts_for_both_and_a_rejected_one_for_neither(standin, helpers):
    accepted, accepted_valid = scores(helpers, standin.url, helpers.answer(f"{STATEMENT}\n  norm_num"))
    rejected, rejected_valid = scores(helpers, standin.url, helpers.answer(f"{STATEMENT}\n  norm_num\n  decide"))
    assert (accepted.reward, accepted_valid) == (1.0, 1.0)
    assert (rejected.reward, rejected_valid) == (0.0, 0.0)


def test_an_answer_without_the_statement_in_a_lean4_block_has_no_proof_to_check(standin, helpers):
    scored, lean_valid = scores(helpers, standin.url, "I cannot do this.")
    assert lean_valid == 0.0


def test_a_proof_the_stand_in_cannot_decide_is_censored_for_acc_too(standin, helpers):
    _, lean_valid = scores(helpers, standin.url, f"```lean4\n{STATEMENT}\n  linarith\n```")
    assert lean_valid is None


def test_the_release_takes_the_last_block_with_the_statement_outside_a_comment():
    statement = "theorem t (a : ℕ) : a = a := by sorry"
    response = (
        "```lean4\ntheorem t (a : ℕ) : a = a := by\n  simp\n```\n"
        "```lean4\n/- theorem t (a : ℕ) : a = a := by\n  omega -/\n```\n"
        "```lean4\nimport Mathlib\n\ntheorem t (a : ℕ) : a = a := by\n  rfl\n```"
    )
    assert release_proof_body(response, statement) == "\n  rfl"
    assert release_proof_body(response.rsplit("```lean4", 1)[0], statement) == "\n  simp"
    assert release_proof_body("```lean4\ntheorem other : True := by\n  trivial\n```", statement) is None
