"""Typed events the trainer publishes while it runs.

The platform's ingester reads them from one Redis Stream per run, stores each once
(``event_id`` is the idempotency key) and forwards it to the browsers watching the run.
The trainer only ever needs Redis, never the database.

Why one piece: the event types, their payload models, the stream key and the publisher are one
contract the platform reads; split, a change to one side could miss the other.
"""

from __future__ import annotations

import collections
import itertools
import sys
import threading
import time
import uuid
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from trainer.verification.verdicts import Turn, Verdict, Verifier


class EventType(StrEnum):
    RUN_STARTED = "run_started"
    STEP_STARTED = "step_started"
    ROLLOUT_FINISHED = "rollout_finished"
    RETRY_CREATED = "retry_created"
    METRICS = "metrics"
    EVALUATION = "evaluation"
    CHECKPOINT_SAVED = "checkpoint_saved"
    CHECKPOINT_REMOVED = "checkpoint_removed"  # deleted by the run's retention (schedule.keep_last_checkpoints)
    LOG = "log"
    ERROR = "error"
    RUN_FINISHED = "run_finished"
    TRACKING = "tracking"  # where a tracker (W&B, MLflow, TensorBoard) logs this run, or why it stopped
    # Text still being generated: live only, never on the durable stream, never stored (trainer/observability/live.py).
    ROLLOUT_PROGRESS = "rollout_progress"
    # Where the run's actors wait or sit on the Ray cluster (trainer/loop/ray_driver.py; a Placement payload).
    PLACEMENT = "placement"


class LeanMessagePayload(BaseModel):
    """One message of Lean's, positions as Lean gives them (lines 1-based, columns in code points)."""

    severity: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    text: str


class ToolCallPayload(BaseModel):
    """One Lean check an answer asked for inside its reasoning (``rollout.lean_tool_calls``; trainer/rollout/lean_tool.py)."""

    snippet: str = Field(description="The Lean the model wrote between <lean> and </lean>.")
    reply: str = Field(description="Lean's reply as appended to the answer (a <lean_result> block).")
    verdict: Verdict = Field(description="Lean's verdict on the snippet; infra_error when the verifier could not decide.")
    is_decided: bool = Field(description="False when the verifier could not decide (stand-in, outage): the reply says so.")
    is_standin_verdict: bool = False
    asked_at: float = Field(description="time.time() the answer paused and the snippet went to the verifier.")
    answered_at: float = Field(description="time.time() Lean's reply was appended.")
    reply_tokens: list[int] = Field([0, 0], description="[start, end) of the reply's tokens in the response: "
                                                         "context, with zero loss weight.")
    is_refused: bool = Field(False, description="True when the snippet broke a rule a final proof keeps "
                                                "(trainer/verification/integrity.py): never sent to Lean, answered "
                                                "with the refusal (verdict rejected).")


class RolloutFinished(BaseModel):
    """One sampled answer, scored. ``reward`` is None when the verdict was censored."""

    rollout_key: str = Field(description="Unique within the run, e.g. 'a1-s3-p12-r5' or 'a1-eval4-retry-…'.")
    step: int = Field(description="The training step it was sampled at; for an evaluation sample, the step "
                                  "evaluated (0 for an evaluation run).")
    is_evaluation: bool = Field(
        False, description="A sample of an evaluation (an evaluation run's, or a training run's periodic one at "
                           "``step``), not a training rollout: it trains nothing, and the evaluation's pass@k counts it.")
    problem_id: str
    problem_name: str = ""
    formal_statement: str = ""
    turn: Turn = Field(Turn.FIRST, description="The first attempt, or the error-correction retry of one.")
    parent_rollout_key: str | None = None
    round: int = Field(0, ge=0, description="The round of correction (retry.max_rounds): 0 for a first attempt, 1 for "
                                            "its retry, 2 for that retry's retry…")
    sample_index: int = 0
    prompt: str = Field("", description="The exact prompt text the model was given (after the chat template).")
    response: str = ""
    reasoning: str = ""
    lean_code: str = ""
    checked_code: str = Field("", description="What was sent to Lean: header, canonical statement, model's proof body.")
    format_error: str | None = None
    format_detail: str = Field("", description="The format check's own words for why the answer failed it.")
    format_failure_lines: list[list[int]] = Field(
        [], description="Where the format check failed: [first, last] line ranges (1-based) of the response.")
    verdict: Verdict | None = Field(None, description="Lean's verdict; None if the answer was never sent to Lean.")
    lean_messages: list[LeanMessagePayload] = []
    reward: float | None = None
    reasons: list[str] = []
    is_censored: bool = False
    is_standin_verdict: bool = False
    verified_by: Verifier | None = Field(
        None, description="The verifier that judges the run's answers, named on every answer, those that reached none "
                          "included (a format failure, an integrity rule's rejection, an outage): such an answer is "
                          "the model's 0 or a censored answer under that verifier, counted in its rates and never in "
                          "the other's. None from trainers older than this field and from injected test scorers; the "
                          "platform then infers it (platform/proofs/run_rollouts.py).")
    num_tokens: int = 0
    is_truncated: bool = False
    generation_seconds: float = 0.0
    verification_seconds: float = 0.0
    sampling: dict[str, Any] = {}
    policy_version: int | None = Field(
        None, ge=0, description="The version of the policy that wrote it: the number of learner updates in the weights "
                                "that generated it (0: the starting weights); an asynchronous run (rollout.max_staleness "
                                "≥ 1) trains it at most η versions later. None for evaluation samples and in older runs.")
    tool_calls: list[ToolCallPayload] = Field(
        [], description="The Lean checks it asked for inside its reasoning, in order (rollout.lean_tool_calls).")


