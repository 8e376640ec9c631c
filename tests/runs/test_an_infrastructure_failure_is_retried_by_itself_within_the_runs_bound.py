"""A failure of the infrastructure starts the run's next attempt by itself; a failure of its own code does not.

The real Postgres and Redis, the ingester reading the trainer's own RUN_FINISHED (published through its
EventPublisher, ``cause`` from trainer/cluster/failures.py), the real Celery task that starts a due retry, and
the sweeper reading a real Ray head's account of a job whose driver was lost (its supervisor actor killed from
outside, as a node's death does). Each retry goes through the queue as a resume does, after a back-off that
doubles (RUN_RETRY_FIRST_DELAY_S, RUN_RETRY_MAX_DELAY_S), up to the run's launch field ``infrastructure_retries``.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
import redis
import time_machine
from django.conf import settings as django_settings
from django.utils import timezone

from runs import actions
from runs.ingest import EventIngester
from runs.models import Attempt, AttemptCause, QueueState, Run, RunState
from runs.sweeper import Sweeper
from tests.runs.jobs import _KILL_SUPERVISOR, running_job_of_a_shell_trainer, wait_for_job
from trainer.cluster.failures import CAUSE_INFRASTRUCTURE
from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RunFinished, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

NODE_DIED = "node 3f2a9c1e (10.0.0.7) died: learner rank 1 was lost"


@pytest.fixture(autouse=True)
def clean_streams():
    yield
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


@pytest.fixture(autouse=True)
def back_off(settings):
    settings.RUN_RETRY_FIRST_DELAY_S = 30
    settings.RUN_RETRY_MAX_DELAY_S = 600


def trainer_ends(run: Run, reason: str, **cause) -> Run:
    """The trainer's RUN_FINISHED for the run's current attempt, as it publishes it, read by the ingester."""
    publisher = EventPublisher(str(run.pk), RedisStreamSink(django_settings.REDIS_URL, str(run.pk)),
                               attempt=run.attempt)
    publisher.publish(EventType.RUN_STARTED, {})
    publisher.publish(EventType.RUN_FINISHED, {**RunFinished(status=RunStatus.FAILED, reason=reason).model_dump(
        mode="json"), **cause})
    EventIngester(consumer="test").poll_once()
    run.refresh_from_db()
    return run


def test_an_attempt_lost_to_the_infrastructure_starts_the_next_one_by_itself_after_its_back_off(make_run, dispatched):
    run = trainer_ends(make_run(state="starting"), NODE_DIED, cause=CAUSE_INFRASTRUCTURE)
    assert run.state == RunState.FAILED and run.failure_reason == NODE_DIED
    first = Attempt.objects.get(run=run, number=1)
    assert first.cause == AttemptCause.INFRASTRUCTURE
    assert timedelta(seconds=29) < first.retry_at - first.ended_at <= timedelta(seconds=30)
    assert not actions.retry_due_runs()  # not before its back-off
    with time_machine.travel(first.retry_at + timedelta(seconds=1)):
        actions.retry_run_task.apply(args=(run.pk, 1))  # the task the failure scheduled, run by Celery's own API
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 2
    assert run.state_changes.last().reason == ("retried automatically after a failure of the infrastructure "
                                               "(retry 1 of 3), from the last checkpoint")


def test_each_back_off_is_twice_the_last_and_the_runs_bound_is_honoured(make_run, dispatched):
    run = make_run(state="starting", infrastructure_retries=2)
    waits = []
    for attempt in (1, 2, 3):
        run = trainer_ends(run, NODE_DIED, cause=CAUSE_INFRASTRUCTURE)
        ended = Attempt.objects.get(run=run, number=attempt)
        if ended.retry_at is None:
            break
        waits.append(round((ended.retry_at - ended.ended_at).total_seconds()))
        with time_machine.travel(ended.retry_at + timedelta(seconds=1)):
            assert actions.retry_due_runs() == 1  # the sweeper's pass, should the Celery message be lost
        run.refresh_from_db()
        run.transition(RunState.STARTING, reason="dispatched")
    assert waits == [30, 60]
    assert run.state == RunState.FAILED and run.attempt == 3
    assert Attempt.objects.get(run=run, number=3).outcome == (
        "failed: the infrastructure; not retried, the run's 2 automatic retries are used up")


def test_a_failure_of_the_runs_own_code_is_not_retried(make_run):
    run = trainer_ends(make_run(state="starting"), "ValueError: the loss is NaN at step 3")
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.cause == AttemptCause.RUN and attempt.retry_at is None
    with time_machine.travel(timezone.now() + timedelta(hours=1)):
        assert actions.retry_due_runs() == 0
    run.refresh_from_db()
    assert run.state == RunState.FAILED and run.attempt == 1


def test_a_run_launched_with_no_retries_is_not_retried(make_run):
    run = trainer_ends(make_run(state="starting", infrastructure_retries=0), NODE_DIED, cause=CAUSE_INFRASTRUCTURE)
    assert Attempt.objects.get(run=run, number=1).retry_at is None
    assert run.state == RunState.FAILED


@pytest.fixture
def prompt_sweeper(settings):
    settings.SWEEP_ENDED_JOB_GRACE_S = 0


def test_a_job_whose_driver_was_lost_with_its_node_is_retried_by_itself(make_admitted_run, ray_head, settings,
                                                                       tmp_path, prompt_sweeper, dispatched):
    run = running_job_of_a_shell_trainer(make_admitted_run, settings, tmp_path / "trainer", "sleep 600\n")
    # What a node's death does to the job's supervisor actor (and the driver it runs): gone, without a word.
    subprocess.run([sys.executable, "-c", _KILL_SUPERVISOR, f"127.0.0.1:{ray_head.port}", run.ray_job_id],
                   check=True, timeout=120)
    assert wait_for_job(run.ray_job_id, {"FAILED"}).lost_its_driver
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.FAILED and "lost its driver" in run.failure_reason
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.cause == AttemptCause.INFRASTRUCTURE and attempt.retry_at is not None
    with time_machine.travel(attempt.retry_at + timedelta(seconds=1)):
        Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.attempt == 2 and run.state == RunState.QUEUED and dispatched == [run.pk]


def test_a_job_whose_trainer_exits_with_an_error_is_not_retried(make_admitted_run, ray_head, settings, prompt_sweeper):
    settings.TRAINER_PYTHON = "/bin/false"
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert not wait_for_job(run.ray_job_id, {"FAILED"}).lost_its_driver
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    assert Attempt.objects.get(run=run, number=1).retry_at is None


def test_the_run_page_lists_each_attempt_and_why_it_ended(make_run, alices_client, dispatched):
    run = trainer_ends(make_run(state="starting"), NODE_DIED, cause=CAUSE_INFRASTRUCTURE)
    retry_at = Attempt.objects.get(run=run, number=1).retry_at
    with time_machine.travel(retry_at + timedelta(seconds=1)):
        actions.retry_due_runs()
    run.refresh_from_db()
    run.transition(RunState.STARTING, reason="dispatched")
    run = trainer_ends(run, "ValueError: the loss is NaN at step 3")
    page = alices_client.get(run.get_absolute_url()).content.decode()
    attempts = page[page.index('<section id="attempts"'):]
    attempts = attempts[:attempts.index("</section>")]
    first, second = attempts.split('<li id="attempt-2"')
    assert "Attempt 1" in first and f"failed: the infrastructure; retried automatically at {retry_at:%H:%M} UTC" in first
    assert NODE_DIED in first
    assert "Attempt 2" in second and "failed: the run&#x27;s code (not retried: it would fail the same way)" in second
    assert "the loss is NaN at step 3" in second


def test_a_retry_waits_in_the_queue_as_a_resume_does(make_run, dispatched):
    QueueState.objects.update_or_create(pk=1, defaults={"is_paused": True, "reason": "maintenance"})
    run = trainer_ends(make_run(state="starting"), NODE_DIED, cause=CAUSE_INFRASTRUCTURE)
    with time_machine.travel(Attempt.objects.get(run=run, number=1).retry_at + timedelta(seconds=1)):
        assert actions.retry_due_runs() == 1
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 2
    assert run.admitted_at is None and dispatched == []  # the paused queue holds it
