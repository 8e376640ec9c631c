"""The stand-in Lean server: kimina-lean-server's HTTP API in front of ``standin.decide_snippet``.

It speaks what the real server speaks (``POST /api/check`` with ``{"snippets": [{"id",
"code"}], "timeout", …}`` answered by ``{"results": [{"id", "time", "response" | "error"}]}``,
``GET /health``, an optional Bearer key in ``Authorization``, FastAPI-style ``{"detail": …}``
errors), so the trainer's client cannot tell the difference except where it is told:
every response carries the ``X-Lean-Standin: 1`` header and ``"standin": true``, and every
decided snippet starts with an info message saying the stand-in decided it. A snippet
outside the fragment gets the per-snippet error ``lean-standin cannot decide: …``.

``latency_s`` and ``max_concurrency`` emulate a pool of Lean REPLs for benchmarks: each
snippet holds one of ``max_concurrency`` slots for its latency; a snippet whose latency exceeds
the request's timeout answers the real server's timeout error, and one that waits ``max_wait_s``
for a slot fails its whole request with 429, as the real server does. The latency is
``latency_s`` every time, or, like Lean's, long-tailed (``LatencyDistribution``): log-normal
around that mean, and a share of the snippets running to the request's timeout.

Where the real server (kimina-lean-server at fb2393d and e3bb327, the code its 2.0.0 image runs)
behaves in a way a client must survive, the stand-in behaves the same, so tests against it see it:

- each slot holds a REPL for one import header; its ``env`` ids grow with every command it runs
  (the header is env 0, its first proof env 1, …); ``import_latency_s`` is what starting one costs;
- a REPL that crashes (or prints a non-JSON line) turns the **whole request** into HTTP 500
  ``{"detail": "JSON decode error"}``, its neighbours' results lost; a line over 64 KiB gives 500
  ``{"detail": "Failed to read from REPL stdout"}`` (``routers/check.py`` raises for the request);
- a timeout answers 200 with that proof's ``{"time": T, "error": "Lean REPL command timed out in T
  seconds", "diagnostics": {"repl_uuid": …}}`` and kills its REPL, so the next proof of that
  header pays the import again; an import that times out says "Lean REPL header command timed out";
- ``GET /health`` needs no key; a snippet ``id`` that is not a string is refused with 422.

``ReplFaults`` injects those failures (``lean-standin --fault KIND=SHARE``, or the marker
``-- lean-standin fault: KIND`` in a proof, for tests that must pick the proof).

``line_numbering`` picks which kimina-lean-server build it imitates: ``after-header`` numbers
lines after the import header, as the 2.0.0 image ``deploy/`` pins does; ``as-sent`` numbers
lines of the code as sent, as the server does since its fix of 2025-10-24 (#56). The trainer's
verifier probes for it (``trainer.verification.line_numbering``), so tests run against both.

It is a plain ASGI application served by uvicorn (no web framework needed for two routes).
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import math
import random
import re
import socket
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum

from trainer.verification.checked_code import leading_import_line_count
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin import CannotDecide, decide_snippet, split_header

STANDIN_HEADER = "x-lean-standin"
CANNOT_DECIDE_PREFIX = "lean-standin cannot decide: "
# The request log's length: the latest snippets received, for a test or a person asking what reached the server.
RECEIVED_CODES_KEPT = 10_000


@dataclass
class LatencyDistribution:
    """How long each snippet takes: log-normal with mean ``mean_s`` (``sigma`` 0: always ``mean_s``), and a
    share ``timeout_share`` of the snippets that runs to the request's timeout, as a proof Lean gives up on.
    Drawn from its own seeded stream, so a benchmark's latencies repeat run after run."""

    mean_s: float = 0.0
    sigma: float = 0.0
    timeout_share: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.mean_s < 0 or self.sigma < 0:
            raise ValueError(f"a latency's mean and sigma are 0 or more, got mean {self.mean_s} s, sigma {self.sigma}")
        if not 0 <= self.timeout_share <= 1:
            raise ValueError(f"the share of snippets that run to the timeout is between 0 and 1, got {self.timeout_share}")
        self._random = random.Random(self.seed)

    def draw(self) -> float:
        """Seconds for the next snippet; ``math.inf`` for one that runs to its request's timeout."""
        if self.timeout_share and self._random.random() < self.timeout_share:
            return math.inf
        if not self.sigma or not self.mean_s:
            return self.mean_s
        # The log-normal whose mean is mean_s: exp(mu + sigma^2 / 2) = mean_s.
        return self._random.lognormvariate(math.log(self.mean_s) - self.sigma ** 2 / 2, self.sigma)


