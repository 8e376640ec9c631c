"""Redis killed with SIGKILL mid-run and started again on its append-only file: the trainer buffers its
events across the outage, the ingester and the worker reconnect, and the run ends succeeded."""

import time

import pytest

from proofs.models import ProofAttempt
from tests.faults.conftest import assert_same_proof_attempts, kill, wait_for_end, wait_until
from tests.services_plugin import _owns

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_survives_redis_killed_and_restarted(launch, undisturbed, supervised_platform, platform_logs):
    redis_service = _owns["redis"]
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    kill(redis_service)
    redis_service.process.wait(30)
    time.sleep(2)  # an outage, not a blip: the trainer publishes into it
    redis_service.start()  # same port, same data folder: the append-only file brings the streams back
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
