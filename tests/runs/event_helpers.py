"""Publishing to a run's stream as the trainer does, for the ingester's tests."""

import threading
import time

from django.conf import settings
from django.db import connection

from trainer.observability.events import EventPublisher, RedisStreamSink, RolloutFinished, TrainerEvent, stream_key


def publisher_for(run, first_seq=0):
    return EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)), first_seq=first_seq)


def rollout(step=1, key="s1-p0-r0", **fields):
    base = dict(rollout_key=key, step=step, problem_id="add_small", problem_name="add_small",
                formal_statement="theorem add_small : (2 : ℕ) + 3 = 5 := by", response="<think>x</think>",
                reasoning="x", lean_code="theorem add_small : (2 : ℕ) + 3 = 5 := by\n  norm_num", verdict="valid",
                reward=1.0, is_standin_verdict=True)
    base.update(fields)
    return RolloutFinished(**base)


def add_raw(redis_client, run, fields: dict) -> str:
    """An entry put on the run's stream as is, bypassing the trainer's own checks."""
    return redis_client.xadd(stream_key(str(run.pk)), fields).decode()


def event_json(run, type, payload, seq=0, **envelope) -> str:
    return TrainerEvent(run_id=envelope.pop("run_id", str(run.pk)), seq=seq, type=type, payload=payload,
                        **envelope).model_dump_json()


class IngesterThread:
    """``run_forever`` in a thread, as the ingest_events command runs it."""

    def __init__(self, ingester):
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ingester,), daemon=True)
        self.thread.start()

    def _run(self, ingester):
        try:
            ingester.run_forever(should_stop=self.stopping.is_set)
        finally:
            connection.close()

    def stop(self):
        self.stopping.set()
        self.thread.join(30)


def wait_for(condition, timeout=60, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - the database may be coming back
            connection.close()
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
