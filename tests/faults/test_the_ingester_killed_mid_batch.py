"""The ingester killed with SIGKILL while a run's rollouts stream in: the run ends succeeded with every
proof attempt stored once (the next ingester claims what the dead one read and never acknowledged)."""

import pytest

from proofs.models import ProofAttempt
from tests.faults.conftest import assert_same_proof_attempts, kill, wait_for_end, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_survives_its_ingester_killed_mid_batch(launch, undisturbed, supervised_platform, platform_logs):
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    kill(supervised_platform["ingester"])  # the supervisor starts it again, as the stack does
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
