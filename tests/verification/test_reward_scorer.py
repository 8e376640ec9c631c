"""The reward of an answer: format, integrity, then Lean; every zero with its reason."""

import asyncio

from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier
from trainer.verification.verdicts import Verdict, VerificationResult

STATEMENT = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"


def score(url, helpers, response, statement=STATEMENT, **scorer_args):
    config = helpers.make_config(url)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await RewardScorer(config, verifier).score(helpers.problem(statement), response, **scorer_args)
        finally:
            await verifier.aclose()

    return asyncio.run(go())


def test_a_proof_lean_accepts_earns_one(standin, helpers):
    scored = score(standin.url, helpers, helpers.answer(STATEMENT + "\n  norm_num"))
    assert scored.reward == 1.0
    assert scored.reasons == []
    assert scored.is_standin_verdict and not scored.is_censored
    assert scored.checked_code.rstrip().endswith("#print axioms two_plus_two")
    sent_at, verdict_at = scored.lean_interval  # when the proof left for Lean and its verdict came back
    assert sent_at <= verdict_at


def test_a_proof_is_timed_from_when_it_leaves_for_lean_to_its_verdict(fresh_standin, helpers):
    import time

    fresh_standin.app.settings.latency_s = 0.2
    before = time.time()
    scored = score(fresh_standin.url, helpers, helpers.answer(STATEMENT + "\n  norm_num"))
    after = time.time()
    sent_at, verdict_at = scored.lean_interval
    assert before <= sent_at and verdict_at <= after
    assert verdict_at - sent_at >= 0.2  # the stand-in's latency lies inside the interval


def test_a_badly_formatted_answer_earns_zero_without_asking_lean(fresh_standin, helpers):
    scored = score(fresh_standin.url, helpers, "no think block, no code")
    assert scored.reward == 0.0
    assert scored.verification is None
    assert scored.reasons[0].startswith("format:")
    assert fresh_standin.app.requests_received == 0
    assert scored.lean_interval is None  # so a step of such answers has no "lean" phase


def test_an_integrity_violation_earns_zero_with_its_reason_without_asking_lean(fresh_standin, helpers):
    scored = score(fresh_standin.url, helpers, helpers.answer(STATEMENT + "\n  norm_num\n#exit"))
    assert scored.reward == 0.0
    assert scored.verification.verdict is Verdict.REJECTED
    assert "#" in scored.reasons[0]
    assert fresh_standin.app.requests_received == 0
    assert scored.lean_interval is None


def test_lean_checks_the_canonical_statement_not_the_models_copy(standin, helpers):
    # The model re-states a weaker (false) theorem after the canonical one; only the body is kept,
    # and the body may not declare theorems.
    cheat = STATEMENT + "\n  norm_num\ntheorem two_plus_two' : True := trivial"
    scored = score(standin.url, helpers, helpers.answer(cheat))
    assert scored.reward == 0.0
    assert any("theorem" in reason for reason in scored.reasons)
    assert scored.checked_code.count("theorem two_plus_two :") == 1


def test_a_wrong_proof_earns_zero_with_leans_error_as_the_reason(standin, helpers):
    scored = score(standin.url, helpers, helpers.answer(STATEMENT + "\n  rfl\n  rfl"))
    assert scored.reward == 0.0
    assert scored.verification.verdict is Verdict.LEAN_ERROR
    assert "no goals" in scored.reasons[0]


def test_an_undecided_proof_is_censored_not_zero(standin, helpers):
    scored = score(standin.url, helpers, helpers.answer(STATEMENT + "\n  linarith"))
    assert scored.reward is None
    assert scored.is_censored
    assert "cannot decide" in scored.reasons[0]


def test_the_length_penalty_scales_the_reward_when_the_run_turns_it_on(standin, helpers):
    config = helpers.make_config(standin.url)
    config = config.model_copy(update={"reward": config.reward.model_copy(update={"length_penalty_start_tokens": 100})})

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            scorer = RewardScorer(config, verifier)
            return await scorer.score(helpers.problem(), helpers.answer(STATEMENT + "\n  norm_num"), 150, 200)
        finally:
            await verifier.aclose()

    assert asyncio.run(go()).reward == 0.5


def test_the_runs_axioms_rule_applies_even_to_a_lenient_verifier(helpers):
    class LenientVerifier:
        async def verify(self, checked_code, *, key):
            return VerificationResult(Verdict.VALID, extra={"axioms": ["propext", "Lean.ofReduceBool"]})

    config = helpers.make_config("http://127.0.0.1:9")
    scored = asyncio.run(RewardScorer(config, LenientVerifier()).score(helpers.problem(), helpers.answer(STATEMENT + "\n  decide")))
    assert scored.reward == 0.0
    assert scored.verification.verdict is Verdict.REJECTED
    assert "Lean.ofReduceBool" in scored.reasons[0]


def test_a_well_formed_answer_whose_statement_copy_cannot_be_located_earns_zero_without_asking_lean(fresh_standin, helpers):
    # The release's check compares letters (":= by" is inside ":= by_contra"), so the format is
    # valid; but no proof body follows a whole-token copy of the statement, so there is nothing
    # to check (the release would send "_contra h …" after the statement, which Lean rejects).
    glued = STATEMENT.replace(":= by", ":= by_contra h") + "\n  norm_num"
    scored = score(fresh_standin.url, helpers, helpers.answer(glued))
    assert scored.format_check.is_valid and scored.format_check.proof_body is None
    assert scored.reward == 0.0 and scored.verification is None
    assert "no whole-token copy of the statement" in scored.reasons[0]
    assert fresh_standin.app.requests_received == 0
