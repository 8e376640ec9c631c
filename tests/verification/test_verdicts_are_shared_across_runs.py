"""Lean's verdicts are shared across runs through Redis (trainer/verification/shared_cache.py): a second
identical evaluation sends nothing to Lean; censored verdicts are never shared; the cache stays bounded; a
different server never reuses another's verdicts; a Redis that does not answer costs nothing but the sharing."""

from __future__ import annotations

import asyncio
import os
import re
import uuid

import pytest
import redis

from tests.verification.conftest import checked, make_config
from trainer.verification.client import LeanVerifier
from trainer.verification.shared_cache import PREFIX, RECENCY, SharedVerdictCache
from trainer.verification.standin_server import StandinServerThread, StandinSettings
from trainer.verification.verdicts import Verdict, VerificationResult

PROOFS = ["norm_num", "decide", "rfl", "simp", "omega"]


@pytest.fixture
def redis_url():
    url = os.environ["REDIS_URL"]
    connection = redis.Redis.from_url(url)
    for key in connection.scan_iter(PREFIX + "*"):
        connection.delete(key)
    yield url
    for key in connection.scan_iter(PREFIX + "*"):
        connection.delete(key)


def evaluate(url, codes, cache):
    """One run's verdicts on ``codes`` from a fresh verifier (a new run: an empty cache of its own)."""

    async def go():
        lean = LeanVerifier(make_config(url).verifier, environment=url, shared_cache=cache)
        try:
            return await lean.verify_many([(code, f"k{i}") for i, code in enumerate(codes)]), lean.stats()
        finally:
            await lean.aclose()

    return asyncio.run(go())


def test_a_second_identical_evaluation_sends_nothing_to_lean(redis_url):
    codes = [checked(proof) for proof in PROOFS]
    with StandinServerThread(StandinSettings()) as server:
        first, first_stats = evaluate(server.url, codes, SharedVerdictCache(redis_url, 100))
        requests_after_first = server.app.requests_received
        assert requests_after_first > 0 and first_stats["shared_cache_hits"] == 0
        second, second_stats = evaluate(server.url, codes, SharedVerdictCache(redis_url, 100))
        assert server.app.requests_received == requests_after_first  # not even the line-numbering probe
    assert [r.verdict for r in second] == [r.verdict for r in first]
    assert [r.messages for r in second] == [r.messages for r in first]
    assert all(r.is_cached for r in second)
    assert second_stats["shared_cache_hits"] == len(codes) and second_stats["shared_cache_hit_rate"] == 1.0


def test_without_the_shared_cache_the_second_run_asks_lean_again(redis_url):
    codes = [checked(proof) for proof in PROOFS]
    with StandinServerThread(StandinSettings()) as server:
        evaluate(server.url, codes, None)
        before = server.app.requests_received
        evaluate(server.url, codes, None)
        assert server.app.requests_received > before


def test_censored_verdicts_are_never_shared(redis_url):
    outside_the_fragment = checked("nlinarith [sq_nonneg (x - 1)]",
                                   statement="theorem t (x : ℝ) : 0 ≤ (x - 1) ^ 2 := by")
    with StandinServerThread(StandinSettings()) as server:
        (first,), _ = evaluate(server.url, [outside_the_fragment], SharedVerdictCache(redis_url, 100))
        assert first.is_censored
        before = server.app.requests_received
        (second,), stats = evaluate(server.url, [outside_the_fragment], SharedVerdictCache(redis_url, 100))
        assert server.app.requests_received > before and stats["shared_cache_hits"] == 0


def test_another_server_never_reuses_the_first_ones_verdicts(redis_url):
    codes = [checked("norm_num")]
    with StandinServerThread(StandinSettings()) as first_server, StandinServerThread(StandinSettings()) as other:
        evaluate(first_server.url, codes, SharedVerdictCache(redis_url, 100))
        _, stats = evaluate(other.url, codes, SharedVerdictCache(redis_url, 100))
        assert stats["shared_cache_hits"] == 0 and other.app.requests_received > 0


def test_the_cache_keeps_at_most_its_size_dropping_the_least_recently_used(redis_url):
    codes = [checked(f"norm_num -- {uuid.uuid4()}") for _ in range(7)]
    with StandinServerThread(StandinSettings()) as server:
        evaluate(server.url, codes, SharedVerdictCache(redis_url, 3))
    connection = redis.Redis.from_url(redis_url)
    assert connection.zcard(RECENCY) == 3
    verdict_keys = [key for key in connection.scan_iter(PREFIX + "*")
                    if re.fullmatch(re.escape(PREFIX).encode() + rb"[0-9a-f]{64}", key)]
    assert len(verdict_keys) == 3


def test_runs_storing_at_the_same_moment_leave_exactly_the_bound(redis_url):
    """Each store trims what is over the bound; two stores that each saw the set over it must not both trim."""
    verdict = VerificationResult(Verdict.VALID, is_standin_verdict=True)

    async def store_racing():
        caches = [SharedVerdictCache(redis_url, 3) for _ in range(8)]
        await asyncio.gather(*(cache.put("server", f"norm_num -- {run} {n}", verdict)
                               for run, cache in enumerate(caches) for n in range(5)))
        for cache in caches:
            await cache.aclose()
        return caches

    caches = asyncio.run(store_racing())
    assert sum(cache.counts["stored"] for cache in caches) == 40
    connection = redis.Redis.from_url(redis_url)
    assert connection.zcard(RECENCY) == 3
    assert len([key for key in connection.scan_iter(PREFIX + "*")
                if re.fullmatch(re.escape(PREFIX).encode() + rb"[0-9a-f]{64}", key)]) == 3


def test_a_redis_that_does_not_answer_leaves_the_verdicts_to_lean():
    codes = [checked("norm_num")]
    unreachable = SharedVerdictCache("redis://127.0.0.1:9/0", 100)
    with StandinServerThread(StandinSettings()) as server:
        (result,), stats = evaluate(server.url, codes, unreachable)
    assert not result.is_censored and stats["shared_cache_hits"] == 0 and unreachable.counts["errors"] > 0
