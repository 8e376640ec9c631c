"""Both builds of kimina-lean-server, over real HTTP: the verifier learns each one's line numbering.

kimina-lean-server's 2.0.0 image counts message lines after the import header it strips; since
its fix #56 (2025-10-24) it counts lines of the code as sent, still calling itself 2.0.0. The
stand-in answers in either numbering; every answer must land on the same line of the checked code.
"""

import asyncio

import pytest

from trainer.recipe.retry import make_retry
from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin_server import StandinServerThread, StandinSettings
from trainer.verification.verdicts import Verdict

STATEMENT = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"
BOTH_BUILDS = pytest.mark.parametrize("numbering", list(LineNumbering), ids=[n.value for n in LineNumbering])


def score(helpers, server, bodies, after_probe=None):
    """Scores answers with these proof bodies against ``server`` (Lean's timeout: 1 s); returns
    (scored, verifier stats)."""
    config = helpers.make_config(server.url, max_retries=1, timeout_s=1.0)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        scorer = RewardScorer(config, verifier)
        try:
            await verifier.line_numbering()
            if after_probe is not None:
                after_probe()
            scored = [await scorer.score(helpers.problem(), helpers.answer(STATEMENT + body)) for body in bodies]
            return scored, verifier.stats()
        finally:
            await verifier.aclose()

    return asyncio.run(go())


@BOTH_BUILDS
def test_the_verifier_learns_how_the_server_numbers_lines(numbering, helpers):
    with StandinServerThread(StandinSettings(line_numbering=numbering)) as server:
        _, stats = score(helpers, server, [])
    assert stats["line_numbering"] == numbering.value
    assert stats["line_probes"] == 1


@BOTH_BUILDS
def test_an_accepted_proof_scores_one(numbering, helpers):
    with StandinServerThread(StandinSettings(line_numbering=numbering)) as server:
        [accepted], _ = score(helpers, server, ["\n  norm_num"])
    assert accepted.reward == 1.0
    assert accepted.verdict is Verdict.VALID  # its axioms report was found on the #print axioms line


@BOTH_BUILDS
def test_a_lean_error_scores_zero_at_the_failing_tactic(numbering, helpers):
    with StandinServerThread(StandinSettings(line_numbering=numbering)) as server:
        [failed], _ = score(helpers, server, ["\n  norm_num\n  decide"])
    assert failed.reward == 0.0 and failed.verdict is Verdict.LEAN_ERROR
    [error] = failed.verification.errors
    assert failed.checked_code.split("\n")[error.line - 1] == "  decide"
    assert error.column == 2


@BOTH_BUILDS
def test_a_timeout_scores_zero_and_is_not_censored(numbering, helpers):
    with StandinServerThread(StandinSettings(line_numbering=numbering)) as server:
        [timed_out], _ = score(
            helpers, server, ["\n  norm_num"], after_probe=lambda: setattr(server.app.settings, "latency_s", 2.0)
        )
    assert timed_out.reward == 0.0 and not timed_out.is_censored
    assert timed_out.verdict is Verdict.TIMEOUT
    assert "timed out" in timed_out.reasons[0]


@BOTH_BUILDS
def test_a_server_error_is_censored(numbering, helpers):
    with StandinServerThread(StandinSettings(line_numbering=numbering)) as server:
        [outage], _ = score(
            helpers, server, ["\n  norm_num"], after_probe=lambda: server.app.settings.injected_faults.extend(["500"] * 4)
        )
    assert outage.reward is None and outage.is_censored
    assert outage.verdict is Verdict.INFRA_ERROR and "HTTP 500" in outage.reasons[0]


def test_a_server_replaced_by_the_other_build_is_probed_again_after_the_reconnect(helpers):
    """A server that goes away and comes back may be another build: the verifier asks again."""
    first = StandinServerThread(StandinSettings(line_numbering=LineNumbering.AFTER_HEADER))
    port = first.port
    config = helpers.make_config(first.url, max_retries=0)
    code = helpers.checked("\n  norm_num\n  decide")

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            with first:
                before = await verifier.verify(code, key="before")
            during = await verifier.verify(code + "\n", key="during")  # nobody listens: censored
            with StandinServerThread(StandinSettings(line_numbering=LineNumbering.AS_SENT), port=port):
                after = await verifier.verify(code + "\n\n", key="after")
            return before, during, after, verifier.stats()
        finally:
            await verifier.aclose()

    before, during, after, stats = asyncio.run(go())
    assert during.is_censored
    assert stats["line_numbering"] == "as-sent" and stats["line_probes"] == 2
    for result in (before, after):
        [error] = result.errors
        assert error.line == code.body_line + 1  # the `decide`, whichever build answered


