"""The Ray head restarted mid-run takes the run's job with it, and the new head has no record of it:
nothing can bring that job back, so the run fails with a reason that says what happened and to resume
(and resuming it then trains it to the end)."""

import psutil
import pytest

from proofs.models import ProofAttempt
from runs import actions
from runs.models import RunState
from tests.faults.conftest import (
    assert_same_proof_attempts,
    reload,
    trainer_processes,
    wait_for_end,
    wait_until,
)
from tests.services_plugin import _ray

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_whose_ray_head_restarted_fails_saying_to_resume_and_a_resume_finishes_it(
        launch, undisturbed, supervised_platform, platform_logs):
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    # Frozen first: a two-step run can otherwise finish in the seconds the head takes to go down.
    frozen = trainer_processes(run)
    for process in frozen:
        process.suspend()
    _ray.stop()
    for orphan in {*frozen, *trainer_processes(run)}:  # a head killed outright leaves its job's driver behind
        try:
            orphan.kill()
        except psutil.NoSuchProcess:
            pass
    _ray.start()
    run = wait_for_end(run, platform_logs)
    assert run.state == RunState.FAILED, platform_logs()
    assert f"has no record of the job run-{run.pk}-attempt-1" in run.failure_reason
    assert "Resume the run" in run.failure_reason

    assert actions.resume_run(reload(run))
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
    assert reload(run).attempt == 2
