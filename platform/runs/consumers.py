"""The WebSocket a run page listens on: missed events first (by id), then live ones, none twice."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs.ingest import browser_message
from runs.models import Run, RunEvent

BACKLOG_CHUNK = 1000


class RunEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        if not user or not await database_sync_to_async(self._can_watch)(user):
            await self.close(code=4403)
            return
        self.group_name = f"run-{self.run_id}"
        # Join the group before reading the backlog: an event stored in between is then in one
        # of the two, and last_sent_id drops the copy that is in both.
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        after = _int(self.scope.get("query_string", b"").decode(), "after")
        self.last_sent_id = after
        # The page rendered everything up to ?after=; send all that came since, oldest first.
        while True:
            backlog = await database_sync_to_async(self._backlog)(self.last_sent_id)
            for message in backlog:
                await self._send_event(message)
            if len(backlog) < BACKLOG_CHUNK:
                break

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def run_events(self, message):
        for event in message["events"]:
            await self._send_event(event)

    async def _send_event(self, event: dict):
        if event["id"] <= self.last_sent_id:
            return
        self.last_sent_id = event["id"]
        await self.send_json(event)

    def _can_watch(self, user) -> bool:
        return Run.objects.visible_to(user).filter(pk=self.run_id).exists()

    def _backlog(self, after: int) -> list[dict]:
        events = list(RunEvent.objects.filter(run_id=self.run_id, pk__gt=after).order_by("pk")[:BACKLOG_CHUNK])
        attempts = dict(self._attempt_ids(events))
        messages = []
        for event in events:
            event.attempt_id = attempts.get(event.pk)
            messages.append(browser_message(event))
        return messages

    @staticmethod
    def _attempt_ids(events):
        from proofs.models import ProofAttempt

        return ProofAttempt.objects.filter(event__in=[e.pk for e in events]).values_list("event_id", "pk")


def _int(query: str, name: str) -> int:
    from urllib.parse import parse_qs

    try:
        return max(0, int(parse_qs(query).get(name, ["0"])[0]))
    except ValueError:
        return 0
