"""Trainer, Redis and ingester together: Redis killed and restarted while a run publishes; the run's stored
events are exactly the published ones, in order, numbered 1…n."""

import time

import pytest

from runs.ingest import EventIngester
from runs.models import RunEvent
from tests.runs.event_helpers import IngesterThread, wait_for
from trainer.observability.events import BufferedStreamSink, EventPublisher, EventType, RedisStreamSink

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_redis_killed_and_restarted_under_a_publishing_run_costs_no_event(make_run, private_redis):
    run = make_run(state="running")
    sink = BufferedStreamSink(RedisStreamSink(private_redis.url, str(run.pk)), max_outage_s=120)
    publisher = EventPublisher(str(run.pk), sink)
    ingester = IngesterThread(EventIngester(private_redis.url, block_ms=100, maintain_every_s=0.5))
    published = []
    try:
        for index in range(300):
            published.append(publisher.publish(EventType.LOG, {"level": "info", "message": f"line {index}"}).event_id)
            if index == 100:
                private_redis.process.kill()  # SIGKILL: no goodbye, whatever was in flight
                private_redis.process.wait(10)
            if index == 200:
                time.sleep(1)
                private_redis.start()
        sink.close()
        wait_for(lambda: RunEvent.objects.filter(run=run).count() >= 300, what="all 300 events to be stored")
        time.sleep(1)  # anything doubled would arrive now
    finally:
        ingester.stop()
    stored = list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("event_id", "run_seq"))
    assert [event_id for event_id, _ in stored] == published
    assert [number for _, number in stored] == list(range(1, 301))
