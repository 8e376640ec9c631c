"""Trainer, Redis and ingester together: Redis killed and restarted while a run publishes; the run's stored
events are exactly the published ones, in order, numbered 1…n."""

import json
import sys
import time
import traceback

import pytest
import redis

from runs.ingest import EventIngester
from runs.models import RunEvent
from runs.streams import stream_backlog
from tests.runs.event_helpers import IngesterThread, wait_for
from trainer.observability.events import BufferedStreamSink, EventPublisher, EventType, RedisStreamSink, stream_key

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
        try:
            wait_for(lambda: RunEvent.objects.filter(run=run).count() >= 300, what="all 300 events to be stored")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{where_the_events_are(run, published, private_redis, ingester)}")
        time.sleep(1)  # anything doubled would arrive now
    finally:
        ingester.stop()
    stored = list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("event_id", "run_seq"))
    assert [event_id for event_id, _ in stored] == published
    assert [number for _, number in stored] == list(range(1, 301))


def where_the_events_are(run, published: list[str], private_redis, ingester: IngesterThread) -> str:
    """What a failure must say to be understood: which events were not stored, whether Redis still holds them,
    where the ingester's group stands, and what the ingester's thread is doing."""
    stored = set(RunEvent.objects.filter(run=run).values_list("event_id", flat=True))
    missing = [index for index, event_id in enumerate(published) if event_id not in stored]
    client = redis.Redis.from_url(private_redis.url)
    key = stream_key(str(run.pk))
    in_stream = {json.loads(fields[b"event"])["event_id"] for _, fields in client.xrange(key)}
    frame = sys._current_frames().get(ingester.thread.ident)
    return (f"stored {len(stored)} of {len(published)}; not stored: events {missing[:20]}{' …' if len(missing) > 20 else ''}"
            f" ({sum(published[index] in in_stream for index in missing)} of them still in the stream of "
            f"{client.xlen(key)} entries); the group: {stream_backlog(client, key) or 'no stream'};"
            f" the ingester thread {'alive, at:' if ingester.thread.is_alive() else 'has ended'}\n"
            + ("".join(traceback.format_stack(frame)) if frame is not None else ""))
