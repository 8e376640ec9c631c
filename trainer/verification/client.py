"""The trainer's Lean client: kimina-lean-server's API at RL scale.

Each training step sends thousands of proofs to Lean. ``LeanVerifier.verify`` is called
once per rollout, as soon as that rollout is finished, so verification overlaps generation;
snippets that become ready in the same event-loop turn share one HTTP request (up to
``batch_size``). At most ``max_in_flight`` snippets are in flight: keep it at or below
the server's REPL count, since a server without a free REPL fails the whole batch.

Requests and responses are kimina-client's own models (``CheckRequest``,
``CheckResponse``) over one pooled ``httpx.AsyncClient`` of ours. Its async ``check()`` is
as fast on a fixed list (benchmarks/verifier_throughput.py measures both against its
sync ``check()`` and the ceiling), but it takes only fixed lists (no pipelining), fails a
whole batch together, returns results in completion order and gives plain strings random
ids; we send ids we made and match results by id. No proxy is read from the environment; the
API key is sent only when one is set.

Failed requests, by what kimina-lean-server means by them (``standin_server`` imitates each):

- HTTP 500 is one proof's REPL crashing (or printing a line that is not JSON, or one over 64 KiB),
  which loses the whole request's results. A batch of several is therefore sent again snippet by
  snippet, once: the crashing proof alone fails again and is censored ("could not check", never
  0), its neighbours get their own verdicts. A proof split out of a batch that fails with 500
  again is not retried, so a server that fails everything costs a batch 1 + ``batch_size``
  requests, never more. A bad response body is treated the same way.
- 429 (no REPL free within the server's MAX_WAIT), 502–504 and transport errors say the server
  cannot take the request now: the same batch, whole, is sent again after an exponential,
  jittered backoff (splitting it would only ask the busy server for more), up to
  ``max_retries`` times.
- A lone proof (a batch of one) is retried on any of these, up to ``max_retries`` times.

Verdicts: Lean's messages decide ``valid`` / ``sorry`` / ``lean_error``; a sorry that
shows only as the "declaration uses 'sorry'" warning is caught here (kimina-client's
``analyze()`` misses it). A proof that runs into Lean's timeout is ``timeout``: the proof's
fault, scored 0, as in the release (which recognises it, as kimina-client does, by "timed
out" in the server's error). Server errors, unreachable servers, bad responses, the
environment's imports timing out and the stand-in's "cannot decide" are censored
(``infra_error``): a Lean outage is not a wrong proof.

Line numbers: before its first snippet, and again after every reconnect (a failed connection,
or a request that leaves an idle verifier over a new connection: the server may have been
replaced meanwhile), the verifier asks the server how it numbers lines
(``trainer.verification.line_numbering``); every message is converted once, here, into lines of
the checked code. A proof Lean accepts must also pass the axioms check:
the ``#print axioms`` answer at the end of the checked code may name only the standard
three, otherwise the verdict is ``rejected``.

Verdicts are cached by (environment, checked code): an identical proof is verified once
across rollouts (and concurrent duplicates wait for the first). Censored verdicts are not
cached, so an outage does not stick.

Why one piece: batching, the in-flight bound, retries, the verdict cache and the mapping of the
server's answers to verdicts act on the same requests; a verdict's path from request to score reads
in one file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

import httpx

from trainer.verification.checked_code import CheckedCode
from trainer.verification.integrity import disallowed_axioms, parse_axioms_report
from trainer.verification.kimina_compat import CheckRequest, CheckResponse, ReplResponse, Snippet
from trainer.verification.line_numbering import PROBE_CODE, LineNumbering, ProbeFailed, numbering_from_probe
from trainer.verification.shared_cache import server_version
from trainer.verification.standin_server import CANNOT_DECIDE_PREFIX, STANDIN_HEADER
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult, Verifier, lean_text_in_one_line

# Newer Lean quotes the name differently (`sorry`, 'sorry', or not at all).
_SORRY_WARNING = re.compile(r"declaration uses ['`‘]?sorry")


_PROBE_ID = "line-numbering-probe"
# The probe may be the first snippet of its import header on a cold server, which then loads
# Mathlib before it answers: it gets at least this long (it is sent once per start or reconnect).
_PROBE_MIN_TIMEOUT_S = 300.0


class _Recovery(Enum):
    """What a failed request calls for (see the module's docstring)."""

    NONE = "none"  # the same request would fail the same way: the failure is the answer
    BACK_OFF = "back off"  # the server cannot take it now: the same batch again, later
    SPLIT = "split"  # the server failed on the batch, perhaps because of one proof: each proof alone


@dataclass(frozen=True)
class _Failure:
    """No Lean answer for a snippet, and why: always censored."""

    reason: str


@dataclass(frozen=True)
class _Answer:
    outcome: Any  # ReplResponse or _Failure
    is_standin: bool
    numbering: LineNumbering | None = None  # how the server that answered numbers lines


@dataclass
class _Pending:
    snippet_id: str
    code: str
    future: asyncio.Future


def interpret_answer(
    response: ReplResponse,
    checked_code: str,
    *,
    line_numbering: LineNumbering,
    is_standin: bool = False,
    allow_native_decide: bool = False,
) -> VerificationResult:
    """Lean's answer to one snippet, as a verdict with messages in the checked code's lines.

    ``line_numbering`` is how the server that answered counts lines (its probe's finding).
    """
    code = checked_code if isinstance(checked_code, CheckedCode) else CheckedCode(checked_code)
    if response.error is not None:
        if response.error.startswith(CANNOT_DECIDE_PREFIX):
            why = response.error[len(CANNOT_DECIDE_PREFIX) :]
            return VerificationResult(
                Verdict.INFRA_ERROR,
                reasons=(f"the stand-in Lean server cannot decide this proof ({why}); censored, not scored",),
                is_standin_verdict=True,
            )
        if "timed out" in response.error:
            if "header" in response.error:
                # kimina-lean-server's "Lean REPL header command timed out": loading our imports
                # took too long, before the proof ran. The environment's fault, not the proof's.
                return VerificationResult(
                    Verdict.INFRA_ERROR,
                    reasons=(f"the Lean server timed out loading the imports, before the proof ran ({response.error}); "
                             "censored, not scored",),
                    is_standin_verdict=is_standin,
                )
            return VerificationResult(
                Verdict.TIMEOUT,
                reasons=(f"Lean timed out on the proof ({response.error}): scored 0, as in the release",),
                is_standin_verdict=is_standin,
                system_error=response.error,
            )
        return VerificationResult(
            Verdict.INFRA_ERROR,
            reasons=(f"the Lean server failed on this snippet: {response.error}; censored, not scored",),
            is_standin_verdict=is_standin,
        )
    answer = response.response or {}
    if "message" in answer:
        return VerificationResult(
            Verdict.INFRA_ERROR,
            reasons=(f"the Lean REPL failed: {answer['message']}; censored, not scored",),
            is_standin_verdict=is_standin,
        )
    messages = tuple(_lean_message(raw, code, line_numbering) for raw in answer.get("messages") or ())
    errors = [message for message in messages if message.severity == "error"]
    if errors:
        first = errors[0]
        return VerificationResult(
            Verdict.LEAN_ERROR,
            messages,
            reasons=(f"Lean rejected the proof at line {first.line}: {lean_text_in_one_line(first.text)}",),
            is_standin_verdict=is_standin,
        )
    if answer.get("sorries") or any(
        message.severity == "warning" and _SORRY_WARNING.search(message.text) for message in messages
    ):
        return VerificationResult(
            Verdict.SORRY, messages, reasons=("the proof uses sorry: Lean accepted it only with a gap",), is_standin_verdict=is_standin
        )
    extra: dict[str, Any] = {}
    if code.axioms_line is not None:
        report = next(
            (
                parse_axioms_report(message.text)
                for message in messages
                if message.severity == "info" and message.line == code.axioms_line and parse_axioms_report(message.text)
            ),
            None,
        )
        if report is None:
            return VerificationResult(
                Verdict.REJECTED,
                messages,
                reasons=(f"Lean gave no axioms report for {code.theorem_name!r}: the proof cannot be certified",),
                is_standin_verdict=is_standin,
            )
        name, axioms = report
        extra["axioms"] = axioms
        if name != code.theorem_name:
            return VerificationResult(
                Verdict.REJECTED,
                messages,
                reasons=(f"the axioms report names {name!r}, not the checked theorem {code.theorem_name!r}",),
                is_standin_verdict=is_standin,
                extra=extra,
            )
        extra_axioms = disallowed_axioms(axioms, allow_native_decide=allow_native_decide)
        if extra_axioms:
            return VerificationResult(
                Verdict.REJECTED,
                messages,
                reasons=(
                    f"the proof depends on non-standard axioms {', '.join(extra_axioms)}; "
                    "only propext, Classical.choice and Quot.sound are accepted",
                ),
                is_standin_verdict=is_standin,
                extra=extra,
            )
    return VerificationResult(Verdict.VALID, messages, is_standin_verdict=is_standin, extra=extra)


def _lean_message(raw: dict, code: CheckedCode, numbering: LineNumbering) -> LeanMessage:
    position = raw.get("pos") or {}
    end = raw.get("endPos") or {}
    return LeanMessage(
        severity=raw.get("severity", "info"),
        text=raw.get("data", ""),
        line=code.lean_line_to_code_line(position.get("line"), numbering),
        column=position.get("column"),
        end_line=code.lean_line_to_code_line(end.get("line"), numbering),
        end_column=end.get("column"),
    )


class LeanVerifier:
    """An async client of one Lean environment (a header, a Lean and Mathlib version) at ``config.url``.

    ``environment`` names that environment in the cache key: give a new name whenever the
    server's Lean or Mathlib changes, or old verdicts would be reused.
    """

    def __init__(self, config, *, environment: str, allow_native_decide: bool = False, shared_cache=None):
        self.config = config
        self.environment = environment
        self.allow_native_decide = allow_native_decide
        # Verdicts shared across runs (trainer/verification/shared_cache.py), asked after this run's own cache.
        self.shared_cache = shared_cache
        self._server_identity: str | None = None
        self._identity_lock: asyncio.Lock | None = None
        self._cache: OrderedDict[str, VerificationResult] = OrderedDict()
        self._in_progress: dict[str, asyncio.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None
        self._queue: list[_Pending] = []
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self._next_id = 0
        self._counts: Counter[str] = Counter()
        # How the server numbers lines: None until probed, and again after a reconnect.
        self._numbering: LineNumbering | None = None
        self._numbering_lock: asyncio.Lock | None = None
        self._probes_started = 0
        self._last_probe_failure: ProbeFailed | None = None
        self._requests_in_flight = 0
        # Whether the server is the stand-in, as its latest answer said (the stand-in marks every response, /health's
        # included, with STANDIN_HEADER); None until it has answered.
        self._is_standin: bool | None = None

    # ------------------------------------------------------------------ public

    @property
    def verified_by(self) -> Verifier | None:
        """Which verifier judges this client's answers: the stand-in or real Lean, as the server's latest answer said
        (a run asks /health at start-up, so it knows before its first answer); None until the server has answered."""
        if self._is_standin is None:
            return None
        return Verifier.STANDIN if self._is_standin else Verifier.LEAN

    async def verify(self, checked_code: str, *, key: str) -> VerificationResult:
        """Lean's verdict on ``checked_code`` (``key`` names the rollout in ids and logs)."""
        started = time.perf_counter()
        cache_key = self._cache_key(checked_code)
        cached = self._cache.get(cache_key)
        if cached is not None:
            self._cache.move_to_end(cache_key)
            self._counts["cache_hits"] += 1
            self._count_verdict(cached)
            return _with(cached, is_cached=True, seconds=0.0)
        waiting = self._in_progress.get(cache_key)
        if waiting is not None:
            try:
                result = await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if not waiting.cancelled():
                    raise  # this caller was cancelled
                return await self.verify(checked_code, key=key)  # the first asker was: ask again
            self._counts["cache_hits"] += 1
            self._count_verdict(result)
            return _with(result, is_cached=True, seconds=time.perf_counter() - started)
        future = self._event_loop().create_future()
        self._in_progress[cache_key] = future
        try:
            shared = await self._from_shared_cache(checked_code)
            if shared is not None:
                self._counts["cache_hits"] += 1
                self._counts["shared_cache_hits"] += 1
                result = _with(shared, is_cached=True, seconds=time.perf_counter() - started)
                self._remember(cache_key, result)
                future.set_result(result)
                self._count_verdict(result)
                return result
            self._counts["cache_misses"] += 1
            answer = await self._check(checked_code, key)
            if isinstance(answer.outcome, _Failure):
                result = VerificationResult(
                    Verdict.INFRA_ERROR,
                    reasons=(answer.outcome.reason + "; censored, not scored",),
                    is_standin_verdict=answer.is_standin,
                )
            else:
                result = interpret_answer(
                    answer.outcome, checked_code, line_numbering=answer.numbering, is_standin=answer.is_standin,
                    allow_native_decide=self.allow_native_decide,
                )
            result = _with(result, seconds=time.perf_counter() - started)
            self._remember(cache_key, result)
            await self._to_shared_cache(checked_code, result)
            future.set_result(result)
        except asyncio.CancelledError:
            future.cancel()  # duplicates waiting on this proof then ask Lean themselves
            raise
        except Exception as error:
            future.set_exception(error)
            future.exception()  # retrieved here, so a future nobody else awaited logs nothing
            raise
        finally:
            del self._in_progress[cache_key]
        self._count_verdict(result)
        return result

    async def verify_many(self, items: Iterable[tuple[str, str]]) -> list[VerificationResult]:
        """Verdicts for ``(checked_code, key)`` pairs, in their order."""
        return list(await asyncio.gather(*(self.verify(code, key=key) for code, key in items)))

    async def health(self) -> dict:
        response = await self._client().get("/health")
        self._is_standin = response.headers.get(STANDIN_HEADER) == "1"
        response.raise_for_status()
        return response.json()

    async def line_numbering(self) -> LineNumbering:
        """How the server numbers the lines of its messages: probed before the first snippet and
        again after a reconnect. Raises ProbeFailed (with the reason) when the server cannot say."""
        self._event_loop()
        if self._numbering is not None:
            return self._numbering
        probes_before = self._probes_started
        async with self._numbering_lock:
            if self._numbering is not None:
                return self._numbering
            if self._probes_started != probes_before and self._last_probe_failure is not None:
                # A probe failed while this caller waited: share its answer rather than queue another.
                raise self._last_probe_failure
            known = await self._numbering_known_to_the_shared_cache()
            if known is not None:
                self._numbering = known  # probed by another run on this server and version: Lean is not asked
                return known
            self._probes_started += 1
            try:
                self._numbering = await self._probe()
            except ProbeFailed as failure:
                self._last_probe_failure = failure
                raise
            self._last_probe_failure = None
            return self._numbering

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.shared_cache is not None:
            await self.shared_cache.aclose()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def stats(self) -> dict:
        """Counters for the run's metrics: cache hits and misses, hit rate, verdicts, censored."""
        hits, misses = self._counts["cache_hits"], self._counts["cache_misses"]
        verdicts = {verdict.value: self._counts[f"verdict:{verdict.value}"] for verdict in Verdict}
        return {
            "cache_hits": hits,
            "cache_misses": misses,
            "cache_hit_rate": hits / (hits + misses) if hits + misses else 0.0,
            # Of the hits, those another run's verdicts answered (trainer/verification/shared_cache.py).
            "shared_cache_hits": self._counts["shared_cache_hits"],
            "shared_cache_hit_rate": self._counts["shared_cache_hits"] / (hits + misses) if hits + misses else 0.0,
            "cache_entries": len(self._cache),
            "verdicts": verdicts,
            "censored": sum(count for name, count in verdicts.items() if Verdict(name).is_censored),
            "standin_verdicts": self._counts["standin"],
            "requests": self._counts["requests"],
            "retries": self._counts["retries"],
            "snippets_sent": self._counts["snippets_sent"],
            # Batches an HTTP 500 (a crashing proof) split into a request per proof.
            "batches_split": self._counts["batches_split"],
            "line_numbering": self._numbering.value if self._numbering is not None else None,
            "line_probes": self._probes_started,
        }

    def state_dict(self) -> dict:
        """The verdict cache and the counters behind stats(), for a checkpoint: a resumed run then
        reports the same cache hit rate as the uninterrupted one."""
        return {"environment": self.environment, "cache": list(self._cache.items()), "counts": dict(self._counts)}

    def load_state_dict(self, state: dict) -> None:
        self._counts = Counter(state.get("counts", {}))
        if self.config.cache_size and state.get("environment") == self.environment:  # verdicts of another Lean environment are not reused
            self._cache = OrderedDict(state.get("cache", []))
            while self.config.cache_size and len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)

    # ------------------------------------------------------------------ internals

    def _remember(self, cache_key: str, result: VerificationResult) -> None:
        if not result.is_censored and self.config.cache_size:  # censored: an outage must not stick
            self._cache[cache_key] = result
            if len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)

    async def server_identity(self) -> str | None:
        """The server as the shared cache names it: URL, the version /health reports, line numbering.
        None (nothing shared this time) when /health does not answer: Lean is then asked as before.

        The numbering is this verifier's own probe where it made one, else the one another verifier
        probed on the same server and version (so a run served wholly from the cache sends Lean nothing),
        else probed now."""
        if self._server_identity is not None and (self._numbering is None
                                                  or self._server_identity.endswith("\x00" + self._numbering.value)):
            return self._server_identity  # until a probe of this verifier finds another numbering
        self._event_loop()
        async with self._identity_lock:
            try:
                version = server_version(await self.health())
            except Exception:  # noqa: BLE001 - the cache is an optimisation; Lean decides as before
                return None
            numbering = self._numbering.value if self._numbering is not None else \
                await self.shared_cache.known_numbering(self.config.url, version)
            if numbering is None:
                try:
                    numbering = (await self.line_numbering()).value
                except ProbeFailed:
                    return None
            await self.shared_cache.remember_numbering(self.config.url, version, numbering)
            self._server_identity = f"{self.config.url}\x00{version}\x00{numbering}"
            return self._server_identity

    async def _numbering_known_to_the_shared_cache(self) -> LineNumbering | None:
        if self.shared_cache is None:
            return None
        try:
            version = server_version(await self.health())
            known = await self.shared_cache.known_numbering(self.config.url, version)
            return LineNumbering(known) if known is not None else None
        except Exception:  # noqa: BLE001 - unknown or unreadable: this verifier probes for itself
            return None

    async def _from_shared_cache(self, checked_code: str) -> VerificationResult | None:
        if self.shared_cache is None:
            return None
        identity = await self.server_identity()
        return None if identity is None else await self.shared_cache.get(identity, checked_code)

    async def _to_shared_cache(self, checked_code: str, result: VerificationResult) -> None:
        if self.shared_cache is None or result.is_censored:
            return
        identity = await self.server_identity()
        if identity is not None:
            await self.shared_cache.put(identity, checked_code, result)

    def _cache_key(self, checked_code: str) -> str:
        return hashlib.sha256(f"{self.environment}\x00{checked_code}".encode()).hexdigest()

    def _count_verdict(self, result: VerificationResult) -> None:
        self._counts[f"verdict:{result.verdict.value}"] += 1
        if result.is_standin_verdict:
            self._counts["standin"] += 1

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (e.g. a second asyncio.run): loop-bound state starts afresh.
            self._loop = loop
            self._http = None
            self._slots = asyncio.Semaphore(self.config.max_in_flight)
            self._queue = []
            self._flush_scheduled = False
            self._numbering_lock = asyncio.Lock()
            self._identity_lock = asyncio.Lock()
            self._numbering = None  # new connections: ask again
            if self.shared_cache is not None:
                self.shared_cache.forget_connection()  # its connections belong to the old loop
        return loop

    def _client(self) -> httpx.AsyncClient:
        self._event_loop()
        if self._http is None:
            headers = {}
            if self.config.api_key is not None and self.config.api_key.get_secret_value():
                headers["Authorization"] = f"Bearer {self.config.api_key.get_secret_value()}"
            self._http = httpx.AsyncClient(
                base_url=self.config.url.rstrip("/"),
                headers=headers,
                timeout=httpx.Timeout(10.0, read=self.config.timeout_s + self.config.http_timeout_margin_s, pool=None),
                limits=httpx.Limits(
                    max_connections=self.config.max_in_flight, max_keepalive_connections=self.config.max_in_flight
                ),
                trust_env=False,  # no proxy from the environment: the Lean server is ours
            )
        return self._http

    async def _check(self, code: str, key: str) -> _Answer:
        loop = self._event_loop()
        self._next_id += 1
        snippet_id = f"{self._next_id}-{key}"
        async with self._slots:
            pending = _Pending(snippet_id, code, loop.create_future())
            self._queue.append(pending)
            if not self._flush_scheduled:
                # Everything queued in this event-loop turn leaves together: a rollout waits
                # for no one, and simultaneous ones share a request.
                self._flush_scheduled = True
                loop.call_soon(self._flush)
            return await pending.future

    def _flush(self) -> None:
        self._flush_scheduled = False
        queue, self._queue = self._queue, []
        size = self.config.batch_size
        for start in range(0, len(queue), size):
            self._spawn(self._send(queue[start : start + size]))

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Pending], *, is_split_out: bool = False) -> None:
        try:
            await self._send_with_retries(batch, is_split_out=is_split_out)
        except BaseException as error:  # never leave a rollout waiting forever
            for item in batch:
                if not item.future.done():
                    item.future.set_result(_Answer(_Failure(f"the Lean client failed: {error!r}"), False))
            if not isinstance(error, Exception):
                raise

    async def _send_with_retries(self, batch: list[_Pending], *, is_split_out: bool) -> None:
        """Sends ``batch`` until it is answered or its failure is final (the module's docstring says which).
        ``is_split_out``: a proof its batch's HTTP 500 split out, which a second 500 censors at once."""
        payload = _check_request([Snippet(id=item.snippet_id, code=item.code) for item in batch], self.config.timeout_s)
        attempt = 0
        while True:
            try:
                await self.line_numbering()  # a server that cannot say how it numbers lines gets no proofs
            except ProbeFailed as failure:
                for item in batch:
                    item.future.set_result(_Answer(_Failure(str(failure)), False))
                return
            failure, recovery, is_standin = await self._post(batch, payload)
            if failure is None:
                return
            if recovery is _Recovery.SPLIT and len(batch) > 1:
                # The real server loses a whole request to one crashing proof: each proof alone, so the
                # crash costs only its own proof.
                self._counts["retries"] += len(batch)
                self._counts["batches_split"] += 1
                for item in batch:
                    self._spawn(self._send([item], is_split_out=True))
                return
            if recovery is _Recovery.SPLIT and is_split_out:
                for item in batch:
                    item.future.set_result(_Answer(_Failure(
                        f"{failure}, checked alone after its batch failed the same way: the server fails on this "
                        "proof itself (kimina-lean-server answers 500 when a proof's REPL crashes); its neighbours "
                        "got their verdicts"), is_standin))
                return
            if recovery is _Recovery.NONE or attempt >= self.config.max_retries:
                tries = f" after {attempt + 1} tries" if recovery is not _Recovery.NONE else ""
                for item in batch:
                    item.future.set_result(_Answer(_Failure(failure + tries), is_standin))
                return
            attempt += 1
            self._counts["retries"] += 1
            await self._wait_before_retry(attempt)

    async def _probe(self) -> LineNumbering:
        """Sends ``PROBE_CODE`` (with the batches' retries and backoff) and reads the numbering from its answer."""
        lean_timeout_s = max(self.config.timeout_s, _PROBE_MIN_TIMEOUT_S)
        payload = _check_request([Snippet(id=_PROBE_ID, code=PROBE_CODE)], lean_timeout_s)
        attempt = 0
        while True:
            results, failure, recovery, _ = await self._request(payload, lean_timeout_s=lean_timeout_s)
            if failure is None:
                if _PROBE_ID not in results:
                    raise ProbeFailed("the Lean server returned no result for the line-numbering probe")
                return numbering_from_probe(results[_PROBE_ID])
            if recovery is _Recovery.NONE or attempt >= self.config.max_retries:
                tries = f" after {attempt + 1} tries" if recovery is not _Recovery.NONE else ""
                raise ProbeFailed(f"cannot learn how the Lean server numbers lines: {failure}{tries}")
            attempt += 1
            await self._wait_before_retry(attempt)

    async def _wait_before_retry(self, attempt: int) -> None:
        """Exponential backoff from ``retry_backoff_s``, jittered so that many rollouts do not retry in step."""
        backoff = self.config.retry_backoff_s * 2 ** (attempt - 1)
        await asyncio.sleep(backoff * (0.5 + random.random()))

    async def _post(self, batch: list[_Pending], payload: dict) -> tuple[str | None, _Recovery, bool]:
        """Sends one batch; resolves its futures on success. Returns (failure, recovery, is_standin)."""
        self._counts["requests"] += 1
        self._counts["snippets_sent"] += len(batch)
        by_id, failure, recovery, is_standin = await self._request(payload, watch_reconnects=True)
        if failure is not None:
            return failure, recovery, is_standin
        try:
            # Read after the answer: a reconnect while this batch was out has asked the server again.
            numbering = await self.line_numbering()
        except ProbeFailed as probe_failure:
            for item in batch:
                item.future.set_result(_Answer(_Failure(str(probe_failure)), is_standin))
            return None, _Recovery.NONE, is_standin
        for item in batch:
            result = by_id.get(item.snippet_id)
            if result is None:
                item.future.set_result(_Answer(_Failure("the Lean server returned no result for this snippet"), is_standin))
            else:
                item.future.set_result(_Answer(result, is_standin, numbering))
        return None, _Recovery.NONE, is_standin

    async def _request(
        self, payload: dict, *, watch_reconnects: bool = False, lean_timeout_s: float | None = None
    ) -> tuple[dict[str, ReplResponse], str | None, _Recovery, bool]:
        """One POST /api/check. Returns (results by id, failure, what the failure calls for, is_standin).

        With ``watch_reconnects``, a request that leaves an idle verifier over a new TCP connection
        (its earlier connections expired or were closed: the server may have been restarted or
        replaced meanwhile) makes the verifier ask the server its line numbering again.
        """
        url = self.config.url
        self._requests_in_flight += 1
        starts_from_idle = self._requests_in_flight == 1

        async def trace(event: str, info: dict) -> None:
            if starts_from_idle and event == "connection.connect_tcp.complete":
                self._numbering = None  # set before any answer over this connection is read

        extensions = {"trace": trace} if watch_reconnects else {}
        lean_timeout_s = self.config.timeout_s if lean_timeout_s is None else lean_timeout_s
        read_timeout_s = lean_timeout_s + self.config.http_timeout_margin_s
        try:
            response = await self._client().post(
                "/api/check", json=payload, extensions=extensions,
                timeout=httpx.Timeout(10.0, read=read_timeout_s, pool=None),
            )
        except httpx.ReadTimeout:
            self._numbering = None  # whoever answers next may be another server build: ask again
            return (
                {},
                f"the Lean server at {url} did not answer within {read_timeout_s:.0f} s "
                "(the Lean timeout + verifier.http_timeout_margin_s)",
                _Recovery.NONE,
                False,
            )
        except httpx.ConnectError as error:
            self._numbering = None
            return ({}, f"the Lean server at {url} is unreachable ({error!r}); start it or fix verifier.url",
                    _Recovery.BACK_OFF, False)
        except httpx.TransportError as error:
            self._numbering = None
            return {}, f"transport error talking to the Lean server at {url}: {error!r}", _Recovery.BACK_OFF, False
        finally:
            self._requests_in_flight -= 1
        is_standin = self._is_standin = response.headers.get(STANDIN_HEADER) == "1"
        if response.status_code in (401, 403):
            return (
                {},
                f"the Lean server at {url} refused the API key (HTTP {response.status_code}: {_detail(response)}); "
                "set verifier.api_key to the server's key",
                _Recovery.NONE,
                is_standin,
            )
        if response.status_code == 500:
            # kimina-lean-server's own error: a REPL crashed on one of the request's proofs.
            return {}, f"the Lean server answered HTTP 500: {_detail(response)}", _Recovery.SPLIT, is_standin
        if response.status_code == 429 or response.status_code > 500:
            return ({}, f"the Lean server answered HTTP {response.status_code}: {_detail(response)}", _Recovery.BACK_OFF,
                    is_standin)
        if response.status_code != 200:
            return (
                {}, f"the Lean server rejected the request (HTTP {response.status_code}: {_detail(response)})",
                _Recovery.NONE, is_standin,
            )
        try:
            parsed = CheckResponse.model_validate(response.json())
        except (ValueError, json.JSONDecodeError) as error:
            return {}, f"bad response from the Lean server: {str(error)[:200]}", _Recovery.SPLIT, is_standin
        return {result.id: result for result in parsed.results}, None, _Recovery.NONE, is_standin


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", ""))[:200]
    except ValueError:
        return response.text[:200]


def _with(result: VerificationResult, **changes: Any) -> VerificationResult:
    from dataclasses import replace

    return replace(result, **changes)


def _check_request(snippets: list[Snippet], lean_timeout_s: float) -> dict:
    """The body of one POST /verify: Lean's per-snippet timeout in whole seconds (at least 1), no debug output."""
    return CheckRequest(snippets=snippets, timeout=max(1, round(lean_timeout_s)), debug=False, reuse=True,
                        infotree=None).model_dump(mode="json")
