"""The Celery worker killed right after a launch, and again right after it claimed a run: the sweeper
dispatches the run again (or adopts the job the dead worker submitted), and it ends succeeded."""

import pytest

from runs.models import Run, RunState
from tests.faults.conftest import assert_same_proof_attempts, kill, wait_for_end, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_survives_the_worker_killed_right_after_its_launch(launch, undisturbed, supervised_platform,
                                                                 platform_logs):
    run = launch()
    kill(supervised_platform["celery-worker"])  # the dispatch task is in the broker, or taken and never acknowledged
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)


def test_a_run_survives_the_worker_killed_right_after_claiming_it(launch, undisturbed, supervised_platform,
                                                                  platform_logs):
    run = launch()
    wait_until(lambda: Run.objects.filter(pk=run.pk, state=RunState.STARTING).exists(), "the worker to claim the run",
               platform_logs, every_s=0.01)
    kill(supervised_platform["celery-worker"])  # before or just after it submitted the job, never having saved its id
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
