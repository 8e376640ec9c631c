"""PostgreSQL restarted mid-run: the ingester, the worker and the sweeper ride it out, and the run ends
succeeded with every proof attempt stored once."""

import pytest

from proofs.models import ProofAttempt
from tests.faults.conftest import assert_same_proof_attempts, wait_for_end, wait_until
from tests.services_plugin import _owns

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_survives_postgres_restarted(launch, undisturbed, supervised_platform, platform_logs):
    postgres = _owns["postgres"]
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    postgres.stop()  # a fast shutdown: every connection is cut, as a managed database's failover does
    postgres.start()
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
