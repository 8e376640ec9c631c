"""The ingester: trainer events from Redis Streams into Postgres, then out to the browsers.

Each run's events arrive on its own stream. They are read with a consumer group, stored
idempotently (an event delivered twice is stored once: ``event_id`` is unique), acknowledged
only after the transaction commits, and forwarded to the run's Channels group.

Nothing in a stream can stop it:

- Each entry is validated on its own (JSON, a known type, the payload its type needs, the
  run of the stream it came on). A batch is stored in one transaction; if that fails for a
  reason other than the database being away, its entries are stored one by one. An entry that
  cannot be stored goes to the ``DeadLetter`` table with the error and is acknowledged; the run
  page counts them.
- Text Postgres cannot hold is stored safely, not refused: a NUL character (model output may
  contain one) becomes U+2400 "␀", a lone surrogate U+FFFD. The rollout stays a rollout.
- Redis or Postgres going away (a restart, an outage) is waited out with backoff (0.5 s doubling
  to 30 s), logged, never fatal; what was read but not stored stays pending and is read again.
- The consumer is named after the host, so an ingester restarted in place (after a crash or a
  SIGKILL mid-batch) first reads again what it had read but not stored. Entries pending for
  ``claim_idle_ms`` under any other consumer (a replaced pod's) are claimed with XAUTOCLAIM.

Streams do not grow for ever: each is trimmed (XTRIM MINID) up to the oldest entry not yet
acknowledged, and deleted once its run is final, ``stream_grace_s`` has passed and nothing in it
is unread. Every stored event gets ``run_seq``, its run's next number (1, 2, 3…), under a lock
on the run's row, so a browser can see a gap and fetch what it missed.

Only the events of a run's current attempt change the run (its state, step, metrics and
evaluations): what else a cancelled or replaced attempt still sends is dropped. Its rollouts,
retries and checkpoints are facts, kept under their own attempt: a cancel that lands after the
attempt's last checkpoint was written leaves the resumed attempt nothing to replay, so dropping
them would lose those steps' proofs for good. Ray is never asked here: jobs that die without a word are the
sweeper's (runs/sweeper.py, ``manage.py sweep_runs``), so a slow Ray head never holds up live events.
"""

from __future__ import annotations

import logging
import socket
import time
from datetime import datetime, timedelta, timezone as dt_timezone

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from config.logs import about_run
from runs import rollouts
from runs.entries import RAW_PAYLOAD_LIMIT, Unstorable, parse_entry, raw_text, storable_text
from runs.models import (
    FINAL_STATES,
    Attempt,
    AttemptCause,
    Checkpoint,
    DeadLetter,
    Evaluation,
    Run,
    RunEvent,
    RunState,
    StepMetrics,
)
from runs.streams import GROUP, as_text, stream_backlog
from trainer.cluster.failures import CAUSE_INFRASTRUCTURE
from trainer.observability.events import STREAM_PATTERN, EventType, RunStatus, TrainerEvent, run_id_of, stream_key

logger = logging.getLogger(__name__)

FORWARD_CHUNK = 100  # events per Channels message; keeps each message well under channels_redis's limits
FINAL_STATUS = {RunStatus.SUCCEEDED: RunState.SUCCEEDED, RunStatus.FAILED: RunState.FAILED,
                RunStatus.CANCELLED: RunState.CANCELLED}

# What an earlier attempt still sends and is kept (under its own attempt): what it made, never what it changes.
KEPT_FROM_EARLIER_ATTEMPTS = frozenset({EventType.ROLLOUT_FINISHED, EventType.RETRY_CREATED,
                                        EventType.CHECKPOINT_SAVED, EventType.CHECKPOINT_REMOVED})

def _keep_placement(event: RunEvent) -> None:
    """The attempt's latest placement; two "placed" events (the driver's learner ranks, then learner rank 0's
    rollout engines) merge their actors by name, so the page shows every actor's node."""
    attempt, _ = Attempt.objects.select_for_update().get_or_create(run_id=event.run_id, number=event.attempt)
    latest = dict(event.payload)
    if latest.get("state") == "placed" and attempt.placement.get("state") == "placed":
        actors = {actor["name"]: actor for actor in attempt.placement.get("actors", [])}
        actors.update({actor["name"]: actor for actor in latest.get("actors", [])})
        latest["actors"] = sorted(actors.values(), key=lambda actor: (actor["bundle"], actor["name"]))
    attempt.placement = latest
    attempt.save(update_fields=["placement"])


