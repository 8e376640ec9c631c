"""The launch and the dispatch checks know nodes: a run is a placement group of bundles (trainer/cluster/placement.py),
and it is refused only where no layout of the cluster's nodes can ever hold them, with each node's numbers.

A cluster of two 4-GPU nodes has 8 GPUs in all. An `h100x8` run's bundles (one GPU per learner rank, packed, then
spread) fit it across both nodes, and it is accepted (it was refused while a run lived on one node). A run whose
8-way tensor-parallel group must share one node can never be placed there: refused before submission, naming
each node and what to change, instead of pending for an hour (RAY_JOB_START_TIMEOUT_SECONDS): by the launch form,
asking the cluster as it is, and again at dispatch."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from pathlib import Path

import pytest
from django.urls import reverse

from runs.cluster import ClusterUnreachable, cluster_resources, reachable_resources, resource_problems
from trainer.config import RunConfig

TWO_FOUR_GPU_NODES = {"address": "http://ray-head:8265", "alive_nodes": 3, "num_cpus": 200.0, "num_gpus": 8.0,
                      "max_gpus_per_node": 4.0, "gpus_per_node": [4.0, 4.0, 0.0], "memory_bytes": 2e12,
                      "object_store_memory_bytes": 2e11, "accelerator_types": ["H100"],
                      "nodes": [{"name": "node aaaa1111 (10.0.0.2)", "gpus": 4.0, "cpus": 96.0},
                                {"name": "node bbbb2222 (10.0.0.3)", "gpus": 4.0, "cpus": 96.0},
                                {"name": "node cccc3333 (10.0.0.1)", "gpus": 0.0, "cpus": 8.0}]}
REPO = Path(__file__).resolve().parents[2]
EIGHT_WAY_TENSOR_PARALLEL = {"rollout": {"vllm_tensor_parallel_size": 8}}


def test_h100x8_on_two_four_gpu_nodes_is_accepted():
    assert resource_problems(RunConfig.from_preset("h100x8"), TWO_FOUR_GPU_NODES) == []


def test_an_eight_way_tensor_parallel_group_on_two_four_gpu_nodes_is_refused_naming_each_node_and_the_fix():
    [problem] = resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), TWO_FOUR_GPU_NODES)
    assert problem == (
        "on the Ray cluster at http://ray-head:8265, the run needs 8 GPUs on one node for a tensor-parallel group of "
        "rollout.vllm_tensor_parallel_size GPUs (learner and rollout engine), but the largest node has 4 (per node: "
        "node aaaa1111 (10.0.0.2): 4 GPUs, 96 CPUs; node bbbb2222 (10.0.0.3): 4 GPUs, 96 CPUs; node cccc3333 "
        "(10.0.0.1): 0 GPUs, 8 CPUs); lower rollout.vllm_tensor_parallel_size to at most 4 or add a node with 8 GPUs")


def test_an_evaluation_of_an_h100x8_model_uses_one_gpu_and_fits():
    assert resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), TWO_FOUR_GPU_NODES,
                             kind="eval") == []


def test_an_autoscaling_cluster_is_judged_by_the_workers_it_can_add():
    scaled_to_zero = {**TWO_FOUR_GPU_NODES, "alive_nodes": 1, "num_gpus": 0.0, "num_cpus": 0.0,
                      "max_gpus_per_node": 0.0, "gpus_per_node": [0.0],
                      "nodes": [{"name": "node cccc3333 (10.0.0.1)", "gpus": 0.0, "cpus": 0.0}]}
    four_gpu_workers = reachable_resources(scaled_to_zero, {"num_gpus": 32, "num_cpus": 384, "max_gpus_per_node": 4})
    assert resource_problems(RunConfig.from_preset("h100x8"), four_gpu_workers) == []
    [problem] = resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), four_gpu_workers)
    assert "the largest node has 4" in problem
    assert "a worker the autoscaler may add (RAY_AUTOSCALING_MAX_GPUS_PER_NODE): 4 GPUs, 48 CPUs" in problem
    eight_gpu_workers = reachable_resources(scaled_to_zero, {"num_gpus": 32, "num_cpus": 384, "max_gpus_per_node": 8})
    assert resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), eight_gpu_workers) == []
    # Told nothing of its workers' size, dispatch leaves the placement to Ray, as before.
    unknown_workers = reachable_resources(scaled_to_zero, {"num_gpus": 32, "num_cpus": 384})
    assert resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), unknown_workers) == []


# A head without GPUs and two workers of 4 logical GPUs each (Ray schedules by declared resources), owned by a
# child process so that its shutdown stops exactly what it started.
_TWO_NODE_CLUSTER = """
import json, sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 1, "num_gpus": 0, "include_dashboard": True, "dashboard_host": "127.0.0.1", "dashboard_port": 0})
for _ in range(2):
    cluster.add_node(num_cpus=32, num_gpus=4)  # logical: what an h100x8 run's 8 bundles of 1 GPU and 8 CPUs need
