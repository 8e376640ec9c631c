"""A run that fails because the infrastructure failed under it (an InfrastructureFailure: an engine actor's node
lost, a worker killed from outside) says so in its RUN_FINISHED, ``cause: "infrastructure"``, which the platform
reads to start the next attempt from the last checkpoint; a failure of the run's own code carries no such cause,
so nothing retries it (trainer/cluster/failures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.cluster.failures import CAUSE_INFRASTRUCTURE, InfrastructureFailure
from trainer.observability.events import EventPublisher, EventType, ListSink, RunStatus
from trainer.run.lifecycle import RunLifecycle


class FailingRun(RunLifecycle):
    install_signal_handlers = False

    def __init__(self, output_dir: Path, error: Exception):
        self.sink = ListSink()
        self.publisher = EventPublisher("failing", self.sink)
        self._seq_recorder = self.publisher.record_sequence()
        self.output_dir = output_dir
        self.error = error

    def live(self):
        self.step = 2
        raise self.error


def test_an_infrastructure_failure_ends_the_run_failed_with_cause_infrastructure(tmp_path):
    run = FailingRun(tmp_path, InfrastructureFailure("rollout engine 0 on node ab12 (10.0.0.3) was lost", node="ab12"))
    assert run.run() is RunStatus.FAILED
    [finished] = [event.payload for event in run.sink.of_type(EventType.RUN_FINISHED)]
    assert finished["cause"] == CAUSE_INFRASTRUCTURE
    assert finished["reason"] == "InfrastructureFailure: rollout engine 0 on node ab12 (10.0.0.3) was lost"


@pytest.mark.parametrize("error", [ValueError("loss is nan"), RuntimeError("CUDA out of memory")])
def test_a_failure_of_the_runs_own_code_carries_no_cause(tmp_path, error):
    run = FailingRun(tmp_path, error)
    assert run.run() is RunStatus.FAILED
    [finished] = [event.payload for event in run.sink.of_type(EventType.RUN_FINISHED)]
    assert "cause" not in finished
