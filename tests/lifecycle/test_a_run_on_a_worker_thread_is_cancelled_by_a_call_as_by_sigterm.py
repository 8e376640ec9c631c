"""A learner-rank actor runs its rank on a thread of a Ray worker process, where no signal handler can be installed
and Ray's job stop sends no signal: the driver cancels it by a call (trainer/loop/rank_actor.py ``cancel``), which
ends the run as SIGTERM does (``request_cancel_of_running_run``): cancelled, never failed, its end published once,
the stop deadline started so that a rank stuck in a call still ends in time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from trainer.observability.events import EventPublisher, EventType, ListSink, RunStatus
from trainer.run.lifecycle import RunLifecycle, request_cancel_of_running_run


class BusyRun(RunLifecycle):
    """A run whose work is Python that never ends by itself (generation, scoring)."""

    def __init__(self, output_dir: Path):
        self.sink = ListSink()
        self.publisher = EventPublisher("worker-thread", self.sink)
        self._seq_recorder = self.publisher.record_sequence()
        self.output_dir = output_dir
        self.is_working = threading.Event()

    def live(self):
        self.publisher.publish(EventType.RUN_STARTED, {})
        self.step = 3
        self.is_working.set()
        while True:
            time.sleep(0.01)


def test_nothing_is_cancelled_while_no_run_runs():
    assert request_cancel_of_running_run() is False


def test_a_call_from_another_thread_ends_a_run_on_a_worker_thread_cancelled(tmp_path):
    run = BusyRun(tmp_path)
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(run.run()), name="ray-actor-task")
    worker.start()
    assert run.is_working.wait(30)
    assert request_cancel_of_running_run("SIGTERM") is True
    worker.join(timeout=30)
    assert not worker.is_alive(), "the run went on after its cancel"
    assert outcome == [RunStatus.CANCELLED]
    [finished] = [event.payload for event in run.sink.of_type(EventType.RUN_FINISHED)]
    assert (finished["status"], finished["reason"]) == ("cancelled", "stopped by SIGTERM during step 3")
    assert run.sink.of_type(EventType.ERROR) == []
    assert run._stop_deadline is not None  # the watchdog's deadline started, as on SIGTERM (then cancelled: it ended)
    assert request_cancel_of_running_run() is False  # ended: no longer a running run
