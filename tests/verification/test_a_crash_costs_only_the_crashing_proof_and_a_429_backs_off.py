"""The client against the real server's failures, as the stand-in now gives them (issue 44).

kimina-lean-server turns a whole request into HTTP 500 when one proof's REPL crashes, so the client sends
that batch's proofs again one by one: only the crashing proof ends "could not check" (censored, never 0),
its neighbours get their own verdicts, and a server failing everything costs a batch 1 + batch_size
requests, no more. A 429 (no free REPL) backs off and sends the same batch again, whole. A Lean timeout
is the proof's own 0, as in the release; an import that times out is censored."""

import asyncio

from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier
from trainer.verification.verdicts import Verdict


def crashing(body: str, fault: str) -> str:
    return f"{body}\n  -- lean-standin fault: {fault}"


def test_a_crash_costs_only_the_crashing_proof_which_is_censored_never_scored_zero(fresh_standin, helpers):
    codes = [helpers.checked(body) for body in ("\n  norm_num", crashing("\n  decide", "crash"), "\n  sorry")]
    results, stats = helpers.verify(fresh_standin.url, codes)
    valid, crashed, with_sorry = results
    assert valid.verdict is Verdict.VALID and with_sorry.verdict is Verdict.SORRY  # the neighbours' own verdicts
    assert crashed.verdict is Verdict.INFRA_ERROR and crashed.is_censored
    assert "HTTP 500: JSON decode error" in crashed.reasons[0] and "checked alone" in crashed.reasons[0]
    assert fresh_standin.app.requests_received == 1 + 1 + 3  # the probe, the batch, each proof alone, once
    assert stats["batches_split"] == 1


def test_a_crashing_proof_scores_none_not_zero(fresh_standin, helpers):
    config = helpers.make_config(fresh_standin.url)
    lean_code = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by\n  norm_num\n  -- lean-standin fault: long-line"

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await RewardScorer(config, verifier).score(helpers.problem(), helpers.answer(lean_code))
        finally:
            await verifier.aclose()

    scored = asyncio.run(go())
    assert scored.reward is None and scored.is_censored
    assert "Failed to read from REPL stdout" in scored.verification.reasons[0]


def test_a_server_failing_every_request_with_500_costs_a_batch_one_request_per_proof_and_no_more(fresh_standin, helpers):
    codes = [helpers.checked(f"\n  norm_num\n  -- proof {index}") for index in range(4)]
    results, _ = helpers.verify(fresh_standin.url, codes, max_retries=3,
                                after_probe=lambda: fresh_standin.app.settings.injected_faults.extend(["500"] * 50))
    assert all(result.verdict is Verdict.INFRA_ERROR and result.is_censored for result in results)
    assert fresh_standin.app.requests_received == 1 + 1 + 4  # the probe, the batch, each proof alone; no retries


def test_a_429_backs_off_and_sends_the_same_batch_again_whole(fresh_standin, helpers):
    codes = [helpers.checked(body) for body in ("\n  norm_num", "\n  decide", "\n  sorry")]
    results, stats = helpers.verify(fresh_standin.url, codes,
                                    after_probe=lambda: fresh_standin.app.settings.injected_faults.append("429"))
    assert [result.verdict for result in results] == [Verdict.VALID, Verdict.VALID, Verdict.SORRY]
    # Split, it would ask a server without a free REPL for three REPLs instead of one batch's.
    assert fresh_standin.app.requests_received == 1 + 1 + 1  # the probe, the 429, the batch again
    assert stats["retries"] == 1 and stats["batches_split"] == 0


def test_a_429_that_lasts_is_censored_after_the_retries(fresh_standin, helpers):
    code = helpers.checked(crashing("\n  norm_num", "no-repl"))
    [result], _ = helpers.verify(fresh_standin.url, [code], max_retries=2)
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored
    assert "HTTP 429: No available REPLs" in result.reasons[0] and "after 3 tries" in result.reasons[0]


def test_a_lean_timeout_is_the_proofs_zero_as_in_the_release_and_its_neighbour_keeps_its_verdict(fresh_standin, helpers):
    config = helpers.make_config(fresh_standin.url, timeout_s=1.0)
    slow = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by\n  norm_num\n  -- lean-standin fault: timeout"
    quick = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by\n  decide"

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        scorer = RewardScorer(config, verifier)
        try:
            return await asyncio.gather(*(scorer.score(helpers.problem(), helpers.answer(code)) for code in (slow, quick)))
        finally:
            await verifier.aclose()

    timed_out, answered = asyncio.run(go())
    assert timed_out.verification.verdict is Verdict.TIMEOUT and not timed_out.is_censored
    assert timed_out.reward == 0.0
    assert "Lean REPL command timed out in 1.0 seconds" in timed_out.verification.reasons[0]
    assert answered.verification.verdict is Verdict.VALID and answered.reward == 1.0


def test_an_import_header_timeout_is_censored_not_the_proofs_zero(fresh_standin, helpers):
    [result], _ = helpers.verify(fresh_standin.url, [helpers.checked(crashing("\n  norm_num", "header-timeout"))],
                                 timeout_s=1.0)
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored
    assert "header command timed out" in result.reasons[0]
