"""Entries a killed or replaced ingester read but never acknowledged are claimed by another after a while."""

import pytest

from runs.ingest import EventIngester
from runs.models import RunEvent
from runs.streams import GROUP
from tests.runs.event_helpers import publisher_for
from trainer.observability.events import stream_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_entries_left_pending_by_a_dead_consumer_are_claimed_and_stored(make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    for index in range(5):
        publisher.log(f"line {index}")
    key = stream_key(str(run.pk))
    survivor = EventIngester(consumer="new-pod", claim_idle_ms=200, block_ms=50)
    survivor._streams_to_read()  # the group exists, as it would have
    # The old pod read them and died before acknowledging.
    redis_client.xreadgroup(GROUP, "old-pod-1234", {key: ">"})
    assert redis_client.xpending(key, GROUP)["consumers"] == [{"name": b"old-pod-1234", "pending": 5}]

    survivor.poll_once()
    assert RunEvent.objects.filter(run=run).count() == 0  # not yet idle long enough: the old pod may be alive

    import time
    time.sleep(0.3)
    survivor.poll_once()
    assert sorted(RunEvent.objects.filter(run=run).values_list("payload__message", flat=True)) == [
        f"line {index}" for index in range(5)]
    assert redis_client.xpending(key, GROUP)["pending"] == 0