cluster.wait_for_nodes()
import ray
context = ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
# h100x8's placement group as its driver reserves it (trainer/loop/ray_driver.py): where Ray puts each bundle.
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from trainer.cluster.placement import run_placement
from trainer.config import RunConfig
h100x8 = run_placement(RunConfig.from_preset("h100x8"))
group = placement_group(h100x8.as_ray(), strategy=h100x8.strategy)
ready = group.wait(timeout_seconds=60)
bundle_nodes = list(placement_group_table(group)["bundles_to_node_id"].values()) if ready else []
remove_placement_group(group)
print(json.dumps({"dashboard_url": "http://" + context.dashboard_url, "h100x8_bundle_nodes": bundle_nodes}), flush=True)
sys.stdin.read()
ray.shutdown()
cluster.shutdown()
"""


@pytest.fixture(scope="module")
def two_four_gpu_nodes(tmp_path_factory):
    environment = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
                   "HOME": str(tmp_path_factory.mktemp("ray-home")), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    owner = subprocess.Popen([sys.executable, "-c", _TWO_NODE_CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=environment)
    try:
        line = owner.stdout.readline()
        if not line:
            pytest.fail(f"the two-node Ray cluster exited with code {owner.wait(timeout=30)} before it started")
        started = json.loads(line)
        _wait_until_it_lists_three_nodes(started["dashboard_url"])
        yield started
    finally:
        owner.stdin.close()
        try:
            owner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            owner.kill()
            owner.wait()


def _wait_until_it_lists_three_nodes(dashboard_url: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if cluster_resources(dashboard_url, auth_token="", timeout_s=5)["alive_nodes"] == 3:
                return
        except ClusterUnreachable:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the two-node Ray cluster's dashboard at {dashboard_url} did not list 3 nodes in {timeout_s:g} s")
        time.sleep(1)


def test_h100x8_is_placed_on_both_four_gpu_nodes_of_a_real_cluster(two_four_gpu_nodes):
    bundle_nodes = two_four_gpu_nodes["h100x8_bundle_nodes"]
    assert len(bundle_nodes) == 8, "Ray did not grant h100x8's placement group of 8 bundles within 60 s"
    assert sorted(bundle_nodes.count(node) for node in set(bundle_nodes)) == [4, 4]  # packed: 4 a node


def test_the_dispatch_check_places_a_run_across_the_nodes_of_a_real_cluster_of_two(two_four_gpu_nodes):
    resources = cluster_resources(two_four_gpu_nodes["dashboard_url"], auth_token="")
    assert resources["alive_nodes"] == 3 and resources["num_gpus"] == 8.0
    assert [(node["gpus"], node["cpus"]) for node in resources["nodes"]] == [(4.0, 32.0), (4.0, 32.0), (0.0, 1.0)]
    assert resource_problems(RunConfig.from_preset("h100x8"), resources) == []
    [problem] = resource_problems(RunConfig.from_preset("h100x8", EIGHT_WAY_TENSOR_PARALLEL), resources)
    assert "the run needs 8 GPUs on one node" in problem and "the largest node has 4" in problem
    assert problem.count(": 4 GPUs, 32 CPUs") == 2 and ": 0 GPUs, 1 CPUs" in problem


@pytest.mark.django_db
def test_the_launch_form_takes_h100x8_across_the_two_nodes_and_refuses_an_eight_way_group_saying_why(
        two_four_gpu_nodes, settings, monkeypatch, alices_client, promptset_version, dispatched):
    from runs import launch_contract
    from runs.forms import LaunchRunForm
    from runs.models import Run
    from trainer.config import PRESETS

    settings.RAY_ADDRESS = address = two_four_gpu_nodes["dashboard_url"]
    # People launch presets, never a tensor-parallel size (runs/launch_contract.py): a deployment's preset asks for it.
    monkeypatch.setitem(PRESETS, "h100x8-tp8", {**PRESETS["h100x8"], "rollout": {
        **PRESETS["h100x8"].get("rollout", {}), **EIGHT_WAY_TENSOR_PARALLEL["rollout"]}})
    monkeypatch.setitem(launch_contract.PRESET_BOUNDS, "h100x8-tp8", launch_contract.PRESET_BOUNDS["h100x8"])
    monkeypatch.setattr(LaunchRunForm.base_fields["preset"], "choices", [(preset, preset) for preset in PRESETS])

    def launch(preset):
        return alices_client.post(reverse("runs:new"), {"name": preset, "promptset_version": promptset_version.pk,
                                                        "preset": preset, "kind": "rl"})

    accepted = launch("h100x8")
    assert accepted.status_code == 302, accepted.context["form"].errors if accepted.context else accepted
    refused = launch("h100x8-tp8")
    assert refused.status_code == 200
    [problem] = refused.context["form"].errors["preset"]
    assert problem.startswith(f"on the Ray cluster at {address}, the run needs 8 GPUs on one node for a "
                              "tensor-parallel group")
    assert problem.count(": 4 GPUs, 32 CPUs") == 2 and "lower rollout.vllm_tensor_parallel_size to at most 4" in problem
    assert problem in refused.content.decode()
    by_api = alices_client.post("/api/runs/", {"name": "by the API", "promptset_version_id": promptset_version.pk,
                                               "preset": "h100x8-tp8"}, content_type="application/json")
    assert by_api.status_code == 422 and by_api.json()["field_errors"]["preset"] == [problem]
    assert list(Run.objects.values_list("preset", flat=True)) == ["h100x8"] and len(dispatched) <= 1
