"""The ingester never asks Ray: a Ray head that accepts connections and never answers must not delay live
events. (The job reconciler runs in a thread of its own in ``manage.py ingest_events``.)"""

import socket
import threading
import time

import pytest

from runs.ingest import EventIngester
from runs.models import RunEvent
from tests.runs.event_helpers import publisher_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def silent_ray_head(monkeypatch):
    """A port that accepts connections and never says a word: a Ray head stuck or behind a dead proxy."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []
    threading.Thread(target=lambda: accepted.extend(iter(lambda: listener.accept(), None)), daemon=True).start()
    address = f"http://127.0.0.1:{listener.getsockname()[1]}"
    monkeypatch.setenv("RAY_ADDRESS", address)  # Ray lets the environment win over settings
    from django.conf import settings

    monkeypatch.setattr(settings, "RAY_ADDRESS", address)
    yield address
    listener.close()


def test_events_of_a_running_job_are_stored_while_ray_does_not_answer(make_run, redis_client, silent_ray_head):
    run = make_run(state="running", ray_job_id="run-1-attempt-1")
    publisher_for(run).log("live")
    ingester = EventIngester(reconcile_every_s=0)
    started = time.monotonic()
    ingester.poll_once()
    ingester.poll_once()
    assert time.monotonic() - started < 5
    assert RunEvent.objects.get(run=run).payload["message"] == "live"
