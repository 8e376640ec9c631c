"""The second check on every accepted proof (the guard): the theorem proved is the promptset's, by its name and
statement, and it rests only on propext, Classical.choice and Quot.sound, as Lean's ``#print axioms`` reports.

Two layers, both against the stand-in Lean server through the real client. The answers a model writes are refused
before Lean by the integrity rules (trainer/verification/integrity.py); code that slipped past them (hand-built
here as if they had missed it) is refused by what the stand-in answers to our ``#print axioms`` query. Every
refusal scores 0 with its reason and the verdict ``rejected``, never censored.
"""

from __future__ import annotations

import asyncio

import pytest

from trainer.recipe.reward import RewardScorer
from trainer.verification.checked_code import CheckedCode, layout_of
from trainer.verification.client import LeanVerifier
from trainer.verification.verdicts import Verdict

STATEMENT = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"
HEADER = "import Mathlib\n\n"


def score(url, helpers, response):
    config = helpers.make_config(url)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await RewardScorer(config, verifier).score(helpers.problem(STATEMENT), response)
        finally:
            await verifier.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(("body", "verdict", "reason"), [
    ("\n  norm_num\n\ntheorem two_plus_two' : (2 : ℕ) + 2 = 4 := by\n  norm_num", Verdict.REJECTED,
     "command keyword 'theorem'"),
    ("\n  exact sorryAx _ false", Verdict.REJECTED, "uses sorryAx"),
    # The release's own format check refuses the letters "axiom" first (reward.axiom_check_by_token).
    ("\n  exact cheat\naxiom cheat : (2 : ℕ) + 2 = 4", None, "axiom"),
], ids=["declares another theorem", "sorryAx", "a new axiom"])
def test_an_answer_whose_body_declares_another_theorem_or_uses_sorryAx_or_an_axiom_earns_0_with_the_reason(
        standin, helpers, body, verdict, reason):
    scored = score(standin.url, helpers, helpers.answer(STATEMENT + body))
    assert scored.reward == 0.0 and not scored.is_censored
    assert scored.verdict is verdict
    assert any(reason in text for text in scored.reasons), scored.reasons
    assert scored.lean_interval is None  # refused before Lean: whatever Lean said, it would earn nothing


def test_an_answer_that_proves_a_renamed_theorem_never_has_its_own_statement_checked(standin, helpers):
    scored = score(standin.url, helpers, helpers.answer("theorem easier : (2 : ℕ) + 2 = 4 := by\n  norm_num"))
    assert scored.reward == 0.0 and scored.verification is None  # no copy of the promptset's statement


def code_past_the_integrity_rules(declarations: str, theorem: str, query_name: str) -> CheckedCode:
    text = f"{HEADER}{declarations}{theorem}\n\n#print axioms {query_name}\n"
    return CheckedCode(text, **{**layout_of(text), "theorem_name": "two_plus_two"})


def test_a_proof_resting_on_a_new_axiom_is_refused_by_lean_s_axioms_report(standin, helpers):
    code = code_past_the_integrity_rules("axiom cheat : (2 : ℕ) + 2 = 4\n\n",
                                         f"{STATEMENT}\n  exact cheat", "two_plus_two")
    (result,), _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.REJECTED and not result.is_censored
    assert result.extra["axioms"] == ["cheat"]
    assert "non-standard axioms cheat" in result.reasons[0]


def test_a_proof_whose_axioms_report_is_about_another_theorem_is_refused(standin, helpers):
    code = code_past_the_integrity_rules("theorem other : (1 : ℕ) + 1 = 2 := by\n  norm_num\n\n",
                                         f"{STATEMENT}\n  norm_num", "other")
    (result,), _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.REJECTED
    assert "names 'other', not the checked theorem 'two_plus_two'" in result.reasons[0]


def test_a_proof_with_a_gap_rests_on_sorryAx_and_is_refused(standin, helpers):
    code = code_past_the_integrity_rules("", f"{STATEMENT}\n  sorry", "two_plus_two")
    (result,), _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.SORRY and not result.is_censored
    assert any("depends on axioms: [sorryAx]" in message.text for message in result.messages)


def test_a_proof_on_the_standard_axioms_alone_is_accepted(standin, helpers):
    code = code_past_the_integrity_rules("", f"{STATEMENT}\n  norm_num", "two_plus_two")
    (result,), _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.VALID
    assert set(result.extra["axioms"]) <= {"propext", "Classical.choice", "Quot.sound"}


def test_the_stand_in_cannot_decide_an_axiom_applied_to_a_goal_it_does_not_state(standin, helpers):
    code = code_past_the_integrity_rules("axiom cheat : (2 : ℕ) + 2 = 5\n\n", f"{STATEMENT}\n  exact cheat", "two_plus_two")
    (result,), _ = helpers.verify(standin.url, [code])
    assert result.is_censored  # not sure what Lean would say: never a made-up verdict
