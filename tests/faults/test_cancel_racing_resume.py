"""Cancel followed at once by resume: never two jobs of the run at once, nothing of the cancelled
attempt reaches the resumed one, and the resumed run ends succeeded with the undisturbed run's proof attempts."""

import threading
import time

import pytest

from proofs.models import ProofAttempt
from runs import actions, ray_jobs
from tests.faults.conftest import assert_same_proof_attempts, reload, wait_for_end, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


class LiveJobWatch:
    """Counts the run's live Ray jobs a few times a second while the test goes on."""

    def __init__(self, run_id):
        self.prefix, self.most, self.stop = f"run-{run_id}-attempt-", 0, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stop.is_set():
            try:
                live = [job for job in ray_jobs.platform_jobs() if job.job_id.startswith(self.prefix)
                        and job.state in ("PENDING", "RUNNING")]
                self.most = max(self.most, len(live))
            except ray_jobs.RayCallFailed:
                pass
            time.sleep(0.2)

    def close(self):
        self.stop.set()
        self.thread.join(10)


def test_cancel_then_resume_at_once_runs_one_job_at_a_time_and_finishes_the_run(
        launch, undisturbed, supervised_platform, platform_logs):
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    watch = LiveJobWatch(run.pk)
    try:
        assert actions.cancel_run(reload(run))
        assert actions.resume_run(reload(run))
        run = wait_for_end(run, platform_logs)
    finally:
        watch.close()
    assert run.attempt == 2
    assert_same_proof_attempts(run, undisturbed, platform_logs)
    assert watch.most == 1, "two attempts' jobs were live at the same time"
    assert ray_jobs.status(f"run-{run.pk}-attempt-1").is_terminal
