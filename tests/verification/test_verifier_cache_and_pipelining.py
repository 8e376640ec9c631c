"""Identical proofs are verified once; rollouts go to Lean as they finish; in-flight stays bounded."""

import asyncio
import time

from trainer.verification.client import LeanVerifier
from trainer.verification.verdicts import Verdict


def test_an_identical_proof_is_verified_once_and_counted_as_a_cache_hit(fresh_standin, helpers):
    code = helpers.checked("\n  norm_num")
    results, stats = helpers.verify(fresh_standin.url, [code, code, code])
    assert [result.verdict for result in results] == [Verdict.VALID] * 3
    assert fresh_standin.app.snippets_checked == 1 + 1  # the line-numbering probe, then the proof once
    assert stats["cache_misses"] == 1 and stats["cache_hits"] == 2
    assert abs(stats["cache_hit_rate"] - 2 / 3) < 1e-9
    assert sum(result.is_cached for result in results) == 2


def test_the_cache_is_keyed_by_environment_as_well_as_code(fresh_standin, helpers):
    config = helpers.make_config(fresh_standin.url)
    code = helpers.checked("\n  norm_num")

    async def verify_once_in(environment):
        verifier = LeanVerifier(config.verifier, environment=environment)
        try:
            await verifier.verify(code, key="a")
            return verifier._cache_key(code)
        finally:
            await verifier.aclose()

    old_key = asyncio.run(verify_once_in("lean-4.15-mathlib-a"))
    new_key = asyncio.run(verify_once_in("lean-4.19-mathlib-b"))
    assert old_key != new_key


def test_censored_verdicts_are_not_cached(fresh_standin, helpers):
    fresh_standin.app.settings.injected_faults[:] = ["500"] * 2
    code = helpers.checked("\n  norm_num")
    config = helpers.make_config(fresh_standin.url, max_retries=1)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            return await verifier.verify(code, key="a"), await verifier.verify(code, key="b")
        finally:
            await verifier.aclose()

    outage, after = asyncio.run(go())
    assert outage.verdict is Verdict.INFRA_ERROR
    assert after.verdict is Verdict.VALID and not after.is_cached


def test_a_rollout_is_sent_as_soon_as_it_is_finished_not_with_the_whole_batch(fresh_standin, helpers):
    fresh_standin.app.settings.latency_s = 0.4
    config = helpers.make_config(fresh_standin.url)

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        await verifier.line_numbering()  # asked once, when the verifier starts
        started = time.perf_counter()
        finished = {}

        async def rollout(name, generation_seconds, body):
            await asyncio.sleep(generation_seconds)  # the rollout's generation
            await verifier.verify(helpers.checked(body), key=name)
            finished[name] = time.perf_counter() - started

        try:
            await asyncio.gather(rollout("fast", 0.0, "\n  norm_num"), rollout("slow", 0.3, "\n  decide"))
        finally:
            await verifier.aclose()
        return finished

    finished = asyncio.run(go())
    # The fast rollout's verdict is back while the slow one is still with Lean.
    assert finished["fast"] < 0.65
    assert finished["slow"] - finished["fast"] > 0.15


def test_snippets_in_flight_never_exceed_the_limit(fresh_standin, helpers):
    fresh_standin.app.settings.latency_s = 0.05
    codes = [helpers.checked(f"\n  norm_num\n  -- variant {index}") for index in range(24)]
    results, stats = helpers.verify(fresh_standin.url, codes, max_in_flight=4, batch_size=2)
    assert all(result.verdict is Verdict.VALID for result in results)
    assert fresh_standin.app.peak_snippets_in_progress == 4
    assert stats["requests"] >= 12


def test_a_duplicate_whose_first_asker_is_cancelled_still_gets_its_verdict(fresh_standin, helpers):
    fresh_standin.app.settings.latency_s = 0.3
    config = helpers.make_config(fresh_standin.url)
    code = helpers.checked("\n  norm_num")

    async def go():
        verifier = LeanVerifier(config.verifier, environment="standin-test")
        try:
            first = asyncio.ensure_future(verifier.verify(code, key="first"))
            await asyncio.sleep(0.05)
            duplicate = asyncio.ensure_future(verifier.verify(code, key="duplicate"))
            await asyncio.sleep(0.05)
            first.cancel()
            return await duplicate
        finally:
            await verifier.aclose()

    assert asyncio.run(go()).verdict is Verdict.VALID