class RolloutProgress(BaseModel):
    """A piece of an answer while the model is still writing it (``rollout_progress``; trainer/observability/live.py).

    ``text`` is what was written since the rollout's previous piece and ``offset`` the number of
    characters (Unicode code points) before it, so the pieces joined by offset are a prefix of the
    stored ``RolloutFinished.response``. ``is_finished``: generation ended, Lean is checking it.
    """

    rollout_key: str
    step: int
    problem_id: str
    turn: Turn = Turn.FIRST
    offset: int = Field(ge=0)
    text: str = ""
    tokens: int = Field(0, ge=0, description="Tokens generated so far.")
    is_finished: bool = False


class RunStatus(StrEnum):
    """How a run ended, as the trainer reports it in ``run_finished``."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class _Payload(BaseModel):
    """A payload's fields that the platform reads; others may ride along (a log's level, a run's
    extra facts) and are stored as sent."""

    model_config = ConfigDict(extra="allow")


class StepStarted(_Payload):
    step: int = Field(ge=0)


class StepValues(_Payload):
    """``metrics`` and ``evaluation``: named numbers for one step."""

    step: int = Field(ge=0)
    values: dict[str, Any] = {}


class ProblemNotAttempted(BaseModel):
    """A problem an evaluation or a training step left out, and why in the researcher's words (what was wrong, the
    value, the fix): a problem left out silently reads as one that was never in the promptset."""

    problem_id: str
    reason: str


class EvaluationValues(StepValues):
    """``evaluation``: its named numbers, and each problem of the evaluation's promptset it did not attempt
    (``values["problems_not_attempted"]`` counts them)."""

    not_attempted: list[ProblemNotAttempted] = []


class CheckpointSaved(_Payload):
    step: int = Field(ge=0)
    path: str = ""


class RetryCreated(_Payload):
    """A failed first attempt turned into an error-correction prompt."""

    parent_rollout_key: str
    feedback: str = ""
    step: int = Field(0, ge=0)


class RunFinished(_Payload):
    status: RunStatus
    reason: str = ""


class PlacementBundle(BaseModel):
    """One bundle of the run's placement group (trainer/cluster/placement.py)."""

    role: str
    gpus: int
    cpus: int


class NodeFree(BaseModel):
    """What a live node has free while the run waits: what the cluster could give it now."""

    node_id: str
    node_ip: str
    gpus_free: float
    cpus_free: float


class PlacedActor(BaseModel):
    """An actor of the run once placed: "learner rank 0", "rollout engine 0"…, on which node, in which bundle."""

    name: str
    node_id: str
    node_ip: str
    bundle: int


class Placement(_Payload):
    """``placement``: the driver's placement group "waiting" for resources (again every ~30 s with fresh numbers),
    or "placed" once its actors are up. Learner rank 0 publishes a second "placed" with the rollout engines; the
    platform merges the actors lists by name."""

    state: Literal["waiting", "placed"]
    gpus_wanted: int
    cpus_wanted: int
    bundles: list[PlacementBundle] = []
    free_per_node: list[NodeFree] = Field([], description="Each live node's free GPUs and CPUs (waiting; [] placed).")
    actors: list[PlacedActor] = Field([], description="Where each actor runs (placed; [] waiting).")


