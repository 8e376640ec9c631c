"""The whole path on the real services: launch → Celery → Ray job → trainer → Redis → ingester → Postgres → WebSocket.

The cpu-smoke preset: a tiny random model trains for two steps against the stand-in Lean server.
"""

import asyncio
import json
import threading
import time

import pytest
from django.test import Client

from proofs.models import ProofAttempt
from runs import actions
from runs.models import RunState, StepMetrics

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

def wait_for_state(run, states, timeout, logs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in states:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run stayed {run.state} for {timeout} s; reason {run.failure_reason!r}\n{logs()}")


class WebSocketListener:
    """A real WebSocket client on the ASGI server, logged in with a real session cookie."""

    def __init__(self, url, session_cookie):
        self.url, self.cookie = url, session_cookie
        self.messages, self.connected = [], threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._listen()), daemon=True)
        self.thread.start()

    async def _listen(self):
        import websockets

        origin = self.url.replace("ws://", "http://").split("/ws/")[0]
        async with websockets.connect(self.url, additional_headers={"Cookie": f"sessionid={self.cookie}",
                                                                     "Origin": origin}) as socket:
            self.connected.set()
            while not self.stop.is_set():
                try:
                    frame = json.loads(await asyncio.wait_for(socket.recv(), 0.5))
                except asyncio.TimeoutError:
                    continue
                self.messages.extend(frame.get("events", []))  # a batch of events, or the backlog's end


def test_a_launched_run_trains_two_steps_and_its_rollouts_are_stored_and_pushed_live(
        alice, promptset_version, platform_processes, platform_logs):
    client = Client()
    client.force_login(alice)
    run = actions.launch_run(owner=alice, name="tiny", promptset_version=promptset_version,
                             preset="cpu-smoke")
    ws_url = platform_processes["url"].replace("http://", "ws://") + f"/ws/runs/{run.pk}/events/?after=0"
    listener = WebSocketListener(ws_url, client.cookies["sessionid"].value)
    assert listener.connected.wait(20), "the WebSocket did not connect"

    wait_for_state(run, {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED}, timeout=420, logs=platform_logs)
    assert run.state == RunState.SUCCEEDED, f"{run.failure_reason}\n{platform_logs()}"

    attempts = ProofAttempt.objects.filter(run=run)
    first_attempts = attempts.filter(turn="first")
    assert first_attempts.count() == 2 * 2 * 2  # steps × prompts × samples
    assert set(first_attempts.values_list("step", flat=True)) == {1, 2}
    assert all(a.problem_id is not None for a in first_attempts)
    assert list(StepMetrics.objects.filter(run=run).values_list("step", flat=True)) == [1, 2]

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(m["type"] == "run_finished" for m in listener.messages):
        time.sleep(0.2)
    listener.stop.set()
    pushed = {m["payload"]["rollout_key"] for m in listener.messages if m["type"] == "rollout_finished"}
    assert pushed == set(attempts.values_list("rollout_key", flat=True))
    assert [m["id"] for m in listener.messages] == sorted({m["id"] for m in listener.messages})  # in order, once each
    assert [m["number"] for m in listener.messages] == list(range(1, len(listener.messages) + 1))  # and no gap
