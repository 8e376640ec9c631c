"""Text still being written (``rollout_progress``) goes live and nowhere else: never into PostgreSQL (events or
dead letters), never counted in a run's event numbers, whatever reaches the durable stream."""

import json
import time

import pytest
from django.conf import settings

from runs import queries
from runs.ingest import EventIngester
from runs.models import DeadLetter, RunEvent
from tests.runs.event_helpers import add_raw, event_json, publisher_for, rollout, wait_for
from trainer.observability.events import EventType, writing_key
from trainer.observability.live import LiveRollouts, RedisLiveSink

pytestmark = pytest.mark.django_db(transaction=True)


def stream_progress(publisher, key="a1-s1-p0-r0"):
    live = LiveRollouts(publisher.publish_live, lambda p, s: (key, 1, "add_small", "first"),
                        interval_s=0.0, max_rollouts=8)
    live.update(0, 0, 3, lambda: "<think>")
    live.update(0, 0, 9, lambda: "<think>x</think>\n```lean4\n")
    return live


def test_progress_published_live_beside_stored_events_is_never_stored_and_takes_no_number(make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
    publisher.log("starting")
    live = stream_progress(publisher)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="a1-s1-p0-r0"))
    live.finish(0, 0, "<think>x</think>\n```lean4\nnorm_num\n```", 12)
    publisher.log("done")
    wait_for(lambda: publisher.live.sent == 3, 10, "the live sink to send its pieces")
    publisher.live.close()

    while EventIngester(block_ms=50).poll_once():
        pass

    assert list(RunEvent.objects.filter(run=run).values_list("type", flat=True).order_by("run_seq")) == [
        "log", "rollout_finished", "log"]
    assert queries.last_event_number(run.pk) == 3
    assert not RunEvent.objects.filter(type=EventType.ROLLOUT_PROGRESS).exists()
    assert not DeadLetter.objects.exists()
    latest = json.loads(redis_client.hget(writing_key(str(run.pk)), "a1-s1-p0-r0"))
    assert latest["text"] == "<think>x</think>\n```lean4\nnorm_num\n```" and latest["is_finished"]
    assert 0 < redis_client.ttl(writing_key(str(run.pk))) <= 120


def test_a_progress_event_that_reaches_the_durable_stream_is_dropped_not_stored_nor_dead_lettered(make_run, redis_client):
    run = make_run(state="running")
    add_raw(redis_client, run, {"event": event_json(run, "rollout_progress", {
        "rollout_key": "a1-s1-p0-r0", "step": 1, "problem_id": "p", "offset": 0, "text": "hi", "tokens": 1}, seq=-1)})
    publisher_for(run).log("stored")
    while EventIngester(block_ms=50).poll_once():
        pass
    assert list(RunEvent.objects.filter(run=run).values_list("type", "run_seq")) == [("log", 1)]
    assert not DeadLetter.objects.exists()


def test_redis_refusing_live_text_costs_the_pieces_and_never_blocks_the_writer(make_run):
    run = make_run(state="running")
    publisher = publisher_for(run)
    publisher.live = RedisLiveSink("redis://127.0.0.1:1/0", str(run.pk), socket_timeout_s=0.5)  # nothing listens
    started = time.monotonic()
    live = stream_progress(publisher)
    live.finish(0, 0, "<think>x</think>", 5)
    assert time.monotonic() - started < 0.2, "the generation thread waited on Redis"
    wait_for(lambda: publisher.live.dropped == 3, 10, "the pieces to be dropped")
    publisher.live.close()
    publisher.log("the durable path still works")
    while EventIngester(block_ms=50).poll_once():
        pass
    assert RunEvent.objects.filter(run=run).count() == 1