# The fields each type's effects read on the platform; the ingester validates every payload of these
# types with its model before storing it, so a payload without them cannot fail half-way through a batch.
PAYLOAD_SCHEMAS: dict[EventType, type[BaseModel]] = {
    EventType.ROLLOUT_FINISHED: RolloutFinished,
    EventType.STEP_STARTED: StepStarted,
    EventType.METRICS: StepValues,
    EventType.EVALUATION: EvaluationValues,
    EventType.CHECKPOINT_SAVED: CheckpointSaved,
    EventType.RETRY_CREATED: RetryCreated,
    EventType.RUN_FINISHED: RunFinished,
    EventType.PLACEMENT: Placement,
}


class TrainerEvent(BaseModel):
    """The envelope of every event: ``payload`` holds the type-specific fields.

    ``attempt`` is the dispatch of the run that published it (1, then one more per resume): the
    platform applies only the events of a run's current attempt, so a late event of a cancelled
    attempt cannot touch the attempt that replaced it.
    """

    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    run_id: str
    attempt: int = Field(1, ge=1)
    seq: int
    type: EventType
    time: float = Field(default_factory=time.time)
    payload: dict[str, Any] = {}

    def to_stream_fields(self) -> dict[str, str]:
        return {"event": self.model_dump_json()}


STREAM_PATTERN = "trainer:run:*:events"  # every run's stream, for SCAN; stream_key and run_id_of are its two halves


def stream_key(run_id: str) -> str:
    """The Redis Stream a run's events go to."""
    return f"trainer:run:{run_id}:events"


def run_id_of(key: str) -> int | None:
    """``trainer:run:12:events`` → 12; None for a key that is no run's stream (the trainer's own
    ``--run-id local`` among them: the platform's runs have numbers)."""
    parts = key.split(":")
    if len(parts) == 4 and parts[:2] == ["trainer", "run"] and parts[3] == "events" and parts[2].isdigit():
        return int(parts[2])
    return None


LIVE_CHANNEL_PATTERN = "trainer:run:*:live"  # every run's pub/sub channel of rollout_progress events


def live_channel(run_id: str) -> str:
    """The Redis pub/sub channel a run's ``rollout_progress`` events go to: never the durable stream."""
    return f"trainer:run:{run_id}:live"


def writing_key(run_id: str) -> str:
    """The Redis hash of a run's answers still being written (rollout_key → latest text), with an expiry,
    for a page that opens mid-answer."""
    return f"trainer:run:{run_id}:writing"


def run_id_of_live_channel(channel: str) -> int | None:
    """``trainer:run:12:live`` → 12; None for any other channel."""
    parts = channel.split(":")
    if len(parts) == 4 and parts[:2] == ["trainer", "run"] and parts[3] == "live" and parts[2].isdigit():
        return int(parts[2])
    return None


class EventSink(Protocol):
    def write(self, event: TrainerEvent) -> None: ...


class EventPublisher:
    """Numbers events in order and hands them to a sink (Redis, stdout, or a list in tests).

    Every event carries the publisher's ``attempt`` (the platform passes it as ``--attempt``).
    """

    def __init__(self, run_id: str, sink: EventSink, first_seq: int = 0, *, attempt: int = 1):
        if attempt < 1:
            raise ValueError(f"attempt must be 1 or more (the run's first dispatch is attempt 1), got {attempt}")
        self.run_id = str(run_id)
        self.sink = sink
        self.attempt = attempt
        self._seq = itertools.count(first_seq)
        self._lock = threading.Lock()
        # Where rollout_progress goes (trainer/observability/live.py), or None: off. Never ``sink``'s durable stream.
        self.live: EventSink | None = None

    def publish(self, type: EventType, payload: BaseModel | dict | None = None) -> TrainerEvent:
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        with self._lock:
            event = self.make_event(next(self._seq), type, payload)
        self.sink.write(event)
        return event

    def publish_live(self, payload: RolloutProgress) -> None:
        """A ``rollout_progress`` event to the live sink: unnumbered (seq -1), so it is no part of the run's
        sequence of stored events and its loss leaves no gap."""
        if self.live is not None:
            self.live.write(TrainerEvent(run_id=self.run_id, attempt=self.attempt, seq=-1,
                                         type=EventType.ROLLOUT_PROGRESS, payload=payload.model_dump(mode="json")))

    def make_event(self, seq: int, type: EventType, payload: dict | None) -> TrainerEvent:
        return TrainerEvent(run_id=self.run_id, attempt=self.attempt, seq=seq, type=type, payload=payload or {})

    def record_sequence(self) -> "SequenceRecorder":
        """Wrap the sink (once) so that the last published seq is known: a checkpoint stores the next one."""
        if not isinstance(self.sink, SequenceRecorder):
            self.sink = SequenceRecorder(self.sink)
        return self.sink

    def log(self, message: str, level: str = "info") -> None:
        self.publish(EventType.LOG, {"level": level, "message": message})


