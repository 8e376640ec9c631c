"""Trainer events for browser tests, sent the way the trainer sends them: onto the run's Redis
Stream, for the platform's own ingester to store (so the pages are tested against what the real
path stores, event times included)."""

import contextlib
import itertools
import time

_seq = itertools.count(int(time.time() * 1000))


def publish(run, type, payload=None, *, at=None):
    from django.conf import settings

    from trainer.observability.events import RedisStreamSink, TrainerEvent

    run.refresh_from_db(fields=["attempt"])  # as the trainer of the run's current attempt publishes it
    event = TrainerEvent(run_id=str(run.pk), seq=next(_seq), type=type, time=at if at is not None else time.time(),
                         payload=payload or {}, attempt=run.attempt)
    RedisStreamSink(settings.REDIS_URL, str(run.pk)).write(event)
    return event


def wait_until(condition, *, timeout_s=30.0, what="the condition"):
    """Poll ``condition`` (a callable) until it returns something truthy; fail with ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def wait_for_state(run, state, *, timeout_s=30.0):
    def reached():
        run.refresh_from_db()
        return run.state == state

    try:
        wait_until(reached, timeout_s=timeout_s, what=f"run {run.pk} to be {state}")
    except AssertionError as error:
        raise AssertionError(f"{error}; it is {run.state}: {run.state_changes.last().reason if run.state_changes.exists() else ''}") from None
    return run


@contextlib.contextmanager
def a_live_job(run):
    """A Ray job under the id the platform gives the run's attempt, alive while the test plays the trainer's events.
    Without it the sweeper (tests/services_plugin.py: every 2 s, 5 s of grace) ends a run in ``running`` whose job
    Ray has no record of, as it should, and a test slower than that at a high load would lose its run midway."""
    from django.conf import settings
    from ray.job_submission import JobSubmissionClient

    from runs.models import job_id_for

    client = JobSubmissionClient(settings.RAY_ADDRESS)
    job = client.submit_job(entrypoint="sleep 600", entrypoint_num_cpus=0, submission_id=job_id_for(run.pk, run.attempt))
    try:
        yield job
    finally:
        client.stop_job(job)
