"""The trainer's events wait in a bounded local buffer while Redis is away and go out in order once it is
back; the run fails, with a reason that says what to do, only after ``events.max_outage_s``."""

import json
import threading
import time

import pytest
import redis

from deploy.services import RedisService, free_port
from tests.services_plugin import TEST_ROOT
from trainer.__main__ import main as trainer_main
from trainer.observability.events import (
    BufferedStreamSink, EventPublisher, EventsUnavailable, EventType, RedisStreamSink, TrainerEvent, stream_key,
)


@pytest.fixture
def private_redis():
    """A Redis of this test's own, with its append-only file, to stop and start."""
    service = RedisService(name=f"redis-publish-{free_port()}", port=free_port(), log_dir=TEST_ROOT / "logs",
                           data_dir=TEST_ROOT / f"redis-publish-{time.monotonic_ns()}")
    service.start()
    yield service
    service.stop()


def line(publisher, message):
    return publisher.publish(EventType.LOG, {"level": "info", "message": message}).event_id


def stream_event_ids(url, run_id):
    entries = redis.Redis.from_url(url).xrange(stream_key(run_id))
    return [TrainerEvent.model_validate_json(fields[b"event"]).event_id for _, fields in entries]


def first_occurrences(ids):
    seen, ordered = set(), []
    for event_id in ids:
        if event_id not in seen:
            seen.add(event_id)
            ordered.append(event_id)
    return ordered


def test_events_published_while_redis_restarts_all_arrive_in_order(private_redis):
    sink = BufferedStreamSink(RedisStreamSink(private_redis.url, "5"), max_outage_s=120)
    publisher = EventPublisher("5", sink)
    published = [line(publisher, f"before {i}") for i in range(50)]
    sink.flush(timeout=30)

    private_redis.stop()
    started = time.monotonic()
    published += [line(publisher, f"during {i}") for i in range(150)]
    assert time.monotonic() - started < 2  # publishing does not wait for Redis while the buffer has room
    time.sleep(1.0)  # a few failed sends and retries
    assert sink.buffered >= 150 and sink.retries >= 1
    private_redis.start()
    published += [line(publisher, f"after {i}") for i in range(50)]
    sink.close()

    delivered = stream_event_ids(private_redis.url, "5")
    # A send cut off half-way may add an event twice; the ingester stores an event_id once.
    assert first_occurrences(delivered) == published
    assert len(delivered) - len(published) <= sink.batch_size


def test_a_full_buffer_makes_the_publisher_wait_for_redis_not_drop_events(private_redis):
    sink = BufferedStreamSink(RedisStreamSink(private_redis.url, "6"), max_outage_s=120, max_buffer_bytes=2_000)
    publisher = EventPublisher("6", sink)
    private_redis.stop()
    published, finished = [], threading.Event()

    def publish_many():
        for i in range(40):  # ~200 bytes each: four times what the buffer holds
            published.append(line(publisher, f"line {i}"))
        finished.set()

    threading.Thread(target=publish_many, daemon=True).start()
    time.sleep(1.5)
    assert not finished.is_set() and 5 <= len(published) < 40  # waiting for room
    private_redis.start()
    assert finished.wait(30)
    sink.close()
    assert first_occurrences(stream_event_ids(private_redis.url, "6")) == published


def test_after_the_outage_limit_publishing_fails_with_what_happened_and_how_to_resume():
    nothing_listens = f"redis://127.0.0.1:{free_port()}/0"
    sink = BufferedStreamSink(RedisStreamSink(nothing_listens, "7"), max_outage_s=1.0)
    publisher = EventPublisher("7", sink)
    publisher.log("the first line")  # buffered: the outage has only begun
    deadline = time.monotonic() + 15
    with pytest.raises(EventsUnavailable) as failure:
        while time.monotonic() < deadline:
            publisher.log("another line")
            time.sleep(0.1)
    message = str(failure.value)
    assert "could not be sent to Redis" in message and "events.max_outage_s = 1" in message
    assert "ConnectionError" in message and "resume the run" in message


def test_the_run_command_exits_failed_with_the_reason_when_redis_stays_away(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    nothing_listens = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    code = trainer_main([
        "run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
        "--events", nothing_listens, "--run-id", "8", "--set", "events.max_outage_s=2",
        "--lean-url", "http://127.0.0.1:9",
    ])
    stderr = capsys.readouterr().err
    assert code != 0
    assert "the run failed: the run's events could not be sent to Redis" in stderr
    assert "events.max_outage_s = 2" in stderr
    assert time.monotonic() - started < 120