class ReplFault(str, Enum):
    """A failure of the real server's REPL pool that the stand-in can inject, by what the real server answers."""

    CRASH = "crash"  # the REPL exits or prints a non-JSON line: the whole request is HTTP 500 "JSON decode error"
    LONG_LINE = "long-line"  # a line over 64 KiB: the whole request is 500 "Failed to read from REPL stdout"
    TIMEOUT = "timeout"  # the proof runs to the request's timeout: 200 with the timeout error; the REPL is killed
    HEADER_TIMEOUT = "header-timeout"  # the imports run past the timeout: "Lean REPL header command timed out"
    NO_REPL = "no-repl"  # no REPL free within MAX_WAIT: the whole request is 429, its other proofs keep running


FAULT_MARKER = re.compile(r"--\s*lean-standin fault:\s*([a-z-]+)")


@dataclass
class ReplFaults:
    """Which proofs meet a ``ReplFault``: every proof carrying the marker ``-- lean-standin fault: KIND``, and a
    share of the others per kind (``shares``), drawn from their own seeded stream so a benchmark repeats."""

    shares: dict[ReplFault, float] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self):
        self.shares = {ReplFault(kind): share for kind, share in self.shares.items()}
        for kind, share in self.shares.items():
            if not 0 <= share <= 1:
                raise ValueError(f"the share of proofs meeting the fault {kind.value!r} is between 0 and 1, got {share}")
        if sum(self.shares.values()) > 1:
            raise ValueError(f"the faults' shares add up to {sum(self.shares.values()):g}, more than every proof; lower them")
        self._random = random.Random(self.seed)

    def draw(self, code: str) -> ReplFault | None:
        marked = FAULT_MARKER.search(code)
        if marked:
            try:
                return ReplFault(marked.group(1))
            except ValueError:
                pass  # not a fault's name: the marker is an ordinary comment
        if not self.shares:
            return None
        point, cumulative = self._random.random(), 0.0
        for kind, share in self.shares.items():
            cumulative += share
            if point < cumulative:
                return kind
        return None


@dataclass
class _Repl:
    """One emulated Lean REPL: the import header it loaded and the env id its next command gets."""

    header: tuple[str, ...]
    uuid: str = field(default_factory=lambda: uuid.uuid4().hex)
    next_env: int = 1  # the header's command was env 0


