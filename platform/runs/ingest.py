"""The ingester: trainer events from Redis Streams into Postgres, then out to the browsers.

Each run's events arrive on its own stream. They are read with a consumer group, stored in
bulk and idempotently (an event delivered twice is stored once), acknowledged only after the
transaction commits, and forwarded to the run's Channels group. The ingester also asks Ray
about every active run's job, so that a job that died without a word still ends its run.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import datetime, timezone as dt_timezone

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from proofs.models import ProofAttempt, RetryFeedback
from promptsets.models import Problem
from runs import ray_jobs
from runs.models import Checkpoint, Evaluation, Run, RunEvent, RunState, StepMetrics
from trainer.events import EventType, RolloutFinished, TrainerEvent, stream_key

logger = logging.getLogger(__name__)

GROUP = "platform-ingester"
FORWARD_CHUNK = 100  # events per Channels message; keeps each message well under channels_redis's limits
FINAL_STATUS = {"succeeded": RunState.SUCCEEDED, "failed": RunState.FAILED, "cancelled": RunState.CANCELLED}


def browser_message(stored: RunEvent) -> dict:
    """What a watching browser receives: the stored event, its database id first (for catching up)."""
    payload = dict(stored.payload)
    if stored.type == EventType.ROLLOUT_FINISHED:
        payload.pop("prompt", None)  # can be 8k tokens; the rollout page shows it
        payload.pop("checked_code", None)
        attempt_id = getattr(stored, "attempt_id", None)
        if attempt_id:
            payload["attempt_id"] = attempt_id
    return {"id": stored.pk, "type": stored.type, "seq": stored.seq, "time": stored.published_at.timestamp(),
            "payload": payload}


class EventIngester:
    def __init__(self, redis_url: str | None = None, *, consumer: str | None = None, block_ms: int = 500,
                 batch_size: int = 1000, reconcile_every_s: float = 5.0):
        self.redis = redis.Redis.from_url(redis_url or settings.REDIS_URL)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.block_ms = block_ms
        self.batch_size = batch_size
        self.reconcile_every_s = reconcile_every_s
        self._known_groups: set[str] = set()
        self._last_reconcile = 0.0
        self.channel_layer = get_channel_layer()

    # -- the loop -------------------------------------------------------------------------

    def run_forever(self, should_stop=lambda: False) -> None:
        logger.info("ingester %s reading run event streams", self.consumer)
        while not should_stop():
            self.poll_once()

    def poll_once(self) -> int:
        streams = self._streams_to_read()
        stored = 0
        if streams:
            # First what this consumer was given but never acknowledged (a crash mid-batch), then new events.
            for start in ("0", ">"):
                try:
                    response = self.redis.xreadgroup(
                        GROUP, self.consumer, {key: start for key in streams}, count=self.batch_size,
                        block=None if start == "0" else self.block_ms,
                    )
                except redis.ResponseError as error:
                    if "NOGROUP" not in str(error):
                        raise
                    # A stream or its group vanished (Redis restarted without its data, a key
                    # deleted): forget what we knew and create them again on the next poll.
                    logger.warning("consumer group missing (%s); recreating it", error)
                    self._known_groups.clear()
                    return stored
                for key, entries in response or []:
                    if entries:
                        stored += self.ingest(key.decode() if isinstance(key, bytes) else key, entries)
        else:
            time.sleep(self.block_ms / 1000)
        if time.monotonic() - self._last_reconcile > self.reconcile_every_s:
            self._last_reconcile = time.monotonic()
            self.reconcile_jobs()
        return stored

    def _streams_to_read(self) -> list[str]:
        # Finished runs stay on the list for a while so their last events are drained.
        run_ids = Run.objects.filter(state__in=(RunState.STARTING, RunState.RUNNING)).values_list("pk", flat=True)
        recent = Run.objects.filter(finished_at__gte=_minutes_ago(10)).values_list("pk", flat=True)
        keys = [stream_key(str(pk)) for pk in {*run_ids, *recent}]
        for key in keys:
            if key not in self._known_groups:
                try:
                    self.redis.xgroup_create(key, GROUP, id="0", mkstream=True)
                except redis.ResponseError as error:
                    if "BUSYGROUP" not in str(error):
                        raise
                self._known_groups.add(key)
        return keys

    # -- storing --------------------------------------------------------------------------

    def ingest(self, key: str, entries: list) -> int:
        events = []
        for entry_id, fields in entries:
            try:
                events.append(TrainerEvent.from_stream_fields(fields))
            except Exception as error:  # a malformed entry must not block the stream behind it
                logger.error("dropping malformed event %s on %s: %s", entry_id, key, error)
        new_events = self.store(events)
        self.redis.xack(key, GROUP, *[entry_id for entry_id, _ in entries])
        self.forward(new_events)
        return len(new_events)

    def forward(self, stored_events: list[RunEvent]) -> None:
        """One Channels message per run and chunk, not per event: a step's burst of 2,048
        rollouts would otherwise cost 2,048 round trips to Redis."""
        by_run: dict[int, list[dict]] = {}
        for stored in stored_events:
            by_run.setdefault(stored.run_id, []).append(browser_message(stored))
        for run_id, messages in by_run.items():
            for start in range(0, len(messages), FORWARD_CHUNK):
                async_to_sync(self.channel_layer.group_send)(
                    f"run-{run_id}", {"type": "run.events", "events": messages[start:start + FORWARD_CHUNK]}
                )

    def store(self, events: list[TrainerEvent]) -> list[RunEvent]:
        """Store events not stored before, and apply their effects, in one transaction."""
        if not events:
            return []
        with transaction.atomic():
            seen = set(RunEvent.objects.filter(event_id__in=[e.event_id for e in events]).values_list("event_id", flat=True))
            fresh = [e for e in events if e.event_id not in seen]
            fresh = list({e.event_id: e for e in fresh}.values())
            existing_runs = set(Run.objects.filter(pk__in={int(e.run_id) for e in fresh}).values_list("pk", flat=True))
            fresh = [e for e in fresh if int(e.run_id) in existing_runs]
            RunEvent.objects.bulk_create(
                [RunEvent(run_id=int(e.run_id), event_id=e.event_id, seq=e.seq, type=e.type, payload=e.payload,
                          published_at=datetime.fromtimestamp(e.time, tz=dt_timezone.utc)) for e in fresh],
                ignore_conflicts=True,
            )
            stored = list(RunEvent.objects.filter(event_id__in=[e.event_id for e in fresh]).order_by("run_id", "seq"))
            self._apply_effects(stored)
        return stored

    def _apply_effects(self, stored: list[RunEvent]) -> None:
        rollouts = [e for e in stored if e.type == EventType.ROLLOUT_FINISHED]
        if rollouts:
            self._store_attempts(rollouts)
        for event in stored:
            run = Run(pk=event.run_id)
            payload = event.payload
            if event.type == EventType.RUN_STARTED:
                Run.objects.get(pk=event.run_id).transition(RunState.RUNNING, reason="the trainer started",
                                                            expected=(RunState.STARTING,))
            elif event.type == EventType.STEP_STARTED:
                Run.objects.filter(pk=run.pk, current_step__lt=payload.get("step", 0)).update(current_step=payload["step"])
            elif event.type == EventType.METRICS:
                StepMetrics.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                     defaults={"values": payload.get("values", {})})
            elif event.type == EventType.EVALUATION:
                Evaluation.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                    defaults={"values": payload.get("values", {})})
            elif event.type == EventType.CHECKPOINT_SAVED:
                Checkpoint.objects.update_or_create(run_id=run.pk, step=payload["step"],
                                                    defaults={"path": payload.get("path", ""), "removed_at": None,
                                                              "removal_reason": ""})
            elif event.type == EventType.CHECKPOINT_REMOVED:
                # Kept as a row (a run may have started from it: its lineage stays), marked as gone from disk.
                Checkpoint.objects.filter(run_id=run.pk, step=payload["step"]).update(
                    removed_at=timezone.now(), removal_reason=payload.get("reason", ""))
            elif event.type == EventType.RETRY_CREATED:
                parent = ProofAttempt.objects.filter(run_id=run.pk, rollout_key=payload.get("parent_rollout_key")).first()
                RetryFeedback.objects.get_or_create(
                    run_id=run.pk, parent_rollout_key=payload.get("parent_rollout_key", ""),
                    defaults={"parent": parent, "feedback": payload.get("feedback", ""),
                              "created_step": payload.get("step", 0)},
                )
            elif event.type == EventType.RUN_FINISHED:
                status = FINAL_STATUS.get(payload.get("status"), RunState.FAILED)
                reason = payload.get("reason") or ""
                Run.objects.get(pk=run.pk).transition(status, reason=reason or f"the trainer finished: {status.label}")

    def _store_attempts(self, events: list[RunEvent]) -> None:
        rows = []
        for event in events:
            rollout = RolloutFinished.model_validate(event.payload)
            rows.append(ProofAttempt(
                run_id=event.run_id, rollout_key=rollout.rollout_key, step=rollout.step,
                problem_key=rollout.problem_id, problem_name=rollout.problem_name,
                formal_statement=rollout.formal_statement, turn=rollout.turn,
                parent_rollout_key=rollout.parent_rollout_key or "", sample_index=rollout.sample_index,
                prompt=rollout.prompt, response=rollout.response, reasoning=rollout.reasoning,
                lean_code=rollout.lean_code, checked_code=rollout.checked_code,
                format_error=rollout.format_error or "", verdict=rollout.verdict or "",
                lean_messages=[m.model_dump() for m in rollout.lean_messages], reward=rollout.reward,
                reasons=rollout.reasons, is_censored=rollout.is_censored,
                is_standin_verdict=rollout.is_standin_verdict, num_tokens=rollout.num_tokens,
                is_truncated=rollout.is_truncated, generation_seconds=rollout.generation_seconds,
                verification_seconds=rollout.verification_seconds, sampling=rollout.sampling, event_id=event.pk,
            ))
        ProofAttempt.objects.bulk_create(rows, ignore_conflicts=True)
        by_run: dict[int, list[str]] = {}
        for row in rows:
            by_run.setdefault(row.run_id, []).append(row.rollout_key)
        for run_id, keys in by_run.items():
            run = Run.objects.select_related("promptset_version").get(pk=run_id)
            attempts = ProofAttempt.objects.filter(run_id=run_id, rollout_key__in=keys)
            problems = dict(
                Problem.objects.filter(promptset_id=run.promptset_version.promptset_id,
                                       problem_key__in={a.problem_key for a in attempts}).values_list("problem_key", "pk")
            )
            parents = dict(
                ProofAttempt.objects.filter(run_id=run_id, rollout_key__in={a.parent_rollout_key for a in attempts if a.parent_rollout_key})
                .values_list("rollout_key", "pk")
            )
            for attempt in attempts:
                attempt.problem_id = problems.get(attempt.problem_key)
                attempt.parent_id = parents.get(attempt.parent_rollout_key)
            ProofAttempt.objects.bulk_update(attempts, ["problem", "parent"])
        attempt_ids = dict(
            ProofAttempt.objects.filter(event_id__in=[e.pk for e in events]).values_list("event_id", "pk")
        )
        for event in events:
            event.attempt_id = attempt_ids.get(event.pk)

    # -- jobs that died without a word ----------------------------------------------------

    def reconcile_jobs(self) -> None:
        for run in Run.objects.filter(state__in=(RunState.STARTING, RunState.RUNNING)).exclude(ray_job_id=""):
            try:
                status = ray_jobs.status(run.ray_job_id)
            except Exception as error:
                logger.warning("cannot ask Ray about run %s (job %s): %s", run.pk, run.ray_job_id, error)
                continue
            if not status.is_terminal:
                continue
            # Drain the run's stream first: its own run_finished event says more than Ray can.
            self.poll_stream(stream_key(str(run.pk)))
            run.refresh_from_db()
            if run.is_final:
                continue
            if status.state == ray_jobs.MISSING:
                run.mark_failed(f"the Ray cluster has no record of the job {run.ray_job_id}: the cluster was restarted "
                                "while the run was going. Resume the run to continue from its last checkpoint.")
            elif status.state == "STOPPED":
                run.transition(RunState.CANCELLED, reason="the Ray job was stopped")
            elif status.state == "FAILED":
                run.mark_failed(f"the Ray job failed: {status.message}\n\nLast lines of the job's log:\n"
                                f"{ray_jobs.log_tail(run.ray_job_id)}")
            else:
                run.mark_failed("the trainer exited without reporting how the run ended (no run_finished event)\n\n"
                                f"Last lines of the job's log:\n{ray_jobs.log_tail(run.ray_job_id)}")

    def poll_stream(self, key: str) -> None:
        if key not in self._known_groups:
            self._streams_to_read()
        for start in ("0", ">"):
            response = self.redis.xreadgroup(GROUP, self.consumer, {key: start}, count=self.batch_size)
            for stream, entries in response or []:
                if entries:
                    self.ingest(key, entries)


def _minutes_ago(minutes: int):
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(minutes=minutes)