def _cause_of(status: RunState, payload: dict) -> AttemptCause | None:
    """A failed attempt's cause in the trainer's word: the infrastructure's where it says so
    (trainer/cluster/failures.py), else the run's own code, which a retry would only repeat."""
    if status != RunState.FAILED:
        return None
    return AttemptCause.INFRASTRUCTURE if payload.get("cause") == CAUSE_INFRASTRUCTURE else AttemptCause.RUN


# The database or Redis being away: wait and read again, never dead-letter.
INFRASTRUCTURE_ERRORS = (redis.RedisError, OperationalError, InterfaceError)


def browser_message(stored: RunEvent) -> dict:
    """What a watching browser receives: the stored event with its run-local number (for gaps) and the attempt
    that published it (each attempt's times are on its own clock)."""
    payload = dict(stored.payload)
    if stored.type == EventType.ROLLOUT_FINISHED:
        payload.pop("prompt", None)  # can be 8k tokens; the rollout page shows it
        payload.pop("checked_code", None)
        attempt_id = getattr(stored, "attempt_id", None)
        if attempt_id:
            payload["attempt_id"] = attempt_id
    return {"id": stored.pk, "number": stored.run_seq, "type": stored.type, "seq": stored.seq, "attempt": stored.attempt,
            "time": stored.published_at.timestamp(), "payload": payload}


class Backoff:
    """0.5 s, 1 s, 2 s … 30 s between tries while a service is away; back to 0.5 s after a success."""

    def __init__(self, first_s: float = 0.5, most_s: float = 30.0):
        self.first_s = first_s
        self.most_s = most_s
        self.next_s = first_s

    def delay(self) -> float:
        delay, self.next_s = self.next_s, min(self.next_s * 2, self.most_s)
        return delay

    def reset(self) -> None:
        self.next_s = self.first_s


