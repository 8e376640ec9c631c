"""Attempts: each dispatch of a run is an attempt, and only the current attempt's events change the run.

The real Redis and the ingester: a late event of a cancelled attempt cannot end, restart or move
the attempt that resumed the run; what it made (rollouts, checkpoints) is kept under its own attempt.
"""

import pytest
import redis
from django.conf import settings

from proofs.models import ProofAttempt
from runs import actions
from runs.ingest import EventIngester
from runs.models import RunEvent, RunState
from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def clean_streams():
    yield
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


def publisher_for(run, attempt):
    return EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)), attempt=attempt)


def rollout(key, step=1):
    return RolloutFinished(rollout_key=key, step=step, problem_id="add_small", verdict="valid", reward=1.0)


def resumed(run):
    """The run cancelled and resumed, as a person does it; no Celery here, so nothing is dispatched."""
    run.transition(RunState.CANCELLED, reason="cancelled by its owner")
    assert run.transition(RunState.QUEUED, reason="resumed", expected=(RunState.CANCELLED,))
    run.refresh_from_db()
    return run


def test_a_launched_run_is_attempt_1_and_each_resume_starts_the_next_with_its_own_job_id(make_run):
    run = make_run(state="running", ray_job_id="run-x-attempt-1")
    assert run.attempt == 1 and run.ray_job_id_of_attempt == f"run-{run.pk}-attempt-1"
    run = resumed(run)
    assert run.attempt == 2 and run.ray_job_id == "" and run.ray_job_id_of_attempt == f"run-{run.pk}-attempt-2"


def test_a_late_run_finished_of_a_cancelled_attempt_does_not_end_the_resumed_run(make_run):
    run = resumed(make_run(state="running"))
    publisher_for(run, attempt=1).publish(EventType.RUN_FINISHED, {"status": "cancelled", "reason": "stopped by SIGTERM"})
    EventIngester().poll_once()
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 2
    assert not RunEvent.objects.filter(run=run).exists()


def test_the_old_attempts_rollouts_and_checkpoints_are_kept_under_it_and_change_nothing_of_the_current_one(make_run):
    """A cancel that lands after the attempt's last checkpoint leaves the resumed attempt nothing to
    replay: the late rollouts of those steps are the run's only copy, kept under the attempt that made them."""
    run = resumed(make_run(state="running"))
    run.transition(RunState.STARTING, expected=(RunState.QUEUED,))
    old = publisher_for(run, attempt=1)
    old.publish(EventType.STEP_STARTED, {"step": 2})
    old.publish(EventType.ROLLOUT_FINISHED, rollout("a1-s2-p0-r0", step=2))
    old.publish(EventType.METRICS, {"step": 2, "values": {"reward/mean": 1.0}})
    old.publish(EventType.CHECKPOINT_SAVED, {"step": 2, "path": "/checkpoints/step-2"})
    old.publish(EventType.RUN_FINISHED, {"status": "cancelled", "reason": "stopped by SIGTERM"})
    current = publisher_for(run, attempt=2)
    current.publish(EventType.RUN_STARTED, {})
    current.publish(EventType.ROLLOUT_FINISHED, rollout("a2-s3-p0-r0", step=3))
    EventIngester().poll_once()
    run.refresh_from_db()
    assert run.state == RunState.RUNNING and run.current_step == 0
    assert not run.step_metrics.exists()
    assert sorted(ProofAttempt.objects.filter(run=run).values_list("rollout_key", "run_attempt")) == [
        ("a1-s2-p0-r0", 1), ("a2-s3-p0-r0", 2)]
    assert list(run.checkpoints.values_list("step", flat=True)) == [2]
    assert sorted(RunEvent.objects.filter(run=run, attempt=1).values_list("type", flat=True)) == [
        EventType.CHECKPOINT_SAVED, EventType.ROLLOUT_FINISHED]


def test_the_current_attempts_run_finished_ends_the_run(make_run):
    run = resumed(make_run(state="running"))
    run.transition(RunState.STARTING, expected=(RunState.QUEUED,))
    current = publisher_for(run, attempt=2)
    current.publish(EventType.RUN_STARTED, {})
    current.publish(EventType.RUN_FINISHED, {"status": "succeeded", "reason": ""})
    EventIngester().poll_once()
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED


def test_resume_refuses_a_run_that_has_not_ended(make_run):
    for state in ("queued", "starting", "running", "succeeded"):
        run = make_run(state=state)
        assert not actions.resume_run(run)
        run.refresh_from_db()
        assert run.state == state and run.attempt == 1
