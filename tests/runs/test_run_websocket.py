"""The run's WebSocket: only people who may see the run get its events, missed ones first, none twice."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from runs.ingest import browser_message
from runs.models import RunEvent
from runs.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

application = URLRouter(websocket_urlpatterns)


def store_event(run, seq, message="hello"):
    from django.utils import timezone

    return RunEvent.objects.create(run=run, event_id=f"{run.pk}-{seq}", seq=seq, run_seq=seq + 1, type="log",
                                   payload={"level": "info", "message": message}, published_at=timezone.now())


def connect(run, user, after=0):
    """``after`` is the number (run_seq) of the last event the page has."""
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/events/?after={after}")
    communicator.scope["user"] = user
    return communicator


async def receive_backlog(communicator):
    """The events sent on connecting, up to the ``position`` message that ends them; and that message."""
    events = []
    while (frame := await communicator.receive_json_from(timeout=5))["type"] != "position":
        assert frame["type"] == "events"
        events.extend(frame["events"])
    return events, frame


async def receive_exactly(communicator, count):
    """``count`` events, then silence (a timed-out receive would cancel the consumer, so ask for nothing more)."""
    events = []
    while len(events) < count:
        frame = await communicator.receive_json_from(timeout=5)
        assert frame["type"] == "events"
        events.extend(frame["events"])
    assert await communicator.receive_nothing(timeout=0.3)
    return events


def test_a_stranger_is_refused(make_run, charlie):
    run = make_run()

    async def scenario():
        communicator = connect(run, charlie)
        connected, code = await communicator.connect()
        await communicator.disconnect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4403)


def test_a_person_the_run_is_shared_with_may_watch(make_run, bob):
    run = make_run()
    run.shared_with.add(bob)

    async def scenario():
        communicator = connect(run, bob)
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)()


def test_it_sends_what_was_missed_after_the_given_id_then_live_events_without_duplicates(make_run, alice):
    run = make_run()
    first, second, third = (store_event(run, seq) for seq in range(3))

    async def scenario():
        communicator = connect(run, alice, after=first.run_seq)
        await communicator.connect()
        backlog, _ = await receive_backlog(communicator)
        layer = get_channel_layer()
        # A live event, and a copy of one already sent (as happens when the ingester
        # forwards an event that the backlog query also found).
        fourth = await _store(run, 3)
        await layer.group_send(run.group_name, {"type": "run.events", "events": [browser_message(fourth)]})
        await layer.group_send(run.group_name, {"type": "run.events", "events": [browser_message(third)]})
        live = await receive_exactly(communicator, 1)
        await communicator.disconnect()
        return [m["id"] for m in backlog], [m["id"] for m in live], fourth.pk

    backlog_ids, live_ids, fourth_pk = async_to_sync(scenario)()
    assert backlog_ids == [second.pk, third.pk]
    assert live_ids == [fourth_pk]


async def _store(run, seq):
    from channels.db import database_sync_to_async

    return await database_sync_to_async(store_event)(run, seq)


def test_the_backlog_is_capped_and_ends_with_where_the_run_is(make_run, alice):
    from django.utils import timezone

    from runs.consumers import BACKLOG_CAP

    run = make_run()
    RunEvent.objects.bulk_create([
        RunEvent(run=run, event_id=f"{run.pk}-{n}", seq=n, run_seq=n, type="log", payload={"message": str(n)},
                 published_at=timezone.now()) for n in range(1, BACKLOG_CAP + 301)])

    async def scenario():
        communicator = connect(run, alice, after=100)
        await communicator.connect()
        backlog, position = await receive_backlog(communicator)
        await communicator.disconnect()
        return backlog, position

    backlog, position = async_to_sync(scenario)()
    assert [m["number"] for m in backlog] == list(range(101, 101 + BACKLOG_CAP))
    assert position == {"type": "position", "last_number": BACKLOG_CAP + 300}