class EventIngester:
    def __init__(self, redis_url: str | None = None, *, consumer: str | None = None, block_ms: int = 500,
                 batch_size: int = 500, claim_idle_ms: int = 60_000, maintain_every_s: float = 5.0,
                 stream_grace_s: float | None = None):
        self.redis = redis.Redis.from_url(redis_url or settings.REDIS_URL, socket_connect_timeout=5,
                                          socket_timeout=max(10.0, block_ms / 1000 + 5))
        # The host's name, not the process's: an ingester restarted on the same host (a crash, a
        # SIGKILL mid-batch) first re-reads what it had read but not stored, in stream order. A
        # replaced pod's entries (another host name) are claimed after claim_idle_ms.
        self.consumer = consumer or socket.gethostname()
        self.block_ms = block_ms
        self.batch_size = batch_size
        self.claim_idle_ms = claim_idle_ms
        self.maintain_every_s = maintain_every_s
        self.stream_grace_s = settings.EVENT_STREAM_GRACE_S if stream_grace_s is None else stream_grace_s
        self._known_groups: set[str] = set()
        self._last_maintenance = 0.0
        self._last_scan = float("-inf")
        self._streams_found: set[str] = set()
        self.channel_layer = get_channel_layer()

    # -- the loop -------------------------------------------------------------------------

    def run_forever(self, should_stop=lambda: False) -> None:
        logger.info("ingester %s reading run event streams", self.consumer)
        backoff = Backoff()
        while not should_stop():
            try:
                self.poll_once()
                if time.monotonic() - self._last_maintenance >= self.maintain_every_s:
                    self._last_maintenance = time.monotonic()
                    self.maintain_streams()
            except INFRASTRUCTURE_ERRORS as error:
                delay = backoff.delay()
                logger.warning("%s is unavailable (%s: %s); nothing acknowledged, reading again in %.1f s",
                               "Redis" if isinstance(error, redis.RedisError) else "the database",
                               type(error).__name__, error, delay)
                self._recover_connections()
                _sleep(delay, should_stop)
            except Exception:  # a bug of ours, not an entry (those are dead-lettered): log it, keep going
                delay = backoff.delay()
                logger.exception("the ingester's loop failed; trying again in %.1f s", delay)
                self._recover_connections()
                _sleep(delay, should_stop)
            else:
                backoff.reset()

    def _recover_connections(self) -> None:
        # A broken database connection stays broken inside Django until it is closed.
        try:
            connection.close()
        except DatabaseError:
            pass
        self._known_groups.clear()  # Redis may have restarted without its data: create the groups again
        self._last_scan = float("-inf")

    def poll_once(self) -> int:
        streams = self._streams_to_read()
        if not streams:
            time.sleep(self.block_ms / 1000)
            return 0
        # What this consumer read but did not acknowledge (an outage mid-batch), then what other
        # consumers left pending too long (a killed or replaced ingester), then new entries.
        stored = self._read(streams, "0", block=None)[1]
        for key in streams:
            stored += self._claim_stale(key)
        return stored + self._read(streams, ">", block=self.block_ms)[1]

    def _read(self, streams: list[str], start: str, block: int | None) -> tuple[int, int]:
        """(entries read, events newly stored)."""
        try:
            response = self.redis.xreadgroup(GROUP, self.consumer, {key: start for key in streams},
                                             count=self.batch_size, block=block)
        except redis.ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            # A stream or its group vanished (Redis restarted without its data, a key deleted):
            # forget what we knew and create them again on the next poll.
            logger.warning("consumer group missing (%s); recreating it", error)
            self._known_groups.clear()
            return 0, 0
        read = stored = 0
        for key, entries in response or []:
            if entries:
                read += len(entries)
                stored += self.ingest(as_text(key), entries)
        return read, stored

    def _claim_stale(self, key: str) -> int:
        stored, start = 0, "0-0"
        while True:
            try:
                reply = self.redis.xautoclaim(key, GROUP, self.consumer, min_idle_time=self.claim_idle_ms,
                                              start_id=start, count=self.batch_size)
            except redis.ResponseError as error:
                if "NOGROUP" not in str(error):
                    raise
                self._known_groups.discard(key)
                return stored
            start, entries = as_text(reply[0]), reply[1]
            if entries:
                logger.info("claimed %d entries of %s left pending over %d ms by another consumer",
                            len(entries), key, self.claim_idle_ms)
                stored += self.ingest(key, entries)
            if start == "0-0":
                return stored

    def _streams_to_read(self) -> list[str]:
        """Streams of runs that may still publish, and every run stream still in Redis (late or unread events)."""
        run_ids = Run.objects.filter(state__in=(RunState.STARTING, RunState.RUNNING)).values_list("pk", flat=True)
        keys = {stream_key(str(pk)) for pk in run_ids}
        if time.monotonic() - self._last_scan >= self.maintain_every_s:  # SCAN walks every key: not on each poll
            self._last_scan = time.monotonic()
            self._streams_found = {as_text(key) for key in self.redis.scan_iter(match=STREAM_PATTERN, count=1000,
                                                                              _type="stream")}
        keys.update(self._streams_found)
        for key in sorted(keys):
            if key not in self._known_groups:
                try:
                    self.redis.xgroup_create(key, GROUP, id="0", mkstream=True)
                except redis.ResponseError as error:
                    if "BUSYGROUP" not in str(error):
                        raise
                self._known_groups.add(key)
        return sorted(keys)

    # -- storing --------------------------------------------------------------------------

    def ingest(self, key: str, entries: list) -> int:
        """Store what can be stored, dead-letter the rest, acknowledge all, forward what was new."""
        with about_run(run_id_of(key)):  # every log line of this batch names its run
            return self._ingest(key, entries)

    def _ingest(self, key: str, entries: list) -> int:
        run_id = run_id_of(key)
        parsed, rejected = [], []
        for entry_id, fields in entries:
            entry_id = as_text(entry_id)
            if not fields:
                continue  # trimmed or deleted while pending: it was stored before
            try:
                if run_id is None:
                    raise Unstorable(f"{key!r} is not a run's event stream (trainer:run:<id>:events)")
                event = parse_entry(fields, run_id)
                if event.type == EventType.ROLLOUT_PROGRESS:
                    continue  # live text belongs on the live channel (runs/live.py): never stored, nor dead-lettered
                parsed.append((entry_id, fields, event))
            except Unstorable as error:
                rejected.append((entry_id, fields, str(error)))
            except Exception as error:  # noqa: BLE001 - an entry that breaks the parser is still only an entry
                rejected.append((entry_id, fields, f"could not be read: {type(error).__name__}: {error}"))
        try:
            stored = self.store([event for _, _, event in parsed])
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception as error:  # noqa: BLE001 - one entry spoils the batch: find it, store the others
            logger.warning("storing %d events of %s at once failed (%s: %s); storing them one by one",
                           len(parsed), key, type(error).__name__, error)
            stored = []
            for entry_id, fields, event in parsed:
                try:
                    stored += self.store([event])
                except INFRASTRUCTURE_ERRORS:
                    raise
                except Exception as error:  # noqa: BLE001 - whatever it is, this entry cannot be stored
                    rejected.append((entry_id, fields, f"the database refused it: {type(error).__name__}: {error}"))
        if rejected:
            self.dead_letter(key, run_id, rejected)
        self.redis.xack(key, GROUP, *[as_text(entry_id) for entry_id, _ in entries])
        self.forward(stored)
        return len(stored)

    def dead_letter(self, key: str, run_id: int | None, rejected: list[tuple[str, dict, str]]) -> None:
        run_pk = run_id if run_id is not None and Run.objects.filter(pk=run_id).exists() else None
        for entry_id, _, error in rejected:
            logger.error("dead-lettering entry %s of %s: %s", entry_id, key, error)
        # Unique per entry: an entry read again after a crash before its acknowledgement is kept once.
        letters = [DeadLetter(run_id=run_pk, stream_key=key, entry_id=entry_id, raw_payload=raw_text(fields),
                              error=storable_text(error)[:10_000]) for entry_id, fields, error in rejected]
        try:
            with transaction.atomic():
                DeadLetter.objects.bulk_create(letters, ignore_conflicts=True)
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception:  # noqa: BLE001 - the letter itself refused: keep it in plain ASCII, never block the stream
            for letter in letters:
                letter.raw_payload = ascii(letter.raw_payload)[:RAW_PAYLOAD_LIMIT]
                letter.error = ascii(letter.error)[:10_000]
            DeadLetter.objects.bulk_create(letters, ignore_conflicts=True)

    def forward(self, stored_events: list[RunEvent]) -> None:
        """One Channels message per run and chunk, not per event: a step's burst of 2,048
        rollouts would otherwise cost 2,048 round trips to Redis. A message lost here is no event
        lost: the page sees the gap in ``number`` and fetches what it missed."""
        by_run: dict[int, list[dict]] = {}
        for stored in stored_events:
            by_run.setdefault(stored.run_id, []).append(browser_message(stored))
        for run_id, messages in by_run.items():
            for start in range(0, len(messages), FORWARD_CHUNK):
                try:
                    async_to_sync(self.channel_layer.group_send)(
                        f"run-{run_id}", {"type": "run.events", "events": messages[start:start + FORWARD_CHUNK]}
                    )
                except Exception as error:  # noqa: BLE001 - stored and acknowledged already; pages catch up
                    logger.warning("could not forward events of run %s to browsers: %s", run_id, error)
                    return

    def store(self, events: list[TrainerEvent]) -> list[RunEvent]:
        """Store events not stored before, numbered per run, and apply their effects, in one transaction."""
        if not events:
            return []
        with transaction.atomic():
            # The runs' rows first, in id order: two ingesters storing the same run take turns, so
            # each sees the other's events (no double) and numbers follow on (no gap, no clash).
            run_ids = sorted({int(e.run_id) for e in events})
            current_attempt = dict(Run.objects.select_for_update().filter(pk__in=run_ids).order_by("pk")
                                   .values_list("pk", "attempt"))
            existing_runs = list(current_attempt)
            seen = set(RunEvent.objects.filter(event_id__in=[e.event_id for e in events])
                       .values_list("event_id", flat=True))
            fresh: dict[str, TrainerEvent] = {}
            for event in events:
                if event.event_id in seen or event.event_id in fresh:
                    continue
                if int(event.run_id) not in existing_runs:
                    logger.warning("event %s names run %s, which does not exist; skipped", event.event_id,
                                   event.run_id)
                    continue
                if event.attempt != current_attempt[int(event.run_id)] and event.type not in KEPT_FROM_EARLIER_ATTEMPTS:
                    # A late event of an attempt that was cancelled or replaced must not touch the current one.
                    logger.info("dropping %s of run %s's attempt %s (the run is at attempt %s)", event.type,
                                event.run_id, event.attempt, current_attempt[int(event.run_id)])
                    continue
                fresh[event.event_id] = event
            last_numbers = dict(RunEvent.objects.filter(run_id__in=existing_runs).values("run_id")
                                .annotate(last=Max("run_seq")).values_list("run_id", "last"))
            rows = []
            for event in fresh.values():
                run_id = int(event.run_id)
                last_numbers[run_id] = (last_numbers.get(run_id) or 0) + 1
                rows.append(RunEvent(run_id=run_id, event_id=event.event_id, attempt=event.attempt, seq=event.seq,
                                     run_seq=last_numbers[run_id], type=event.type, payload=event.payload,
                                     published_at=datetime.fromtimestamp(event.time, tz=dt_timezone.utc)))
            stored = RunEvent.objects.bulk_create(rows)
            self._apply_effects(stored)
        return stored

    def _apply_effects(self, stored: list[RunEvent]) -> None:
        # Rollouts and retries are the proofs app's rows: handed over in this same transaction (runs/rollouts.py).
        rollouts.store(stored)
        for event in stored:
            run = Run(pk=event.run_id)
            payload = event.payload
            if event.type == EventType.RUN_STARTED:
                Run.objects.get(pk=event.run_id).transition(RunState.RUNNING, reason="the trainer started",
                                                            expected=(RunState.STARTING,), attempt=event.attempt)
            elif event.type == EventType.STEP_STARTED:
                Run.objects.filter(pk=run.pk, current_step__lt=payload.get("step", 0)).update(current_step=payload["step"])
            elif event.type == EventType.METRICS:
                StepMetrics.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                     defaults={"values": payload.get("values", {})})
                # An SFT run publishes no step_started: its metrics are how far it got.
                Run.objects.filter(pk=run.pk, current_step__lt=payload["step"]).update(current_step=payload["step"])
            elif event.type == EventType.EVALUATION:
                Evaluation.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                    defaults={"values": payload.get("values", {}),
                                                              "not_attempted": payload.get("not_attempted", [])})
            elif event.type == EventType.CHECKPOINT_SAVED:
                Checkpoint.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                    defaults={"path": payload.get("path", ""), "removed_at": None,
                                                              "removal_reason": ""})
            elif event.type == EventType.CHECKPOINT_REMOVED:
                # Kept as a row (a run may have started from it: its lineage stays), marked as gone from disk.
                Checkpoint.objects.filter(run_id=run.pk, step=payload["step"]).update(
                    removed_at=timezone.now(), removal_reason=payload.get("reason", ""))
            elif event.type == EventType.PLACEMENT:
                _keep_placement(event)
            elif event.type == EventType.RUN_FINISHED:
                status = FINAL_STATUS.get(payload.get("status"), RunState.FAILED)
                reason = payload.get("reason") or ""
                Run.objects.get(pk=run.pk).transition(status, reason=reason or f"the trainer finished: {status.label}",
                                                      attempt=event.attempt, cause=_cause_of(status, payload))

    # -- keeping Redis small ----------------------------------------------------------------

    def maintain_streams(self) -> None:
        """Trim every run stream up to what is stored; delete those of runs final for ``stream_grace_s``."""
        keys = [as_text(key) for key in self.redis.scan_iter(match=STREAM_PATTERN, count=1000, _type="stream")]
        runs = {run.pk: run for run in Run.objects.filter(pk__in=[i for i in map(run_id_of, keys) if i is not None])
                .only("pk", "state", "finished_at")}
        cutoff = timezone.now() - timedelta(seconds=self.stream_grace_s)
        for key in keys:
            backlog = stream_backlog(self.redis, key)
            if backlog is None or not backlog.has_group:
                continue  # no group yet: nothing was read, nothing may go
            if backlog.trim_to is not None:
                self.redis.xtrim(key, minid=backlog.trim_to, approximate=False)
            run = runs.get(run_id_of(key))
            is_over = run is None or (run.state in FINAL_STATES and run.finished_at and run.finished_at <= cutoff)
            if is_over and backlog.is_drained:
                # The run may have been resumed since the query above: ask again just before deleting.
                if run is None or Run.objects.filter(pk=run.pk, state__in=FINAL_STATES).exists():
                    self.redis.delete(key)
                    self._known_groups.discard(key)
                    self._streams_found.discard(key)
                    logger.info("deleted the stream %s: %s", key, "its run is final and stored"
                                if run else "no run has this id")

def _sleep(seconds: float, should_stop) -> None:
    deadline = time.monotonic() + seconds
    while not should_stop() and time.monotonic() < deadline:
        time.sleep(min(0.2, deadline - time.monotonic()))
