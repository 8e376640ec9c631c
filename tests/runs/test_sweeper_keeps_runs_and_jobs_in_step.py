"""The sweeper against the real local Ray head: no run stays non-final without a live job, and no job
outlives its run. Each test sets up what a fault leaves behind, then runs one pass or a few."""

import socket
import time

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from runs import actions, ray_jobs
from runs.models import QueueState, Run, RunState
from runs.sweeper import Sweeper
from tests.runs.jobs import wait_for_job
from trainer.observability.events import EventPublisher, EventType, RedisStreamSink

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def prompt_sweeper(settings):
    settings.SWEEP_QUEUED_AFTER_S = 0
    settings.SWEEP_STARTING_AFTER_S = 0
    settings.SWEEP_ENDED_JOB_GRACE_S = 0
    yield
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


@pytest.fixture
def slow_trainer(settings, tmp_path):
    script = tmp_path / "slow-trainer"
    script.write_text("#!/bin/sh\nsleep 600\n")
    script.chmod(0o755)
    settings.TRAINER_PYTHON = str(script)


def test_a_job_that_crashes_without_reporting_fails_the_run_with_the_log_and_how_to_resume(make_admitted_run, ray_head,
                                                                                          settings):
    settings.TRAINER_PYTHON = "/bin/false"
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    wait_for_job(run.ray_job_id, {"FAILED"})
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    assert "the Ray job failed" in run.failure_reason and "Resume the run" in run.failure_reason


def test_a_run_whose_job_the_cluster_no_longer_knows_fails_and_says_to_resume(make_run, ray_head):
    # What a restarted Ray head leaves behind: the run says running, the new cluster never heard of its job.
    run = make_run(state="running", ray_job_id="")
    Run.objects.filter(pk=run.pk).update(ray_job_id=run.ray_job_id_of_attempt)
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    assert "has no record of the job" in run.failure_reason and "Resume the run" in run.failure_reason


def test_a_run_finished_waiting_in_the_stream_is_left_to_the_ingester(make_run, ray_head):
    run = make_run(state="running")
    Run.objects.filter(pk=run.pk).update(ray_job_id=run.ray_job_id_of_attempt)
    sink = RedisStreamSink(django_settings.REDIS_URL, str(run.pk))
    EventPublisher(str(run.pk), sink).publish(EventType.RUN_FINISHED, {"status": "succeeded"})
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.RUNNING  # the trainer's own account will end it, not Ray's


@pytest.fixture
def celery_in_this_process():
    """The real dispatch task, run eagerly here instead of by a worker."""
    from config.celery import app

    was = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = was


def test_a_run_queued_too_long_is_dispatched_again(make_run, ray_head, settings, celery_in_this_process):
    settings.TRAINER_PYTHON = "/bin/true"
    run = make_run()  # queued, and its dispatch lost (the broker was down at launch)
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.ray_job_id == f"run-{run.pk}-attempt-1"


def test_a_run_left_starting_by_a_worker_that_died_before_submitting_is_queued_as_its_next_attempt(make_run, ray_head,
                                                                                                  dispatched):
    run = make_run(state="starting")
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 2
    assert "stopped before submitting it" in run.state_changes.last().reason
    assert run.admitted_at is not None and dispatched == [run.pk]  # by the scheduler, the queue being free


def test_a_run_the_sweeper_queues_again_waits_for_the_scheduler_like_any_other(make_run, ray_head, settings,
                                                                                celery_in_this_process):
    settings.TRAINER_PYTHON = "/bin/true"
    QueueState.objects.create(pk=1, is_paused=True, reason="cluster maintenance")
    run = make_run(state="starting", admitted_at=timezone.now())  # its worker died before submitting it
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 2 and run.admitted_at is None
    assert run.queue_reason == "the queue is paused by an administrator: cluster maintenance"
    assert ray_jobs.status(run.ray_job_id_of_attempt).state == ray_jobs.MISSING  # nothing went to Ray
    QueueState.objects.filter(pk=1).update(is_paused=False)
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.ray_job_id == f"run-{run.pk}-attempt-2"
    wait_for_job(run.ray_job_id, {"SUCCEEDED"})


def test_a_job_submitted_by_a_worker_that_died_before_saving_its_id_is_adopted(make_admitted_run, ray_head,
                                                                               slow_trainer):
    run = make_admitted_run()
    actions.dispatch(run.pk)
    Run.objects.filter(pk=run.pk).update(ray_job_id="")  # the id never saved
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.ray_job_id == f"run-{run.pk}-attempt-1"
    actions.cancel_run(run)
    wait_for_job(run.ray_job_id, {"STOPPED"})


def test_a_job_whose_run_is_final_is_stopped(make_admitted_run, ray_head, slow_trainer):
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    wait_for_job(run.ray_job_id, {"RUNNING"})
    run.transition(RunState.CANCELLED, reason="cancelled while Ray was unreachable")  # the stop never reached Ray
    Sweeper().sweep_once()
    wait_for_job(run.ray_job_id, {"STOPPED"})


def test_resuming_a_cancelled_run_stops_the_earlier_attempts_job_before_submitting_the_next(make_admitted_run, ray_head,
                                                                                             slow_trainer, dispatched):
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    first_job = run.ray_job_id
    wait_for_job(first_job, {"RUNNING"})
    run.transition(RunState.CANCELLED, reason="cancelled; Ray did not confirm the stop")
    actions.resume_run(run)
    assert dispatched == [run.pk]  # the scheduler admitted it; no Celery here: dispatch by hand
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.ray_job_id == f"run-{run.pk}-attempt-2"
    assert ray_jobs.status(first_job).is_terminal
    live = [job.job_id for job in ray_jobs.platform_jobs() if not job.is_terminal and job.job_id.startswith(f"run-{run.pk}-")]
    assert live == [run.ray_job_id]
    actions.cancel_run(run)
    wait_for_job(run.ray_job_id, {"STOPPED"})


def test_a_ray_head_that_does_not_answer_costs_the_sweep_its_timeout_and_changes_nothing(make_run, settings):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        settings.RAY_ADDRESS = f"http://127.0.0.1:{silent.getsockname()[1]}"
        settings.RAY_CALL_TIMEOUT_S = 1
        run = make_run(state="running")
        started = time.monotonic()
        Sweeper().sweep_once()
        assert time.monotonic() - started < 10
    run.refresh_from_db()
    assert run.state == RunState.RUNNING


def test_a_run_a_worker_is_still_submitting_is_left_alone_until_it_has_been_starting_too_long(make_run, ray_head,
                                                                                            settings):
    settings.SWEEP_STARTING_AFTER_S = 600
    run = make_run(state="starting")  # claimed a moment ago; no job yet
    Sweeper().sweep_once()
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.attempt == 1
