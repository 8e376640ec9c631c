"""`manage.py ingest_events` killed with SIGKILL in the middle of a batch, then started again in place: every
event is stored exactly once, in the order it was published, and the run's numbers have no gap."""

import sys
import time

import pytest

from deploy.services import PlatformProcess
from proofs.models import ProofAttempt
from runs.models import RunEvent
from tests.runs.event_helpers import publisher_for, rollout, wait_for
from tests.services_plugin import TEST_ROOT, _platform_env
from trainer.observability.events import EventType

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = 3000


def ingester_process(name):
    return PlatformProcess(name=name, port=0, log_dir=TEST_ROOT / "logs", env=_platform_env(), has_port=False,
                           argv=[sys.executable, "manage.py", "ingest_events"])


def test_an_ingester_killed_mid_batch_and_restarted_stores_every_event_once_in_order(make_run, redis_client):
    run = make_run(state="running")
    publisher = publisher_for(run)
    for index in range(EVENTS):
        publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key=f"s1-r{index}", reasoning="thinking " * 50))

    first = ingester_process("ingester-killed")
    first.start()
    try:
        wait_for(lambda: RunEvent.objects.filter(run=run).exists(), timeout=120, what="the first batch")
        first.process.kill()  # SIGKILL: no goodbye, a batch maybe half-way through its transaction
        first.process.wait(10)
    finally:
        first.stop()
    stored_at_kill = RunEvent.objects.filter(run=run).count()
    assert stored_at_kill < EVENTS, "the ingester finished before it could be killed: publish more events"

    second = ingester_process("ingester-restarted")
    second.start()
    try:
        wait_for(lambda: RunEvent.objects.filter(run=run).count() >= EVENTS, timeout=300,
                 what=f"all {EVENTS} events after the restart")
        time.sleep(1)  # anything doubled would arrive now
    finally:
        second.stop()

    stored = list(RunEvent.objects.filter(run=run).order_by("run_seq").values_list("run_seq", "seq"))
    assert [number for number, _ in stored] == list(range(1, EVENTS + 1))
    assert [seq for _, seq in stored] == list(range(EVENTS))  # the order they were published in
    assert ProofAttempt.objects.filter(run=run).count() == EVENTS