def test_a_server_replaced_between_two_proofs_without_a_failed_request_is_probed_again(helpers):
    """A rolling restart: the old server goes, the new build takes its port before the next proof."""
    first = StandinServerThread(StandinSettings(line_numbering=LineNumbering.AS_SENT))
    port = first.port
    config = helpers.make_config(first.url, max_retries=0)
    code = helpers.checked("\n  norm_num\n  decide")

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            with first:
                before = await verifier.verify(code, key="before")
                during = await verifier.verify(code + "\n", key="again")  # the same connection: not asked again
                probes_while_connected = verifier.stats()["line_probes"]
            with StandinServerThread(StandinSettings(line_numbering=LineNumbering.AFTER_HEADER), port=port):
                after = await verifier.verify(code + "\n\n", key="after")
            return before, during, after, probes_while_connected, verifier.stats()
        finally:
            await verifier.aclose()

    before, during, after, probes_while_connected, stats = asyncio.run(go())
    assert probes_while_connected == 1
    assert stats["line_numbering"] == "after-header" and stats["line_probes"] == 2
    for result in (before, during, after):
        assert not result.is_censored
        [error] = result.errors
        assert error.line == code.body_line + 1  # the `decide`, whichever build answered


def test_a_timeout_becomes_a_system_error_retry_as_in_the_release(helpers):
    with StandinServerThread(StandinSettings()) as server:
        [timed_out], _ = score(
            helpers, server, ["\n  norm_num"], after_probe=lambda: setattr(server.app.settings, "latency_s", 2.0)
        )
    config = helpers.make_config(server.url)
    retry = make_retry(
        helpers.problem(), None, helpers.answer(STATEMENT + "\n  norm_num"), timed_out.format_check,
        timed_out.verification, timed_out.checked_code, "s1-p0-r0", 1, config.retry, lambda messages: 100,
    )
    assert retry.feedback == "# System Error:\nError message: \nLean REPL command timed out in 1.0 seconds\n\n"
    assert retry.messages[-1] == {"role": "user", "content": retry.feedback}


def real_server_answer(code, numbering: LineNumbering, messages):
    """A ReplResponse as kimina-lean-server gives it for ``code``: ``messages`` are (line of the checked
    code, severity, text), numbered as ``numbering`` does."""
    from trainer.verification.kimina_compat import ReplResponse

    shift = code.import_line_count if numbering is LineNumbering.AFTER_HEADER else 0
    return ReplResponse(id="replayed", time=1.8, response={"env": 0, "messages": [
        {"severity": severity, "pos": {"line": line - shift, "column": 2},
         "endPos": {"line": line - shift, "column": 10}, "data": text}
        for line, severity, text in messages
    ]})


@BOTH_BUILDS
def test_replayed_answers_of_either_build_are_read_at_the_lines_of_the_checked_code(numbering, helpers):
    from trainer.verification.client import interpret_answer

    code = helpers.checked("\n  nlinarith [sq_nonneg (2 : ℕ)]\n  linarith")
    accepted = real_server_answer(code, numbering, [
        (code.axioms_line, "info", "'two_plus_two' depends on axioms: [propext, Classical.choice, Quot.sound]"),
    ])
    rejected = real_server_answer(code, numbering, [
        (code.body_line + 1, "error", "linarith failed to find a contradiction\ncase a\n⊢ False failed"),
        (code.axioms_line, "info", "'two_plus_two' depends on axioms: [sorryAx]"),
    ])
    assert interpret_answer(accepted, code, line_numbering=numbering).verdict is Verdict.VALID
    result = interpret_answer(rejected, code, line_numbering=numbering)
    assert result.verdict is Verdict.LEAN_ERROR
    assert code.split("\n")[result.errors[0].line - 1] == "  linarith"


def test_the_probe_waits_for_a_cold_server_longer_than_a_proof_may_take(helpers):
    # Every snippet takes 1.5 s here, a proof may take 1 s: the probe (a cold REPL loading Mathlib, on a
    # real server) still gets its answer, and the proof after it runs into Lean's timeout.
    with StandinServerThread(StandinSettings(latency_s=1.5)) as server:
        [result], stats = helpers.verify(server.url, [helpers.checked("\n  norm_num")], timeout_s=1.0)
    assert stats["line_numbering"] == "after-header"
    assert result.verdict is Verdict.TIMEOUT
