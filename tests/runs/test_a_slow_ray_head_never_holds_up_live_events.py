"""The ingester never asks Ray: a Ray head that accepts connections and never answers must not delay live
events. (Ray is the sweeper's, in ``manage.py sweep_runs``.)"""

import time

import pytest

from runs.ingest import EventIngester
from runs.models import RunEvent
from tests.runs.event_helpers import publisher_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_events_of_a_running_job_are_stored_while_ray_does_not_answer(make_run, redis_client, silent_ray_head):
    run = make_run(state="running", ray_job_id="run-1-attempt-1")
    publisher_for(run).log("live")
    ingester = EventIngester()
    started = time.monotonic()
    ingester.poll_once()
    ingester.poll_once()
    assert time.monotonic() - started < 5
    assert RunEvent.objects.get(run=run).payload["message"] == "live"
