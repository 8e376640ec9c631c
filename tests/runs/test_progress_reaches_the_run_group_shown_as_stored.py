"""The forwarder (runs/live.py) takes a run's live text from Redis pub/sub to its pages' Channels group, batched,
shown as the stored rollout shows it, with its Lean block's tokens once the fence closes; the writing API
gives a page that opens mid-answer the latest text of each answer not yet stored."""

import contextlib
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from runs.live import ProgressForwarder
from tests.runs.event_helpers import publisher_for, rollout, wait_for
from trainer.observability.events import EventType
from trainer.observability.live import LiveRollouts, RedisLiveSink

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def forwarder_watched_by_the_runs_group(run, flush_every_s: float):
    """A forwarder running in a thread, and a channel in the run's group that hears what it forwards."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"run-{run.pk}", channel)
    forwarder = ProgressForwarder(flush_every_s=flush_every_s)
    stopping = threading.Event()
    thread = threading.Thread(target=forwarder.run_forever, kwargs={"should_stop": stopping.is_set}, daemon=True)
    thread.start()
    try:
        yield layer, channel, forwarder
    finally:
        stopping.set()
        thread.join(5)


def test_pieces_reach_the_runs_group_in_one_message_with_nul_shown_as_stored_and_lean_tokens(make_run, redis_client):
    run = make_run(state="running")
    with forwarder_watched_by_the_runs_group(run, flush_every_s=0.2) as (layer, channel, forwarder):
        wait_for(lambda: redis_client.pubsub_numpat() >= 1, 10, "the forwarder to subscribe")
        publisher = publisher_for(run)
        publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
        live = LiveRollouts(publisher.publish_live, lambda p, s: ("a1-s1-p0-r0", 1, "add", "first"),
                            interval_s=0.0, max_rollouts=8)
        live.update(0, 0, 2, lambda: "<think>a\x00b")
        live.update(0, 0, 6, lambda: "<think>a\x00b</think>\n```lean4\ntheorem x : 1 = 1 := by rfl\n```")
        messages = [async_to_sync(layer.receive)(channel)]
        while sum(len(m["pieces"]) for m in messages) < 2:  # a flush may fall between the two
            messages.append(async_to_sync(layer.receive)(channel))
    assert {m["type"] for m in messages} == {"run.progress"}
    pieces = [piece for m in messages for piece in m["pieces"]]
    assert [(p["offset"], p["text"]) for p in pieces] == [
        (0, "<think>a\u2400b"), (10, "</think>\n```lean4\ntheorem x : 1 = 1 := by rfl\n```")]
    assert "lean_lines" not in pieces[0]
    assert ["kn", "theorem"] in pieces[1]["lean_lines"][0]  # the one Lean lexer's classes, as stored rollouts get


def test_the_writing_api_lists_answers_being_written_and_not_those_stored(client, alice, make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
    for key in ("a1-s1-p0-r0", "a1-s1-p0-r1"):
        LiveRollouts(publisher.publish_live, lambda p, s, key=key: (key, 1, "add", "first"), interval_s=0.0,
                     max_rollouts=8).update(0, 0, 4, lambda: "<think>so far")
    wait_for(lambda: publisher.live.sent == 2, 10, "the live sink")
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="a1-s1-p0-r0"))
    from runs.ingest import EventIngester

    EventIngester(block_ms=50).poll_once()
    client.force_login(alice)
    answers = client.get(f"/api/runs/{run.pk}/writing").json()["answers"]
    assert [(a["rollout_key"], a["text"], a["tokens"]) for a in answers] == [("a1-s1-p0-r1", "<think>so far", 4)]


def test_a_stranger_cannot_read_what_a_run_is_writing(client, charlie, make_run):
    run = make_run(state="running")
    client.force_login(charlie)
    assert client.get(f"/api/runs/{run.pk}/writing").status_code == 404


def test_after_a_dropped_redis_connection_the_forwarder_subscribes_again_and_forwards(make_run, redis_client):
    run = make_run(state="running")
    with forwarder_watched_by_the_runs_group(run, flush_every_s=0.1) as (layer, channel, forwarder):
        wait_for(lambda: forwarder.subscriptions == 1 and redis_client.pubsub_numpat() >= 1, 10, "a subscription")
        redis_client.client_kill_filter(_type="pubsub")  # a Redis hiccup, as the forwarder sees it
        wait_for(lambda: forwarder.subscriptions == 2, 15, "the forwarder to subscribe again")
        publisher = publisher_for(run)
        publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
        LiveRollouts(publisher.publish_live, lambda p, s: ("a1-s1-p0-r0", 1, "add", "first"), interval_s=0.0,
                     max_rollouts=8).update(0, 0, 2, lambda: "<think>after the hiccup")
        message = async_to_sync(receive_within)(layer, channel, 10)
    assert [piece["text"] for piece in message["pieces"]] == ["<think>after the hiccup"]


async def receive_within(layer, channel, seconds):
    import asyncio

    return await asyncio.wait_for(layer.receive(channel), seconds)
