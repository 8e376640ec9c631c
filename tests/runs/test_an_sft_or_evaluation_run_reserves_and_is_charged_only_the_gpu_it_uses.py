"""SFT and evaluation runs are one process on one GPU (trainer/sft/training.py, trainer/loop/evaluation_run.py): on the
h100x8 preset they reserve one GPU from Ray and are charged one against quotas, not the preset's eight."""

import pytest

from runs import actions, scheduling
from runs.cluster import ONE_GPU_KINDS, requested_resources
from runs.models import RunKind
from tests.runs.jobs import end_pending_job, supervisor_resources, wait_for_job
from trainer.config import RunConfig

H100X8 = RunConfig.from_preset("h100x8")


def test_the_one_gpu_kinds_are_the_platforms_sft_and_evaluation_kinds():
    assert ONE_GPU_KINDS == {RunKind.SFT.value, RunKind.EVAL.value}


@pytest.mark.parametrize("kind", [RunKind.SFT, RunKind.EVAL])
def test_an_h100x8_sft_or_evaluation_run_asks_ray_for_one_gpu_and_one_workers_cpus(kind):
    assert requested_resources(H100X8, kind) == {"num_gpus": 1.0, "num_cpus": float(H100X8.cluster.cpus_per_worker)}


def test_an_h100x8_rl_run_still_asks_for_every_gpu():
    assert requested_resources(H100X8, RunKind.RL)["num_gpus"] == 8.0


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "charged"), [(RunKind.EVAL, 1), (RunKind.SFT, 1), (RunKind.RL, 8)])
def test_the_quota_charges_what_the_run_holds(make_run, kind, charged):
    run = make_run(kind=kind, config=H100X8.to_json_dict(), preset="h100x8")
    assert scheduling.run_gpus(run) == charged


@pytest.mark.django_db
def test_a_person_limited_to_one_gpu_may_launch_an_h100x8_evaluation_but_not_an_rl_run(alice, settings):
    settings.RUN_QUOTA_DEFAULT_GPUS = 1
    actions.check_resolved_config(H100X8, owner=alice, kind=RunKind.EVAL)
    with pytest.raises(actions.LaunchError, match="the run needs 8 GPUs"):
        actions.check_resolved_config(H100X8, owner=alice, kind=RunKind.RL)


@pytest.mark.django_db(transaction=True)
def test_the_ray_job_of_an_h100x8_evaluation_reserves_one_gpu(make_admitted_run, ray_head, settings):
    # The suite's head has no GPU: the autoscaling ceiling lets the job be submitted, and Ray holds it pending.
    settings.TRAINER_PYTHON = "/bin/true"
    settings.RAY_AUTOSCALING_MAX_GPUS = 8
    settings.RAY_AUTOSCALING_MAX_CPUS = 512
    run = make_admitted_run(kind=RunKind.EVAL, config=H100X8.to_json_dict(), preset="h100x8")
    actions.dispatch(run.pk)
    run.refresh_from_db()
    try:
        assert run.ray_job_id, run.failure_reason
        wait_for_job(run.ray_job_id, {"PENDING"})
        # What Ray waits to place (and an autoscaler would add a node for): the job's supervisor actor's resources.
        assert supervisor_resources(run.ray_job_id) == {"GPU": 1.0, "CPU": float(H100X8.cluster.cpus_per_worker)}
    finally:
        if run.ray_job_id:
            end_pending_job(ray_head, run.ray_job_id)  # this head will never place it; Ray's stop would wait for that
