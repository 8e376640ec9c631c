"""Redis keeps only what is not yet stored: streams are trimmed to the oldest unacknowledged entry and
deleted once their run is final, a grace period has passed and nothing in them is unread."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.ingest import EventIngester
from runs.models import RunEvent
from runs.streams import GROUP
from tests.runs.event_helpers import publisher_for
from trainer.observability.events import stream_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stream_is_trimmed_to_what_has_been_stored(make_run, redis_client):
    run = make_run(state="running")
    key = stream_key(str(run.pk))
    publisher = publisher_for(run)
    for index in range(50):
        publisher.log(f"line {index}")
    ingester = EventIngester()
    ingester.poll_once()
    ingester.maintain_streams()
    assert RunEvent.objects.filter(run=run).count() == 50
    assert redis_client.xlen(key) == 0
    assert redis_client.exists(key)  # a running run's stream stays, with its group


def test_entries_read_but_not_yet_acknowledged_are_kept(make_run, redis_client):
    run = make_run(state="running")
    key = stream_key(str(run.pk))
    publisher = publisher_for(run)
    for index in range(10):
        publisher.log(f"line {index}")
    ingester = EventIngester(batch_size=4, claim_idle_ms=3_600_000)
    ingester.poll_once()  # stores 4 (and 4 more)…
    ingester.maintain_streams()
    stored = RunEvent.objects.filter(run=run).count()
    # …while a crashed consumer holds the next entries pending
    redis_client.xreadgroup(GROUP, "crashed", {key: ">"}, count=2)
    ingester.maintain_streams()
    assert redis_client.xlen(key) == 10 - stored
    assert redis_client.xpending(key, GROUP)["pending"] == 2


def test_a_final_runs_stream_is_deleted_after_the_grace_period_and_not_before(make_run, redis_client):
    run = make_run(state="running")
    key = stream_key(str(run.pk))
    publisher_for(run).publish("run_finished", {"status": "succeeded", "reason": ""})
    ingester = EventIngester(stream_grace_s=600)
    ingester.poll_once()
    run.refresh_from_db()
    assert run.state == "succeeded"
    ingester.maintain_streams()
    assert redis_client.exists(key)  # within the grace period: late events may still come

    run.__class__.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(seconds=601))
    ingester.maintain_streams()
    assert not redis_client.exists(key)


def test_a_final_runs_stream_with_unread_events_is_read_before_it_is_deleted(make_run, redis_client):
    run = make_run(state="succeeded", finished_at=timezone.now() - timedelta(hours=2))
    key = stream_key(str(run.pk))
    publisher_for(run).log("a late line, published while the ingester was down")
    ingester = EventIngester(stream_grace_s=600)
    ingester._streams_to_read()
    ingester.maintain_streams()
    assert redis_client.exists(key)  # unread: kept
    ingester.poll_once()
    assert RunEvent.objects.get(run=run).payload["message"].startswith("a late line")
    ingester.maintain_streams()
    assert not redis_client.exists(key)
