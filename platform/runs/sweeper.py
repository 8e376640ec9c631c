"""The sweeper: no run stays in a non-final state without a live job, and no job outlives its run.

It runs in its own loop (``manage.py sweep_runs``), apart from the event ingester, so a slow or
unreachable Ray head never stalls live events; every Ray call it makes has a timeout
(``RAY_CALL_TIMEOUT_S``). Each pass:

- **admitted but queued too long** (the broker was down when the scheduler admitted it, or the
  worker that took the task died before claiming it): dispatch again. Dispatch claims only an
  admitted run, with a conditional update, so a dispatch sent twice starts one job.
- **starting too long**: the worker that claimed the run died. If it had submitted the job (Ray
  knows the attempt's predictable id), the job is adopted; if not, the run is queued again as its
  next attempt, and waits for the scheduler like any other.
- **its job ended** (stopped, failed, succeeded, or unknown to a restarted head) but the run did not
  hear it from the trainer: once the trainer's own ``run_finished`` is neither stored nor waiting in
  the run's stream, the run ends with what Ray says, the job's last log lines, and how to resume. A job whose
  supervisor actor died (its node was lost, taking the driver with it) is a failure of the infrastructure,
  retried by itself within the run's bound.
- **an automatic retry that is due** (an infrastructure failure's back-off has passed, and the Celery message
  that would have started it was lost): the next attempt is queued (``actions.retry_due_runs``).
- **a job whose run is final, or of an attempt that is no longer the run's current one**: stopped.
  A stop that fails is tried again on the next pass.

Every decision is a conditional update on the run's state and attempt, so the sweeper racing a
worker, the ingester or a person's cancel can never undo what they did.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import redis
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from promptsets.uploads import end_stalled_uploads
from runs import actions, ray_jobs, scheduling, signals
from runs.entries import Unstorable, parse_entry
from runs.models import AttemptCause, Run, RunEvent, RunState
from trainer.observability.events import EventType, stream_key

logger = logging.getLogger(__name__)

RESUME_HINT = "Resume the run to continue from its last checkpoint."
# How long a run_finished seen in the stream may wait for the ingester before Ray's word is taken instead.
STREAM_PATIENCE_S = 300.0


class Sweeper:
    def __init__(self, redis_url: str | None = None, *, clock=time.monotonic):
        self.redis = redis.Redis.from_url(redis_url or settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
        self.clock = clock
        self._job_ended_seen: dict[tuple[int, int], float] = {}  # (run, attempt) → when first seen ended
        self._redispatched: dict[tuple[int, int], float] = {}  # (run, attempt) → when last dispatched again

    # -- the loop ---------------------------------------------------------------------------

    def run_forever(self, should_stop=lambda: False, every_s: float | None = None) -> None:
        every_s = every_s or settings.SWEEP_EVERY_S
        logger.info("sweeper looking at runs and Ray jobs every %.0f s", every_s)
        while not should_stop():
            started = self.clock()
            try:
                self.sweep_once()
            except Exception:  # a database or Redis outage: log it, never die, try again
                logger.exception("sweep failed; trying again in %.0f s", every_s)
            while not should_stop() and self.clock() - started < every_s:
                time.sleep(0.2)

    def sweep_once(self) -> None:
        # A connection broken by a database restart is dropped here, not reused for ever.
        close_old_connections()
        self.redispatch_queued_runs()
        actions.retry_due_runs()
        self.check_active_runs()
        self.stop_jobs_without_a_live_run()
        end_stalled_uploads()  # an upload whose worker died would otherwise say "checking" for ever
        signals.sweep_passed.send(sender=Sweeper)

    # -- queued -------------------------------------------------------------------------------

    def redispatch_queued_runs(self) -> None:
        # The queue moves on every pass too, not only on a launch or an ending: a slot may have freed
        # while the message that would have said so was lost.
        scheduling.schedule()
        waited = timedelta(seconds=settings.SWEEP_QUEUED_AFTER_S)
        # Only runs the scheduler admitted: the others wait for their owner's quota, on purpose.
        for run in Run.objects.filter(state=RunState.QUEUED, admitted_at__isnull=False,
                                      updated_at__lt=timezone.now() - waited):
            key = (run.pk, run.attempt)
            if self.clock() - self._redispatched.get(key, float("-inf")) < settings.SWEEP_QUEUED_AFTER_S:
                continue
            if not actions.enqueue_dispatch(run.pk):
                continue  # the broker is still down: next pass
            self._redispatched[key] = self.clock()
            logger.warning("run %s was queued for over %.0f s; dispatched again", run.pk, settings.SWEEP_QUEUED_AFTER_S)

    # -- starting and running -------------------------------------------------------------------

    def check_active_runs(self) -> None:
        for run in Run.objects.filter(state__in=(RunState.STARTING, RunState.RUNNING)):
            job_id = run.ray_job_id_of_attempt
            try:
                status = ray_jobs.status(job_id)
            except ray_jobs.RayCallFailed as error:
                logger.warning("cannot ask Ray about run %s (job %s): %s", run.pk, job_id, error)
                continue
            if run.state == RunState.STARTING and not run.ray_job_id:
                # No job id saved yet: the worker may still be submitting it, or have died doing so.
                if status.state == ray_jobs.MISSING:
                    if self._starting_for_too_long(run):
                        self._queue_again(run)
                    continue
                if not status.is_terminal and self._starting_for_too_long(run):
                    self._adopt(run, job_id)
                    continue
            if status.is_terminal:
                self._end_run_whose_job_ended(run, status)
            else:
                self._job_ended_seen.pop((run.pk, run.attempt), None)

    def _starting_for_too_long(self, run: Run) -> bool:
        return run.updated_at < timezone.now() - timedelta(seconds=settings.SWEEP_STARTING_AFTER_S)

    def _queue_again(self, run: Run) -> None:
        """The worker that claimed the run died before submitting it: its next attempt waits in the queue.

        Only queued: the scheduler (run by the transition once it commits) admits and dispatches it like
        any other run, so a paused queue or a full quota holds it too.
        """
        reason = (f"no Ray job {run.ray_job_id_of_attempt} after {settings.SWEEP_STARTING_AFTER_S:.0f} s starting: the "
                  "worker that claimed the run stopped before submitting it; queued again as its next attempt")
        if run.transition(RunState.QUEUED, reason=reason, expected=(RunState.STARTING,), attempt=run.attempt):
            logger.warning("run %s: %s", run.pk, reason)

    def _adopt(self, run: Run, job_id: str) -> None:
        """The worker submitted the job and died before saving its id: the run takes it as its own."""
        adopted = Run.objects.filter(pk=run.pk, attempt=run.attempt, state=RunState.STARTING, ray_job_id="").update(
            ray_job_id=job_id)
        if adopted:
            run.state_changes.create(state=RunState.STARTING, reason=f"adopted the Ray job {job_id}, submitted by a "
                                                                      "worker that stopped before recording it")
            logger.warning("run %s: adopted Ray job %s", run.pk, job_id)

    def _end_run_whose_job_ended(self, run: Run, status: ray_jobs.JobStatus) -> None:
        key = (run.pk, run.attempt)
        now = self.clock()
        waited = now - self._job_ended_seen.setdefault(key, now)
        if waited < STREAM_PATIENCE_S and self._trainer_reported_the_end(run):
            return  # the ingester applies the trainer's own account, which says more than Ray can
        if waited < settings.SWEEP_ENDED_JOB_GRACE_S:
            return  # its last events may still be on their way
        job_id = run.ray_job_id_of_attempt
        if status.state == ray_jobs.MISSING:
            ended = run.mark_failed(
                f"the Ray cluster has no record of the job {job_id}: the cluster was restarted while the run was "
                f"going (or the job was never submitted). {RESUME_HINT}", attempt=run.attempt)
        elif status.state == "STOPPED":
            ended = run.transition(RunState.CANCELLED, reason=f"the Ray job {job_id} was stopped outside the platform",
                                   attempt=run.attempt)
        elif status.lost_its_driver:
            ended = run.mark_failed(
                f"the Ray job lost its driver (its node died or was removed): {status.message}\n\nLast lines of the "
                f"job's log:\n{ray_jobs.log_tail(job_id)}", attempt=run.attempt, cause=AttemptCause.INFRASTRUCTURE)
        elif status.state == "FAILED":
            ended = run.mark_failed(f"the Ray job failed: {status.message}\n\n{RESUME_HINT}\n\nLast lines of the "
                                    f"job's log:\n{ray_jobs.log_tail(job_id)}", attempt=run.attempt)
        else:
            ended = run.mark_failed("the trainer exited without reporting how the run ended (no run_finished event). "
                                    f"{RESUME_HINT}\n\nLast lines of the job's log:\n{ray_jobs.log_tail(job_id)}",
                                    attempt=run.attempt)
        if ended:
            self._job_ended_seen.pop(key, None)
            logger.warning("run %s ended by the sweeper: Ray says its job %s is %s", run.pk, job_id, status.state)

    def _trainer_reported_the_end(self, run: Run) -> bool:
        """Whether the attempt's run_finished is stored, or waiting in the run's stream for the ingester."""
        if RunEvent.objects.filter(run=run, attempt=run.attempt, type=EventType.RUN_FINISHED).exists():
            return True
        try:
            entries = self.redis.xrevrange(stream_key(str(run.pk)), count=50)
        except redis.RedisError as error:
            logger.warning("cannot read run %s's stream (%s); waiting for Redis before ending it", run.pk, error)
            return True
        for _, fields in entries:
            try:
                event = parse_entry(fields, run.pk)
            except Unstorable:  # a malformed entry is the ingester's to deal with
                continue
            if event.type == EventType.RUN_FINISHED and event.attempt == run.attempt:
                return True
        return False

    # -- jobs of final runs and of replaced attempts -------------------------------------------------

    def stop_jobs_without_a_live_run(self) -> None:
        try:
            jobs = [job for job in ray_jobs.platform_jobs() if not job.is_terminal]
        except ray_jobs.RayCallFailed as error:
            logger.warning("cannot list Ray's jobs: %s", error)
            return
        if not jobs:
            return
        owners = {job.job_id: ray_jobs.attempt_of(job.job_id) for job in jobs}
        runs = Run.objects.in_bulk({run_id for run_id, _ in owners.values()})
        for job in jobs:
            run_id, attempt = owners[job.job_id]
            run = runs.get(run_id)
            if run is not None and not run.is_final and attempt == run.attempt:
                continue
            why = ("its run no longer exists" if run is None else f"its run is {run.state}" if run.is_final
                   else f"its run is at attempt {run.attempt}")
            try:
                ray_jobs.stop(job.job_id)
            except ray_jobs.RayCallFailed as error:
                logger.warning("could not stop Ray job %s (%s); trying again on the next pass: %s", job.job_id, why, error)
                continue
            if job.state == "PENDING":
                logger.warning("asked Ray to stop job %s (%s), but %s", job.job_id, why,
                               ray_jobs.PENDING_STOP_NOTE.format(job_id="it"))
            else:
                logger.warning("stopped Ray job %s: %s", job.job_id, why)

