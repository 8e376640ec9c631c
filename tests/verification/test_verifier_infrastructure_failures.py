"""Server errors, hangs, refused keys and dead servers are censored (infra_error), never a reward of 0."""

import asyncio
import socket

from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread, StandinSettings
from trainer.verification.verdicts import Verdict


def test_a_server_error_is_retried_and_then_answered(fresh_standin, helpers):
    faults = fresh_standin.app.settings.injected_faults
    [result], stats = helpers.verify(
        fresh_standin.url, [helpers.checked("\n  norm_num")], after_probe=lambda: faults.extend(["500", "502"])
    )
    assert result.verdict is Verdict.VALID
    assert stats["retries"] == 2


def test_a_server_that_keeps_failing_gives_infra_error_after_the_retries(fresh_standin, helpers):
    faults = fresh_standin.app.settings.injected_faults
    [result], _ = helpers.verify(
        fresh_standin.url, [helpers.checked("\n  norm_num")], max_retries=2, after_probe=lambda: faults.extend(["500"] * 10)
    )
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored
    assert "HTTP 500" in result.reasons[0] and "after 3 tries" in result.reasons[0]
    assert fresh_standin.app.requests_received == 1 + 3  # the probe, then the proof's three tries


def test_a_server_that_fails_the_line_numbering_probe_censors_the_proofs_with_the_reason(fresh_standin, helpers):
    fresh_standin.app.settings.injected_faults[:] = ["500"] * 10
    [result], stats = helpers.verify(fresh_standin.url, [helpers.checked("\n  norm_num")], max_retries=2)
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored
    assert "numbers lines" in result.reasons[0] and "HTTP 500" in result.reasons[0] and "after 3 tries" in result.reasons[0]
    assert stats["line_numbering"] is None


def test_a_batch_failed_with_500_is_retried_snippet_by_snippet(fresh_standin, helpers):
    codes = [helpers.checked(body) for body in ("\n  norm_num", "\n  decide", "\n  sorry")]
    results, _ = helpers.verify(
        fresh_standin.url, codes, after_probe=lambda: fresh_standin.app.settings.injected_faults.append("500")
    )
    assert [result.verdict for result in results] == [Verdict.VALID, Verdict.VALID, Verdict.SORRY]
    assert fresh_standin.app.requests_received == 1 + 1 + 3  # the probe, the batch, each snippet alone


def test_a_server_that_never_answers_is_an_infra_error(fresh_standin, helpers):
    faults = fresh_standin.app.settings.injected_faults
    [result], _ = helpers.verify(
        fresh_standin.url, [helpers.checked("\n  norm_num")], timeout_s=0.5, http_timeout_margin_s=0.5,
        after_probe=lambda: faults.append("hang"),
    )
    assert result.verdict is Verdict.INFRA_ERROR
    assert "did not answer" in result.reasons[0]


def test_a_garbled_response_is_an_infra_error(fresh_standin, helpers):
    fresh_standin.app.settings.injected_faults[:] = ["garbage"] * 4
    [result], _ = helpers.verify(fresh_standin.url, [helpers.checked("\n  norm_num")])
    assert result.verdict is Verdict.INFRA_ERROR
    assert "bad response" in result.reasons[0]


def test_a_refused_api_key_is_an_infra_error_that_says_to_set_the_key(helpers):
    with StandinServerThread(StandinSettings(api_key="the-right-key")) as server:
        [refused], _ = helpers.verify(server.url, [helpers.checked("\n  norm_num")], api_key="a-wrong-key")
        [missing], _ = helpers.verify(server.url, [helpers.checked("\n  norm_num")])
        [accepted], _ = helpers.verify(server.url, [helpers.checked("\n  norm_num")], api_key="the-right-key")
    assert refused.verdict is missing.verdict is Verdict.INFRA_ERROR
    assert "401" in refused.reasons[0] and "verifier.api_key" in refused.reasons[0]
    assert accepted.verdict is Verdict.VALID


def test_a_refused_connection_is_an_infra_error(helpers):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    [result], _ = helpers.verify(dead_url, [helpers.checked("\n  norm_num")], max_retries=1)
    assert result.verdict is Verdict.INFRA_ERROR
    assert "unreachable" in result.reasons[0]


def test_an_outage_scores_none_never_zero(fresh_standin, helpers):
    fresh_standin.app.settings.injected_faults[:] = ["503"] * 10
    config = helpers.make_config(fresh_standin.url, max_retries=1)
    lean_code = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by\n  norm_num"

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await RewardScorer(config, verifier).score(helpers.problem(), helpers.answer(lean_code))
        finally:
            await verifier.aclose()

    scored = asyncio.run(go())
    assert scored.reward is None
    assert scored.is_censored
    assert scored.verification.verdict is Verdict.INFRA_ERROR


def test_keeping_snippets_in_flight_at_the_servers_repl_count_avoids_its_429s(fresh_standin, helpers):
    settings = fresh_standin.app.settings
    settings.max_concurrency, settings.latency_s, settings.max_wait_s = 1, 0.1, 0.05
    codes = [helpers.checked(f"\n  norm_num\n  -- attempt {index}") for index in range(3)]
    overloaded, _ = helpers.verify(fresh_standin.url, codes, max_in_flight=3, max_retries=0)
    assert any(result.verdict is Verdict.INFRA_ERROR and "429" in result.reasons[0] for result in overloaded)
    within, _ = helpers.verify(fresh_standin.url, [helpers.checked(f"\n  decide\n  -- {i}") for i in range(3)], max_in_flight=1)
    assert all(result.verdict is Verdict.VALID for result in within)
