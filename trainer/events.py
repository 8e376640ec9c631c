"""Typed events the trainer publishes while it runs.

The platform's ingester reads them from one Redis Stream per run, stores each once
(``event_id`` is the idempotency key) and forwards it to the browsers watching the run.
The trainer only ever needs Redis, never the database.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import uuid
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, Field


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


class LeanMessagePayload(BaseModel):
    """One message of Lean's, positions as Lean gives them (lines 1-based, columns in code points)."""

    severity: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    text: str


class RolloutFinished(BaseModel):
    """One sampled answer, scored. ``reward`` is None when the verdict was censored."""

    rollout_key: str = Field(description="Unique within the run, e.g. 's3-p12-r5' or 's4-retry-…'.")
    step: int
    problem_id: str
    problem_name: str = ""
    formal_statement: str = ""
    turn: str = Field("first", description="'first' for a first attempt, 'retry' for an error-correction turn.")
    parent_rollout_key: str | None = None
    sample_index: int = 0
    prompt: str = Field("", description="The exact prompt text the model was given (after the chat template).")
    response: str = ""
    reasoning: str = ""
    lean_code: str = ""
    checked_code: str = Field("", description="What was sent to Lean: header, canonical statement, model's proof body.")
    format_error: str | None = None
    verdict: str | None = Field(None, description="valid, sorry, lean_error, timeout, infra_error; None if never sent.")
    lean_messages: list[LeanMessagePayload] = []
    reward: float | None = None
    reasons: list[str] = []
    is_censored: bool = False
    is_standin_verdict: bool = False
    num_tokens: int = 0
    is_truncated: bool = False
    generation_seconds: float = 0.0
    verification_seconds: float = 0.0
    sampling: dict[str, Any] = {}


class TrainerEvent(BaseModel):
    """The envelope of every event: ``payload`` holds the type-specific fields."""

    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    run_id: str
    seq: int
    type: EventType
    time: float = Field(default_factory=time.time)
    payload: dict[str, Any] = {}

    def to_stream_fields(self) -> dict[str, str]:
        return {"event": self.model_dump_json()}

    @classmethod
    def from_stream_fields(cls, fields: dict) -> "TrainerEvent":
        raw = fields.get(b"event", fields.get("event"))
        if isinstance(raw, bytes):
            raw = raw.decode()
        return cls.model_validate_json(raw)


def stream_key(run_id: str) -> str:
    """The Redis Stream a run's events go to."""
    return f"trainer:run:{run_id}:events"


class EventSink(Protocol):
    def write(self, event: TrainerEvent) -> None: ...


class EventPublisher:
    """Numbers events in order and hands them to a sink (Redis, stdout, or a list in tests)."""

    def __init__(self, run_id: str, sink: EventSink, first_seq: int = 0):
        self.run_id = str(run_id)
        self.sink = sink
        self._seq = itertools.count(first_seq)
        self._lock = threading.Lock()

    def publish(self, type: EventType, payload: BaseModel | dict | None = None) -> TrainerEvent:
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        with self._lock:
            event = TrainerEvent(run_id=self.run_id, seq=next(self._seq), type=type, payload=payload or {})
        self.sink.write(event)
        return event

    def record_sequence(self) -> "SequenceRecorder":
        """Wrap the sink (once) so that the last published seq is known: a checkpoint stores the next one."""
        if not isinstance(self.sink, SequenceRecorder):
            self.sink = SequenceRecorder(self.sink)
        return self.sink

    def log(self, message: str, level: str = "info") -> None:
        self.publish(EventType.LOG, {"level": level, "message": message})


class RedisStreamSink:
    """Appends events to the run's Redis Stream. The ingester acknowledges them."""

    def __init__(self, redis_url: str, run_id: str, maxlen: int = 1_000_000):
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.key = stream_key(run_id)
        self.maxlen = maxlen

    def write(self, event: TrainerEvent) -> None:
        self.client.xadd(self.key, event.to_stream_fields(), maxlen=self.maxlen, approximate=True)


class StdoutSink:
    """One JSON line per event, for ``python -m trainer run`` without Redis."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def write(self, event: TrainerEvent) -> None:
        self.stream.write(event.model_dump_json() + "\n")
        self.stream.flush()


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
    """``redis://…`` publishes to the run's stream; ``-`` or ``stdout`` prints JSON lines."""
    if url in ("-", "stdout", ""):
        return StdoutSink()
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStreamSink(url, run_id)
    raise ValueError(f"events destination {url!r} is neither 'stdout' nor a redis:// URL")

