"""cluster_resources and cluster_description against a real local Ray head (token auth on)."""

import time

import pytest

from runs.cluster import ClusterUnreachable, cluster_description, cluster_resources, code_version, resource_problems
from trainer.config import RunConfig


def test_it_reads_the_live_heads_cpus_gpus_and_nodes(local_ray_head):
    resources = cluster_resources(local_ray_head.dashboard_url, auth_token=local_ray_head.auth_token)
    assert resources["address"] == local_ray_head.dashboard_url
    assert resources["alive_nodes"] == 1
    assert resources["num_cpus"] == 2.0
    assert resources["num_gpus"] == 2.0 == resources["max_gpus_per_node"]
    assert resources["object_store_memory_bytes"] == 100_000_000


def test_a_configured_run_is_checked_against_the_live_head_before_submission(local_ray_head):
    resources = cluster_resources(local_ray_head.dashboard_url, auth_token=local_ray_head.auth_token)
    two_gpu_run = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 2, "cpus_per_worker": 1}})
    greedy_run = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 2, "cpus_per_worker": 2}})
    eight_gpu_run = RunConfig.from_preset("h100x8")
    assert resource_problems(two_gpu_run, resources) == []
    assert resource_problems(greedy_run, resources) == [
        f"the run asks for 4 CPUs (cluster.cpus_per_worker 2 × 2 workers) but the cluster at "
        f"{local_ray_head.dashboard_url} has 2 in all; lower cluster.cpus_per_worker to at most 1 or add CPUs to the cluster"
    ]
    assert any("asks for 8 GPUs" in problem and "has 2 in all" in problem
               for problem in resource_problems(eight_gpu_run, resources))


def test_it_describes_the_cluster_for_the_runs_record(local_ray_head):
    import ray

    description = cluster_description(local_ray_head.dashboard_url, auth_token=local_ray_head.auth_token)
    assert description["ray_version"] == ray.__version__
    assert description["session_name"].startswith("session_")
    [node] = description["nodes"]
    assert node["is_head_node"] and node["resources_total"]["GPU"] == 2.0


def test_it_reads_the_token_from_ray_auth_token_like_the_cluster_does(local_ray_head, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", local_ray_head.auth_token)
    assert cluster_resources(local_ray_head.dashboard_url)["alive_nodes"] == 1


def test_it_says_the_token_is_missing_when_the_cluster_requires_one(local_ray_head, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    with pytest.raises(ClusterUnreachable, match="token missing.*RAY_AUTH_TOKEN"):
        cluster_resources(local_ray_head.dashboard_url)
    with pytest.raises(ClusterUnreachable, match="token given but not accepted"):
        cluster_resources(local_ray_head.dashboard_url, auth_token="not-the-token")


def test_it_names_the_address_and_the_variable_when_nothing_answers():
    with pytest.raises(ClusterUnreachable, match=r"http://127\.0\.0\.1:9.*RAY_ADDRESS"):
        cluster_resources("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(ClusterUnreachable, match="dashboard's HTTP address, got 'ray-head:6379'"):
        cluster_resources("ray-head:6379")


def test_the_code_version_prefers_the_one_baked_into_the_image(monkeypatch):
    monkeypatch.setenv("PLATFORM_CODE_VERSION", "0123456789ab")
    assert code_version() == "0123456789ab"


def test_the_embedded_stacks_ray_head_is_read_by_the_same_code(ray_head):
    # A head's dashboard answers a moment before the head registers itself as a node.
    deadline = time.monotonic() + 30
    while (resources := cluster_resources(ray_head.address))["alive_nodes"] == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert resources["alive_nodes"] == 1 and resources["num_gpus"] == 0.0
    assert resource_problems(RunConfig.from_preset("cpu-demo"), resources) == []
    assert any("choose the cpu-demo preset" in problem
               for problem in resource_problems(RunConfig.from_preset("h100x8"), resources))
