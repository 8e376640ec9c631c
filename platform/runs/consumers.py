"""The WebSocket a run page listens on: missed events first (by number, capped), then live ones, none twice.

Each frame is ``{"type": "events", "events": [...]}`` (a backlog page, or a batch the ingester
forwarded), or, once after the backlog, ``{"type": "position", "last_number": N}``, or
``{"type": "progress", "pieces": [...], "sent_at": UNIX_S}``: text still being written, which has no number
(runs/live.py).

Every stored event has its run's next number (``run_seq``: 1, 2, 3…). The page says the last
number it has (``?after=``); the backlog after it is sent in pages of 200, at most
``BACKLOG_CAP`` events, then a ``position`` message with the run's last number, so a page
further behind than the cap, or one whose live messages the channel layer dropped (it does,
for a slow client), sees the gap and fetches the rest page by page from
``/api/runs/<id>/events?after=``.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs import queries
from runs.models import Run

BACKLOG_PAGE = 200
BACKLOG_CAP = 1000  # events replayed over the socket; the rest is the page's to fetch, a page at a time


class RunEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        if not user or not await database_sync_to_async(self._can_watch)(user):
            await self.close(code=4403)
            return
        self.group_name = f"run-{self.run_id}"
        # Join the group before reading the backlog: an event stored in between is then in one
        # of the two, and last_sent drops the copy that is in both.
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        self.last_sent = _int(self.scope.get("query_string", b"").decode(), "after")
        sent = 0
        while sent < BACKLOG_CAP:
            backlog = await database_sync_to_async(queries.events_after)(
                self.run_id, self.last_sent, min(BACKLOG_PAGE, BACKLOG_CAP - sent))
            await self._send_events(backlog)
            sent += len(backlog)
            if len(backlog) < BACKLOG_PAGE:
                break
        last_number = await database_sync_to_async(queries.last_event_number)(self.run_id)
        await self.send_json({"type": "position", "last_number": last_number})

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def run_events(self, message):
        await self._send_events(message["events"])

    async def run_progress(self, message):
        """Answers still being written (runs/live.py): unnumbered, never stored, a frame of their own."""
        await self.send_json({"type": "progress", "pieces": message["pieces"], "sent_at": message.get("sent_at")})

    async def _send_events(self, events: list[dict]):
        """One frame for many events (the ingester forwards up to 100 at a time): a burst of 2,048
        rollouts is 21 frames to encode and parse, not 2,048."""
        # Only ever forward: a copy of an event already sent (backlog and live overlap) is dropped.
        # A number further on than the next is sent all the same; the page fills the gap.
        fresh = []
        for event in events:
            if event["number"] > self.last_sent:
                self.last_sent = event["number"]
                fresh.append(event)
        if fresh:
            await self.send_json({"type": "events", "events": fresh})

    def _can_watch(self, user) -> bool:
        return Run.objects.visible_to(user).filter(pk=self.run_id).exists()


def _int(query: str, name: str) -> int:
    try:
        return max(0, int(parse_qs(query).get(name, ["0"])[0]))
    except ValueError:
        return 0