class _ReplFailed(Exception):
    """A REPL failure the real server answers for the whole request (its HTTPException)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass
class StandinSettings:
    latency_s: float = 0.0
    # Long-tailed latencies instead of latency_s (see LatencyDistribution); None: latency_s every time.
    latency: LatencyDistribution | None = None
    max_concurrency: int = 64
    api_key: str | None = None
    # Like the real server's MAX_WAIT: a snippet that waits this long for a free slot fails its
    # whole request with 429 "No available REPLs".
    max_wait_s: float = 60.0
    # Failures to answer the next POST /api/check requests with, one per request, for tests:
    # an HTTP status ("500", "429"), "hang" (never answer), or "garbage" (200 with a non-JSON body).
    injected_faults: list[str] = field(default_factory=list)
    # Which kimina-lean-server build to imitate in message positions (see the module's docstring).
    line_numbering: LineNumbering = LineNumbering.AFTER_HEADER
    # Failures of the REPL pool to inject, as the real server answers them (see ReplFaults).
    repl_faults: ReplFaults = field(default_factory=ReplFaults)
    # What starting a REPL costs (loading its imports), paid again after a timeout killed the REPL.
    import_latency_s: float = 0.0


class _NoFreeSlot(Exception):
    pass


class StandinLeanServer:
    """The ASGI application."""

    def __init__(self, settings: StandinSettings | None = None):
        self.settings = settings or StandinSettings()
        self._slots: asyncio.Semaphore | None = None
        self.snippets_checked = 0
        self.requests_received = 0
        self.snippets_in_progress = 0
        self.peak_snippets_in_progress = 0  # what a client kept in flight at most, for tests
        self.repls_started = 0
        # Idle REPLs, least recently used first; a proof takes one started for its import header.
        self._idle_repls: OrderedDict[str, _Repl] = OrderedDict()
        self.codes_received: collections.deque[str] = collections.deque(maxlen=RECEIVED_CODES_KEPT)

    @property
    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.settings.max_concurrency)
        return self._slots

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/") or "/"
        method = scope["method"]
        if path in ("/health", "/") and method == "GET":
            # No key asked: the real server's health route has no auth dependency.
            return await self._reply(send, 200, {"status": "ok", "standin": True})
        if path == "/api/check" and method == "POST":
            body = await _read_body(receive)
            if not self._authorised(scope):
                return await self._reply(send, 401, {"detail": "Invalid API key"})
            return await self._check(body, send)
        return await self._reply(send, 404, {"detail": "Not Found"})

    def _authorised(self, scope) -> bool:
        if self.settings.api_key is None:
            return True
        headers = dict(scope["headers"])
        given = headers.get(b"authorization", b"").decode("latin-1").removeprefix("Bearer ").strip()
        return bool(given) and hmac.compare_digest(given, self.settings.api_key)

    async def _check(self, body: bytes, send) -> None:
        self.requests_received += 1
        if self.settings.injected_faults:
            fault = self.settings.injected_faults.pop(0)
            if fault == "hang":
                await asyncio.sleep(3600)
            if fault == "garbage":
                return await _send_raw(send, 200, b"<html>not json</html>", b"text/html")
            return await self._reply(send, int(fault), {"detail": f"injected failure {fault}"})
        try:
            request = json.loads(body)
            snippets = request["snippets"]
            timeout_s = float(request.get("timeout", 30))
            ids = [snippet["id"] for snippet in snippets]
            codes = [snippet["code"] for snippet in snippets]
        except (ValueError, KeyError, TypeError) as error:
            return await self._reply(send, 422, {"detail": f"invalid check request: {error!r}"})
        self.codes_received.extend(str(code) for code in codes)
        if not snippets:
            return await self._reply(send, 422, {"detail": "`snippets` must be non empty"})
        not_text = next((index for index, snippet_id in enumerate(ids) if not isinstance(snippet_id, str)), None)
        if not_text is not None:
            # pydantic's answer in the real server (kimina's Snippet.id is a str): a number is not coerced.
            return await self._reply(send, 422, {"detail": [{
                "type": "string_type", "loc": ["body", "snippets", not_text, "id"],
                "msg": "Input should be a valid string", "input": ids[not_text]}]})
        if len(set(ids)) != len(ids):
            return await self._reply(send, 422, {"detail": "`snippets` must have unique ids"})
        self.snippets_in_progress += len(snippets)
        self.peak_snippets_in_progress = max(self.peak_snippets_in_progress, self.snippets_in_progress)
        try:
            # As in the real server, the first proof to fail the request answers for all of it; the
            # others are not cancelled and run on, their results lost.
            results = await asyncio.gather(*(self._check_one(i, c, timeout_s) for i, c in zip(ids, codes)))
        except _NoFreeSlot:
            return await self._reply(send, 429, {"detail": "No available REPLs"})
        except _ReplFailed as failure:
            return await self._reply(send, failure.status, {"detail": failure.detail})
        finally:
            self.snippets_in_progress -= len(snippets)
        await self._reply(send, 200, {"results": list(results), "standin": True})

    async def _check_one(self, snippet_id: str, code: str, timeout_s: float) -> dict:
        fault = self.settings.repl_faults.draw(code)
        if fault is ReplFault.NO_REPL:
            raise _NoFreeSlot()
        try:
            await asyncio.wait_for(self.slots.acquire(), self.settings.max_wait_s)
        except asyncio.TimeoutError:
            raise _NoFreeSlot() from None
        try:
            return await self._decide(snippet_id, code, timeout_s, fault)
        finally:
            self.slots.release()

    async def _decide(self, snippet_id: str, code: str, timeout_s: float, fault: ReplFault | None) -> dict:
        started = time.perf_counter()
        # An import can time out only where a REPL is started for it.
        repl = self._take_repl(code, is_new=fault is ReplFault.HEADER_TIMEOUT)
        if repl.next_env == 1:  # a new REPL loads its imports first
            if fault is ReplFault.HEADER_TIMEOUT or self.settings.import_latency_s > timeout_s:
                await asyncio.sleep(timeout_s)
                return _timed_out(snippet_id, timeout_s, repl, "Lean REPL header command")  # the REPL is killed
            if self.settings.import_latency_s:
                await asyncio.sleep(self.settings.import_latency_s)
        latency_s = self.settings.latency.draw() if self.settings.latency is not None else self.settings.latency_s
        if fault is ReplFault.TIMEOUT or latency_s > timeout_s:
            await asyncio.sleep(timeout_s)
            return _timed_out(snippet_id, timeout_s, repl, "Lean REPL command")  # the REPL is killed
        if latency_s:
            await asyncio.sleep(latency_s)
        if fault is ReplFault.CRASH:
            raise _ReplFailed(500, "JSON decode error")  # the REPL is gone
        if fault is ReplFault.LONG_LINE:
            raise _ReplFailed(500, "Failed to read from REPL stdout")
        self.snippets_checked += 1
        env, repl.next_env = repl.next_env, repl.next_env + 1
        self._release_repl(repl)
        try:
            response = decide_snippet(code)  # positions counted after the import header, as the REPL sees the body
        except CannotDecide as reason:
            return {"id": snippet_id, "time": time.perf_counter() - started, "error": CANNOT_DECIDE_PREFIX + str(reason)}
        response["env"] = env
        if self.settings.line_numbering is LineNumbering.AS_SENT:
            _shift_lines(response, leading_import_line_count(code))
        return {"id": snippet_id, "time": round(time.perf_counter() - started, 6), "response": response}

    def _take_repl(self, code: str, is_new: bool = False) -> _Repl:
        header = tuple(split_header(code)[0])
        for key, repl in reversed(self._idle_repls.items()):
            if repl.header == header and not is_new:
                del self._idle_repls[key]
                return repl
        self.repls_started += 1
        return _Repl(header)

    def _release_repl(self, repl: _Repl) -> None:
        self._idle_repls[repl.uuid] = repl
        while len(self._idle_repls) > self.settings.max_concurrency:  # the pool's size: the oldest idle REPL goes
            self._idle_repls.popitem(last=False)

    async def _reply(self, send, status: int, payload: dict) -> None:
        await _send_raw(send, status, json.dumps(payload, ensure_ascii=False).encode(), b"application/json")


def _timed_out(snippet_id: str, timeout_s: float, repl: _Repl, command: str) -> dict:
    """The real server's answer to a proof that ran out of time: 200, the proof's own error, the killed REPL named."""
    return {"id": snippet_id, "time": timeout_s, "error": f"{command} timed out in {timeout_s} seconds",
            "diagnostics": {"repl_uuid": repl.uuid}}


def _shift_lines(response: dict, offset: int) -> None:
    """What kimina-lean-server's fix #56 does to the REPL's answer: every position moves down by
    the import header it stripped, so lines count in the code as sent."""
    for item in [*(response.get("messages") or ()), *(response.get("sorries") or ())]:
        for key in ("pos", "endPos"):
            if item.get(key) and item[key].get("line") is not None:
                item[key]["line"] += offset


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_raw(send, status: int, body: bytes, content_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (STANDIN_HEADER.encode(), b"1"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _uvicorn_server(app: StandinLeanServer, host: str, port: int):
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30,
        backlog=4096,
    )
    return uvicorn.Server(config)


def serve(settings: StandinSettings, host: str = "127.0.0.1", port: int = 12332) -> None:
    """Serve until interrupted (``python -m trainer lean-standin``)."""
    _uvicorn_server(StandinLeanServer(settings), host, port).run()


class StandinServerThread:
    """The stand-in on a loopback port (a free one unless ``port`` is given) in a background thread;
    a context manager for tests.

    ``url`` is its base URL; ``app.settings`` may be changed while it runs (faults, latency).
    """

    def __init__(self, settings: StandinSettings | None = None, host: str = "127.0.0.1", port: int = 0):
        self.app = StandinLeanServer(settings)
        self.host = host
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))  # port 0: a free one; a given port: a server restarted in its place
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._server = _uvicorn_server(self.app, host, self.port)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> "StandinServerThread":
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the stand-in Lean server did not start on {self.url} within 20 s")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
