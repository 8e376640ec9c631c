"""On an autoscaling cluster scaled to zero (KubeRay, minReplicas 0, a head with no CPUs), a GPU run is
submitted and waits for the autoscaler, instead of failing because no GPU worker is alive yet.

The suite's local Ray head stands in for such a cluster: it has no GPU. A run of 8 GPUs is placed as actors, so its
job is its driver, which holds no GPU and starts at once; its placement group is what waits for the GPUs, as on
KubeRay before the autoscaler has added the worker Ray asked it for.
"""

import pytest

from runs import actions
from runs.cluster import reachable_resources, resource_problems
from runs.models import RunState
from tests.runs.jobs import running_job_of_a_shell_trainer, supervisor_resources, wait_for_job
from trainer.config import RunConfig

# What deploy/k8s/20-raycluster.yaml reaches: the h100x8 group at maxReplicas 4, 8 GPUs and 96 CPUs each.
KUBERAY_MAX = {"num_gpus": 32.0, "num_cpus": 384.0}
# Its live totals once the GPU workers have scaled to zero: the head alone, with num-cpus "0".
SCALED_TO_ZERO = {"address": "http://lean-rl-head-svc:8265", "alive_nodes": 1, "num_cpus": 0.0, "num_gpus": 0.0,
                  "max_gpus_per_node": 0.0, "memory_bytes": 3e10, "object_store_memory_bytes": 1e10,
                  "accelerator_types": []}


def test_the_h100x8_preset_fits_a_cluster_scaled_to_zero_that_autoscales():
    assert resource_problems(RunConfig.from_preset("h100x8"), reachable_resources(SCALED_TO_ZERO, KUBERAY_MAX)) == []


def test_a_run_beyond_what_the_autoscaler_can_reach_is_still_refused_saying_so():
    config = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 64}})
    problems = resource_problems(config, reachable_resources(SCALED_TO_ZERO, KUBERAY_MAX))
    assert any("asks for 64 GPUs" in p and "can grow to 32 in all (autoscaling)" in p for p in problems)


def test_a_cluster_that_does_not_autoscale_is_what_is_alive_now():
    problems = resource_problems(RunConfig.from_preset("h100x8"), reachable_resources(SCALED_TO_ZERO, None))
    assert any("asks for 8 GPUs" in p and "has 0 in all" in p and "RAY_AUTOSCALING_MAX_GPUS" in p for p in problems)


@pytest.mark.django_db(transaction=True)
def test_dispatch_submits_a_gpu_run_to_a_cluster_without_gpus_that_autoscales_and_ray_starts_its_driver_holding_none(
        make_admitted_run, ray_head, settings, tmp_path):
    settings.RAY_AUTOSCALING_MAX_GPUS = KUBERAY_MAX["num_gpus"]
    settings.RAY_AUTOSCALING_MAX_CPUS = KUBERAY_MAX["num_cpus"]
    # Were the job to hold the run's 8 GPUs itself, this head could only keep it pending; a waiting shell stands in
    # for the trainer, and Ray reports it RUNNING.
    run = running_job_of_a_shell_trainer(make_admitted_run, settings, tmp_path / "trainer", "sleep 600\n",
                                         config=RunConfig.from_preset("h100x8").to_json_dict(), preset="h100x8")
    assert run.ray_job_id == f"run-{run.pk}-attempt-1"
    # The job is the run's driver and holds nothing: its placement group asks for the 8 GPUs, and that pending
    # group is what Ray's autoscaler asks KubeRay a worker for (the driver waiting for its group, and cancelled
    # while it waits: tests/placement/test_cancel_ends_a_run_of_actors_at_once_even_while_its_placement_group_waits.py).
    assert supervisor_resources(run.ray_job_id) == {}
    # So a cancel reaches it at once, unlike a job Ray holds pending (test_cancelling_a_run_whose_job_ray_holds_...).
    assert actions.cancel_run(run)
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED
    assert wait_for_job(run.ray_job_id, {"STOPPED", "FAILED", "SUCCEEDED"}).state == "STOPPED"
    assert not run.state_changes.filter(reason__startswith="Ray holds").exists()
