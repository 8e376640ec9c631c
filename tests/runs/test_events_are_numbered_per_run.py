"""Each stored event gets its run's next number, 1, 2, 3…: no gap, no clash, whatever the trainer's own seq."""

import threading

import pytest
from django.db import connection

from runs.ingest import EventIngester
from runs.models import RunEvent
from tests.runs.event_helpers import publisher_for, rollout
from trainer.observability.events import EventType, stream_key

pytestmark = pytest.mark.django_db(transaction=True)


def numbers(run):
    return list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("run_seq", flat=True))


def test_numbers_run_on_across_batches_and_each_run_has_its_own(make_run, redis_client):
    first, second = make_run(state="running"), make_run(state="running")
    ingester = EventIngester(batch_size=3)
    for run in (first, second):
        publisher = publisher_for(run, first_seq=1000)  # a resumed trainer's numbers start high
        for index in range(7):
            publisher.log(f"line {index}")
    ingester.poll_once()
    ingester.poll_once()
    ingester.poll_once()
    assert numbers(first) == list(range(1, 8)) and numbers(second) == list(range(1, 8))


def test_a_duplicate_takes_no_number(make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    event = publisher.publish(EventType.ROLLOUT_FINISHED, rollout())
    redis_client.xadd(stream_key(str(run.pk)), event.to_stream_fields())  # delivered twice
    publisher.log("after")
    EventIngester().poll_once()
    assert numbers(run) == [1, 2]


def test_two_ingesters_storing_the_same_run_at_once_leave_no_gap_and_no_double(make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    for index in range(400):
        publisher.log(f"line {index}")
    errors = []

    def ingest(name):
        try:
            ingester = EventIngester(consumer=name, batch_size=20, block_ms=50)
            while ingester.poll_once():
                pass
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=ingest, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert numbers(run) == list(range(1, 401))
    assert RunEvent.objects.filter(run=run).values("event_id").distinct().count() == 400
