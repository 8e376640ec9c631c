"""A run cancelled while Ray holds its job pending (waiting for an autoscaler's node) is cancelled at once, and its
timeline says what Ray's stop does not do yet: Ray's job API queues the stop on the job's supervisor, which runs only
once placed, and has no call that ends a job before that (platform/runs/ray_jobs.py ``PENDING_STOP_NOTE``). The
sweeper, which asks again for every job of a final run, does not log such a job as stopped either.

Ray holds pending a job that holds its run's GPU itself: a one-process run (an evaluation or SFT on a GPU, a run of
one GPU). The suite's local Ray head has no GPU, so an h100x8 evaluation (one GPU) can only wait there, as on KubeRay
scaled to zero. A run of several GPUs is placed as actors and its job holds nothing (its placement group waits):
tests/runs/test_a_cluster_scaled_to_zero_takes_a_gpu_run_and_leaves_it_to_the_autoscaler.py.
"""

import logging

import pytest

from runs import actions, ray_jobs
from runs.models import RunKind, RunState
from runs.sweeper import Sweeper
from tests.runs.jobs import end_pending_job, supervisor_resources, wait_for_job
from trainer.config import RunConfig


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_while_its_job_is_pending_says_the_stop_reaches_the_job_only_once_placed(
        make_admitted_run, ray_head, settings, caplog):
    settings.TRAINER_PYTHON = "/bin/true"  # were the job ever placed, it would end at once
    settings.RAY_AUTOSCALING_MAX_GPUS = 32
    settings.RAY_AUTOSCALING_MAX_CPUS = 384
    run = make_admitted_run(kind=RunKind.EVAL, config=RunConfig.from_preset("h100x8").to_json_dict(), preset="h100x8")
    actions.dispatch(run.pk)
    run.refresh_from_db()
    job_id = run.ray_job_id
    try:
        assert wait_for_job(job_id, {"PENDING", "FAILED"}).state == "PENDING", run.failure_reason
        assert supervisor_resources(job_id)["GPU"] == 1.0  # what Ray waits to place, and never can here
        assert actions.cancel_run(run)
        run.refresh_from_db()
        assert run.state == RunState.CANCELLED
        assert ray_jobs.status(job_id).state == "PENDING"  # what Ray's stop leaves, and the timeline says so
        notes = list(run.state_changes.filter(state=RunState.CANCELLED).values_list("reason", flat=True))
        assert notes[-1] == ray_jobs.PENDING_STOP_NOTE.format(job_id=job_id)
        assert "the stop reaches it only then" in notes[-1] and "RAY_JOB_START_TIMEOUT_SECONDS" in notes[-1]
        with caplog.at_level(logging.WARNING, logger="runs.sweeper"):
            Sweeper().stop_jobs_without_a_live_run()
        said = [record.getMessage() for record in caplog.records if job_id in record.getMessage()]
        assert said == [f"asked Ray to stop job {job_id} (its run is cancelled), but "
                        + ray_jobs.PENDING_STOP_NOTE.format(job_id="it")]
    finally:
        if job_id:
            # Ended by killing its supervisor: Ray reports FAILED, or STOPPED where the stop asked while it was pending
            # was recorded first (a fresh-machine run saw STOPPED); either way the job is over, which is all this asks.
            assert end_pending_job(ray_head, job_id).state in {"FAILED", "STOPPED"}
