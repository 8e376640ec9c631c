"""Lean's verdicts shared across runs, in Redis: evaluations and RL runs reuse each other's.

A verdict is a function of the server and the exact code it checked, so the key is the
server's identity (its URL, the version its ``/health`` reports, and how it numbers lines;
trainer.verification.line_numbering) and a SHA-256 digest of the checked code. Evaluating the
same checkpoint twice with the same seed samples the same answers, so the second evaluation
sends nothing to Lean.

Censored verdicts (outages, server errors, the stand-in's "cannot decide") are never stored: an
outage must not stick. The cache is bounded (``verifier.shared_cache_size`` entries): past it,
the least recently used are dropped. It is an optimisation, never a dependency: a Redis that
does not answer makes every lookup a miss and every store a no-op (counted in ``errors``), and
the verdict comes from Lean as before.

Where: the Redis named by the environment variable LEAN_VERDICT_CACHE_URL (the deployment's; the
platform sets it to the trainer's Redis for every Ray job); unset, nothing is shared.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter

from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult

URL_VARIABLE = "LEAN_VERDICT_CACHE_URL"
PREFIX = "lean-verdicts:v1:"
RECENCY = PREFIX + "recency"  # sorted set: digest → last use (seconds since the epoch)
NUMBERING = PREFIX + "numbering:"  # + server digest → the line numbering last probed on it

# Store a verdict and trim to the bound in one step: two runs storing at once, each trimming by the size it
# saw, would otherwise drop twice what is over the bound.
STORE_AND_TRIM = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local dropped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #dropped, 2 do redis.call('DEL', ARGV[5] .. dropped[i]) end
end
"""


def server_digest(url: str, version: str) -> str:
    return hashlib.sha256(f"{url}\x00{version}".encode()).hexdigest()


def verdict_digest(server_identity: str, checked_code: str) -> str:
    return hashlib.sha256(f"{server_identity}\x00{checked_code}".encode()).hexdigest()


def server_version(health: dict) -> str:
    """What names a server's build in its ``/health`` answer: its version where it says one, else the
    whole answer but its status (the stand-in says ``standin: true``, so its verdicts never pass for Lean's)."""
    if health.get("version"):
        return str(health["version"])
    return json.dumps({key: value for key, value in health.items() if key != "status"}, sort_keys=True)


def encode(result: VerificationResult) -> str:
    return json.dumps({
        "verdict": result.verdict.value, "messages": [message.as_dict() for message in result.messages],
        "reasons": list(result.reasons), "is_standin_verdict": result.is_standin_verdict,
        "system_error": result.system_error, "extra": result.extra,
    })


def decode(text: str | bytes) -> VerificationResult:
    data = json.loads(text)
    return VerificationResult(
        Verdict(data["verdict"]), messages=tuple(LeanMessage(**message) for message in data["messages"]),
        reasons=tuple(data["reasons"]), is_standin_verdict=data["is_standin_verdict"],
        system_error=data["system_error"], extra=data["extra"],
    )


class SharedVerdictCache:
    """Async get/put of verdicts in Redis, bounded to ``max_entries`` (least recently used dropped)."""

    def __init__(self, url: str, max_entries: int):
        if max_entries < 1:
            raise ValueError(f"a shared verdict cache needs room for at least 1 entry, got {max_entries}")
        self.url = url
        self.max_entries = max_entries
        self.counts: Counter[str] = Counter()
        self._redis = None
        self._store_and_trim = None  # the script, registered on the client of this event loop

    @classmethod
    def from_environment(cls, max_entries: int) -> SharedVerdictCache | None:
        url = os.environ.get(URL_VARIABLE)
        return cls(url, max_entries) if url and max_entries > 0 else None

    def _client(self):
        if self._redis is None:
            import redis.asyncio

            # Short timeouts: a slow cache must cost less than asking Lean.
            self._redis = redis.asyncio.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)
        return self._redis

    async def get(self, server_identity: str, checked_code: str) -> VerificationResult | None:
        digest = verdict_digest(server_identity, checked_code)
        try:
            stored = await self._client().get(PREFIX + digest)
            if stored is not None:
                await self._client().zadd(RECENCY, {digest: time.time()})
        except Exception:  # noqa: BLE001 - the cache is an optimisation: any Redis failure is a miss
            self.counts["errors"] += 1
            return None
        self.counts["hits" if stored is not None else "misses"] += 1
        return decode(stored) if stored is not None else None

    async def put(self, server_identity: str, checked_code: str, result: VerificationResult) -> None:
        if result.is_censored:
            return  # an outage must not stick
        digest = verdict_digest(server_identity, checked_code)
        try:
            client = self._client()
            if self._store_and_trim is None:
                self._store_and_trim = client.register_script(STORE_AND_TRIM)
            await self._store_and_trim(keys=[PREFIX + digest, RECENCY],
                                       args=[encode(result), digest, time.time(), self.max_entries, PREFIX])
            self.counts["stored"] += 1
        except Exception:  # noqa: BLE001 - the cache is an optimisation: the verdict stands without it
            self.counts["errors"] += 1

    async def known_numbering(self, url: str, version: str) -> str | None:
        try:
            stored = await self._client().get(NUMBERING + server_digest(url, version))
        except Exception:  # noqa: BLE001 - unknown: the verifier probes the server itself
            self.counts["errors"] += 1
            return None
        return stored.decode() if isinstance(stored, bytes) else stored

    async def remember_numbering(self, url: str, version: str, numbering: str) -> None:
        try:
            await self._client().set(NUMBERING + server_digest(url, version), numbering)
        except Exception:  # noqa: BLE001 - a later verifier then probes for itself
            self.counts["errors"] += 1

    def forget_connection(self) -> None:
        """For a new event loop: the old loop's connections cannot be used (nor closed) from it."""
        self._redis = None
        self._store_and_trim = None

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None
            self._store_and_trim = None
