"""One reader of where the ingester stands in a run's stream (runs.ingest.stream_backlog), for trimming,
deleting and /metrics alike: entries pending and not yet delivered, the oldest of them, read in a few
commands that fetch at most one entry however long the backlog."""

import redis
from django.conf import settings

from runs.streams import GROUP, entry_milliseconds, stream_backlog


class CommandLog(redis.Redis):
    """A real client that keeps the commands it sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent = []

    def execute_command(self, *args, **options):
        self.sent.append(args)
        return super().execute_command(*args, **options)


def client():
    return CommandLog.from_url(settings.REDIS_URL)


def test_it_counts_pending_and_undelivered_entries_and_finds_the_oldest(embedded_services):
    redis_client, key = client(), "trainer:run:990001:events"
    redis_client.delete(key)
    redis_client.xgroup_create(key, GROUP, id="0", mkstream=True)
    ids = [redis_client.xadd(key, {"event": f"e{index}"}).decode() for index in range(5)]
    redis_client.xreadgroup(GROUP, "reader", {key: ">"}, count=2)  # two delivered, not acknowledged
    redis_client.xack(key, GROUP, ids[0])
    backlog = stream_backlog(redis_client, key)
    assert (backlog.pending, backlog.undelivered, backlog.unacknowledged) == (1, 3, 4)
    assert backlog.oldest_id == ids[1] == backlog.trim_to and not backlog.is_drained
    assert entry_milliseconds(backlog.oldest_id) == int(ids[1].split("-")[0])
    redis_client.xack(key, GROUP, ids[1])
    backlog = stream_backlog(redis_client, key)
    assert (backlog.pending, backlog.undelivered, backlog.oldest_id) == (0, 3, ids[2])
    redis_client.delete(key)


def test_a_long_backlog_is_counted_without_being_read(embedded_services):
    redis_client, key = client(), "trainer:run:990002:events"
    redis_client.delete(key)
    redis_client.xgroup_create(key, GROUP, id="0", mkstream=True)
    pipe = redis_client.pipeline(transaction=False)
    for index in range(5_000):
        pipe.xadd(key, {"event": f"e{index}"})
    pipe.execute()
    redis_client.sent.clear()
    backlog = stream_backlog(redis_client, key)
    assert backlog.undelivered == 5_000 and backlog.pending == 0
    reads = [command for command in redis_client.sent if command[0] in ("XRANGE", "XREVRANGE", "XREADGROUP")]
    assert all([redis_client.get_encoder().decode(part, force=True) for part in command[-2:]] == ["COUNT", "1"]
               for command in reads), reads
    assert len(redis_client.sent) <= 4
    redis_client.delete(key)


def test_a_drained_stream_says_so_and_a_stream_without_the_group_counts_as_all_undelivered(embedded_services):
    redis_client, key = client(), "trainer:run:990003:events"
    redis_client.delete(key)
    first = redis_client.xadd(key, {"event": "e0"}).decode()
    redis_client.xadd(key, {"event": "e1"})
    backlog = stream_backlog(redis_client, key)
    assert (backlog.has_group, backlog.undelivered, backlog.oldest_id, backlog.is_drained) == (False, 2, first, False)
    redis_client.xgroup_create(key, GROUP, id="0")
    for entry_id, _ in redis_client.xreadgroup(GROUP, "reader", {key: ">"})[0][1]:
        redis_client.xack(key, GROUP, entry_id)
    backlog = stream_backlog(redis_client, key)
    assert backlog.is_drained and backlog.oldest_id is None and backlog.trim_to is not None
    redis_client.delete(key)
    assert stream_backlog(redis_client, key) is None
