"""Redis or Postgres going away is waited out, never fatal: the ingester backs off, logs it, and stores
everything once they are back, nothing lost and nothing doubled."""

import logging

import pytest
from django.db import connection

from runs.ingest import EventIngester
from runs.models import RunEvent
from tests.runs.event_helpers import IngesterThread, wait_for
from tests.services_plugin import _owns
from trainer.observability.events import EventPublisher, RedisStreamSink

pytestmark = pytest.mark.django_db(transaction=True)


def stored_messages(run):
    return list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("payload__message", flat=True))


def test_a_redis_restart_is_waited_out_and_nothing_is_lost_or_doubled(make_run, private_redis, caplog):
    run = make_run(state="running")
    publisher = EventPublisher(str(run.pk), RedisStreamSink(private_redis.url, str(run.pk)))
    ingester = IngesterThread(EventIngester(private_redis.url, block_ms=100, maintain_every_s=0.5))
    try:
        for index in range(5):
            publisher.log(f"before {index}")
        wait_for(lambda: len(stored_messages(run)) == 5, what="the first five events")

        caplog.set_level(logging.WARNING, logger="runs.ingest")
        private_redis.stop()
        wait_for(lambda: "Redis is unavailable" in caplog.text, what="the ingester to notice")
        private_redis.start()
        for index in range(5):
            publisher.log(f"after {index}")
        wait_for(lambda: len(stored_messages(run)) == 10, what="the events published after the restart")
        assert ingester.thread.is_alive()
    finally:
        ingester.stop()
    assert stored_messages(run) == [f"before {i}" for i in range(5)] + [f"after {i}" for i in range(5)]
    assert list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("run_seq", flat=True)) == list(range(1, 11))


@pytest.mark.skipif("postgres" not in _owns, reason="DATABASE_URL points at a Postgres this session did not start")
def test_a_postgres_restart_is_waited_out_and_nothing_is_lost_or_doubled(make_run, redis_client, caplog):
    from django.conf import settings

    run = make_run(state="running")
    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
    caplog.set_level(logging.WARNING, logger="runs.ingest")
    ingester = IngesterThread(EventIngester(block_ms=100))
    try:
        for index in range(5):
            publisher.log(f"before {index}")
        wait_for(lambda: len(stored_messages(run)) == 5, what="the first five events")

        _owns["postgres"].stop()
        for index in range(5):
            publisher.log(f"during {index}")
        wait_for(lambda: "the database is unavailable" in caplog.text, what="the ingester to notice")
        _owns["postgres"].start()
        connection.close()
        wait_for(lambda: len(stored_messages(run)) == 10, what="the events published during the outage")
        assert ingester.thread.is_alive()
    finally:
        ingester.stop()
    assert stored_messages(run) == [f"before {i}" for i in range(5)] + [f"during {i}" for i in range(5)]
