"""resource_problems as a pure function: the run's config against what a cluster has."""

from runs.cluster import requested_resources, resource_problems
from trainer.config import RunConfig

EIGHT_H100 = {"address": "http://ray-head:8265", "alive_nodes": 2, "num_cpus": 200.0, "num_gpus": 8.0,
              "max_gpus_per_node": 8.0, "memory_bytes": 2e12, "object_store_memory_bytes": 2e11,
              "accelerator_types": ["H100"],
              "nodes": [{"name": "node aaaa1111 (10.0.0.2)", "gpus": 8.0, "cpus": 192.0},
                        {"name": "node cccc3333 (10.0.0.1)", "gpus": 0.0, "cpus": 8.0}]}
CPU_ONLY = {**EIGHT_H100, "num_gpus": 0.0, "max_gpus_per_node": 0.0, "num_cpus": 4.0, "accelerator_types": [],
            "nodes": [{"name": "node cccc3333 (10.0.0.1)", "gpus": 0.0, "cpus": 4.0}]}


def test_the_h100x8_preset_fits_an_eight_gpu_cluster():
    assert resource_problems(RunConfig.from_preset("h100x8"), EIGHT_H100) == []


def test_the_cpu_demo_preset_fits_a_small_cpu_cluster():
    assert resource_problems(RunConfig.from_preset("cpu-demo"), CPU_ONLY) == []


def test_it_refuses_a_gpu_run_on_a_cluster_without_gpus_and_suggests_the_cpu_preset():
    problems = resource_problems(RunConfig.from_preset("h100x8"), {**CPU_ONLY, "num_cpus": 500.0})
    assert any("asks for 8 GPUs (cluster.num_gpus)" in p and "has 0" in p and "cpu-demo" in p for p in problems)
    assert any("rollout.engine is 'vllm'" in p for p in problems)
    assert all("http://ray-head:8265" in p for p in problems)


def test_it_says_how_far_to_lower_num_gpus_on_a_smaller_gpu_cluster():
    [problem] = resource_problems(RunConfig.from_preset("h100x8"), {**EIGHT_H100, "num_gpus": 4.0})
    assert "asks for 8 GPUs" in problem and "has 4 in all" in problem and "at most 4" in problem


def test_it_counts_cpus_per_gpu_worker_and_names_the_field():
    config = RunConfig.from_preset("h100x8", {"cluster": {"cpus_per_worker": 16}})
    assert requested_resources(config) == {"num_gpus": 8.0, "num_cpus": 128.0}
    [problem] = resource_problems(config, {**EIGHT_H100, "num_cpus": 96.0})
    assert "128 CPUs" in problem and "cluster.cpus_per_worker 16 × 8 workers" in problem and "at most 12" in problem


def test_a_cpu_run_needs_one_worker_of_cpus():
    config = RunConfig.from_preset("cpu-demo")
    assert requested_resources(config) == {"num_gpus": 0.0, "num_cpus": 2.0}
    [problem] = resource_problems(config, {**CPU_ONLY, "num_cpus": 1.0})
    assert "2 CPUs" in problem and "1 worker)" in problem and "at most 1" in problem


def test_it_asks_for_more_cpus_when_not_even_one_per_worker_is_left():
    [problem] = resource_problems(RunConfig.from_preset("h100x8"), {**EIGHT_H100, "num_cpus": 4.0})
    assert "cannot give each of the 8 workers one CPU" in problem


def test_it_refuses_a_tensor_parallel_group_larger_than_the_runs_gpus():
    config = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 2}, "rollout": {"vllm_tensor_parallel_size": 4}})
    [problem] = resource_problems(config, EIGHT_H100)
    assert "vllm_tensor_parallel_size is 4" in problem


def test_it_refuses_any_run_on_a_cluster_with_no_live_nodes():
    [problem] = resource_problems(RunConfig.from_preset("cpu-demo"), {**CPU_ONLY, "alive_nodes": 0})
    assert "no live nodes" in problem