class RedisStreamSink:
    """Appends events to the run's Redis Stream, at once; raises if Redis cannot take them.

    No MAXLEN: the ingester trims the stream up to what it has stored, and a length cap here
    would drop events nobody had read. The trainer publishes through ``BufferedStreamSink``,
    which rides out a Redis restart; this one is its transport, and what tests use to publish
    synchronously.
    """

    def __init__(self, redis_url: str, run_id: str, *, socket_timeout_s: float = 10.0):
        import redis

        # Timeouts, so an unreachable host (packets dropped, not refused) fails a send in seconds.
        self.client = redis.Redis.from_url(redis_url, socket_connect_timeout=socket_timeout_s,
                                           socket_timeout=socket_timeout_s)
        self.key = stream_key(run_id)

    def write(self, event: TrainerEvent) -> None:
        self.client.xadd(self.key, event.to_stream_fields())

    def write_many(self, events: list[TrainerEvent]) -> None:
        """One round trip for many events, in order. Some may have been added when it raises; sending
        them again is harmless, as the ingester stores an event_id once."""
        pipeline = self.client.pipeline(transaction=False)
        for event in events:
            pipeline.xadd(self.key, event.to_stream_fields())
        pipeline.execute()


class EventsUnavailable(RuntimeError):
    """Redis could not take the run's events for longer than ``events.max_outage_s``."""


class BufferedStreamSink:
    """The trainer's events to Redis through a bounded local buffer, so a Redis restart costs no event.

    ``write`` only queues the event; one background thread sends the queue in order, oldest first,
    and on a failure keeps the events and retries with backoff (0.2 s doubling to 5 s). An event
    whose send failed half-way may reach the stream twice; the ingester stores each event_id
    once, so none is doubled in the database, and none is lost while the buffer holds. When the
    buffer is full (``max_buffer_bytes`` of JSON), ``write`` waits for room. Once sends have failed
    for ``max_outage_s`` without a success, every ``write``, ``flush`` and ``close`` raises
    ``EventsUnavailable`` with what happened and how to resume: the run fails only then.
    """

    def __init__(self, transport: RedisStreamSink, *, max_outage_s: float = 300.0,
                 max_buffer_bytes: int = 256 * 1024 * 1024, batch_size: int = 500, clock=time.monotonic):
        self.transport = transport
        self.max_outage_s = max_outage_s
        self.max_buffer_bytes = max_buffer_bytes
        self.batch_size = batch_size
        self.clock = clock
        self._queue: collections.deque[tuple[TrainerEvent, int]] = collections.deque()
        self._queued_bytes = 0
        self._sending = 0  # events taken by the sender, not yet confirmed
        self._condition = threading.Condition()
        self._failing_since: float | None = None
        self._last_error: BaseException | None = None
        self.failure: EventsUnavailable | None = None
        self._closed = False
        self.sent = 0
        self.retries = 0
        self._sender = threading.Thread(target=self._send_forever, name="event-sender", daemon=True)
        self._sender.start()

    def configure(self, *, max_outage_s: float, max_buffer_bytes: int) -> None:
        """The run's own limits (``events`` section of its config), known only once the config is read."""
        with self._condition:
            self.max_outage_s = max_outage_s
            self.max_buffer_bytes = max_buffer_bytes
            self._condition.notify_all()

    def write(self, event: TrainerEvent) -> None:
        size = len(event.model_dump_json())
        with self._condition:
            # A single event larger than the whole buffer still goes, alone.
            while (self.failure is None and self._queue
                   and self._queued_bytes + size > self.max_buffer_bytes):
                self._condition.wait(0.5)
            if self.failure is not None:
                raise self.failure
            self._queue.append((event, size))
            self._queued_bytes += size
            self._condition.notify_all()

    @property
    def buffered(self) -> int:
        """Events not yet confirmed by Redis."""
        with self._condition:
            return len(self._queue) + self._sending

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued event is in Redis (or the outage limit ends the wait)."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._condition:
            while self.failure is None and (self._queue or self._sending):
                if deadline is not None and self.clock() >= deadline:
                    raise TimeoutError(f"{len(self._queue) + self._sending} events still unsent after {timeout} s")
                self._condition.wait(0.2)
            if self.failure is not None:
                raise self.failure

    def close(self) -> None:
        """Send what is buffered, then stop the sender; raises ``EventsUnavailable`` if Redis stayed away."""
        try:
            self.flush()
        finally:
            with self._condition:
                self._closed = True
                self._condition.notify_all()
            self._sender.join(5)

    def _send_forever(self) -> None:
        delay = 0.2
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    self._condition.wait()
                if self._closed and not self._queue:
                    return
                if self.failure is not None:
                    return
                batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
                self._sending = len(batch)
            try:
                self.transport.write_many([event for event, _ in batch])
            except Exception as error:  # noqa: BLE001 - any transport failure: keep the events, retry
                with self._condition:
                    self._queue.extendleft(reversed(batch))  # back at the front, in their order
                    self._sending = 0
                    self._last_error = error
                    now = self.clock()
                    if self._failing_since is None:
                        self._failing_since = now
                        print(f"events: Redis refused a send ({type(error).__name__}: {error}); "
                              f"buffering {len(self._queue)} events and retrying for up to "
                              f"{self.max_outage_s:.0f} s (events.max_outage_s)", file=sys.stderr, flush=True)
                    if now - self._failing_since >= self.max_outage_s:
                        self.failure = EventsUnavailable(
                            f"the run's events could not be sent to Redis for {now - self._failing_since:.0f} s "
                            f"(events.max_outage_s = {self.max_outage_s:.0f}); last error: "
                            f"{type(error).__name__}: {error}. {len(self._queue)} events were not delivered. "
                            "Bring Redis back (REDIS_URL) and resume the run: it continues from its last checkpoint."
                        )
                        self._condition.notify_all()
                        return
                    self.retries += 1
                    retry_at = now + delay
                    while self.clock() < retry_at:  # a write's notify must not cut the backoff short
                        self._condition.wait(retry_at - self.clock())
                delay = min(delay * 2, 5.0)
                continue
            with self._condition:
                self._queued_bytes -= sum(size for _, size in batch)
                self._sending = 0
                self.sent += len(batch)
                if self._failing_since is not None:
                    print(f"events: Redis is back after {self.clock() - self._failing_since:.1f} s; "
                          f"{len(self._queue)} buffered events follow", file=sys.stderr, flush=True)
                self._failing_since = None
                self._condition.notify_all()
            delay = 0.2


class StdoutSink:
    """One JSON line per event, for ``python -m trainer run`` without Redis."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def write(self, event: TrainerEvent) -> None:
        self.stream.write(event.model_dump_json() + "\n")
        self.stream.flush()


class DiscardSink:
    """Drops every event: for ``python -m trainer eval``, which prints its report and writes its samples itself
    (a ListSink would hold every evaluation sample's text a second time, for nobody)."""

    def write(self, event: TrainerEvent) -> None:
        pass


class ListSink:
    """Keeps events in memory; for tests and for embedding the trainer in another program."""

    def __init__(self):
        self.events: list[TrainerEvent] = []

    def write(self, event: TrainerEvent) -> None:
        self.events.append(event)

    def of_type(self, type: EventType) -> list[TrainerEvent]:
        return [e for e in self.events if e.type == type]


class SequenceRecorder:
    """Passes events on to a sink and remembers the last sequence number, so that a run resumed
    from a checkpoint numbers its events after it."""

    def __init__(self, sink: EventSink):
        self.sink = sink
        self.last_seq = -1

    def write(self, event: TrainerEvent) -> None:
        self.last_seq = max(self.last_seq, event.seq)
        self.sink.write(event)


def sink_from_url(url: str, run_id: str) -> EventSink:
    """``redis://…`` publishes to the run's stream through a buffer that rides out a Redis restart;
    ``-`` or ``stdout`` prints JSON lines."""
    if url in ("-", "stdout", ""):
        return StdoutSink()
    if url.startswith(("redis://", "rediss://", "unix://")):
        return BufferedStreamSink(RedisStreamSink(url, run_id))
    raise ValueError(f"events destination {url!r} is neither 'stdout' nor a redis:// URL")



def configure_sink(sink: EventSink, events_config) -> None:
    """Apply the run's ``events`` settings to a buffered sink (other sinks have nothing to set)."""
    if isinstance(sink, BufferedStreamSink):
        sink.configure(max_outage_s=events_config.max_outage_s,
                       max_buffer_bytes=events_config.buffer_mb * 1024 * 1024)


def finish_delivery(sink: EventSink) -> str | None:
    """Send what the sink still buffers before the process ends; why it could not, or None."""
    if not isinstance(sink, BufferedStreamSink):
        return None
    try:
        sink.close()
    except EventsUnavailable as error:
        return str(error)
    return None
