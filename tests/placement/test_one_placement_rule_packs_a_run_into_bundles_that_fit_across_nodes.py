"""The one placement rule (trainer/cluster/placement.py): which bundles a run reserves, and whether a cluster's
nodes can ever hold them."""

from trainer.cluster.placement import NodeCapacity, Role, placement_problems, run_placement
from trainer.config import RunConfig

TWO_FOUR_GPU_NODES = [NodeCapacity("node a", 4, 64), NodeCapacity("node b", 4, 64)]


def test_h100x8_is_eight_single_gpu_bundles_that_fit_two_four_gpu_nodes():
    placement = run_placement(RunConfig.from_preset("h100x8"))

    assert [bundle.as_ray() for bundle in placement.bundles] == [{"CPU": 8.0, "GPU": 1.0}] * 8
    assert placement.strategy == "PACK"
    assert [bundle.ranks for bundle in placement.bundles] == [(rank,) for rank in range(8)]
    assert placement_problems(placement, TWO_FOUR_GPU_NODES) == []


def test_an_eight_way_tensor_parallel_group_is_one_bundle_and_is_refused_on_four_gpu_nodes_with_their_numbers():
    placement = run_placement(RunConfig.from_preset("h100x8", {"rollout": {"vllm_tensor_parallel_size": 8}}))

    assert [bundle.gpus for bundle in placement.bundles] == [8]
    assert placement.bundles[0].ranks == tuple(range(8))
    (problem,) = placement_problems(placement, TWO_FOUR_GPU_NODES)
    assert "8 GPUs on one node" in problem and "tensor-parallel" in problem
    assert "node a: 4 GPUs, 64 CPUs; node b: 4 GPUs, 64 CPUs" in problem
    assert "lower rollout.vllm_tensor_parallel_size to at most 4" in problem


def test_an_asynchronous_run_has_a_bundle_per_learner_gpu_then_one_per_rollout_engine():
    config = RunConfig.from_preset("h100x8", {"cluster": {"rollout_gpus": 4},
                                              "rollout": {"max_staleness": 1, "vllm_tensor_parallel_size": 2}})
    placement = run_placement(config)

    assert [(bundle.role, bundle.gpus) for bundle in placement.bundles] == (
        [(Role.LEARNER, 1)] * 4 + [(Role.ENGINE, 2)] * 2)
    assert placement.bundle_of_rank(3) == 3 and placement.bundle_of_engine(1) == 5
    assert placement_problems(placement, [NodeCapacity("node a", 4, 64), NodeCapacity("node b", 4, 64)]) == []
    # Two tensor-parallel pairs and four single GPUs fit 3 + 3 + 2 GPUs (each 3 is a pair and a learner);
    # on single-GPU nodes no pair ever sits whole.
    assert placement_problems(placement, [NodeCapacity("node a", 3, 64), NodeCapacity("node b", 3, 64),
                                          NodeCapacity("node c", 2, 64)]) == []
    assert "2 GPUs on one node" in placement_problems(
        placement, [NodeCapacity(f"node {index}", 1, 64) for index in range(8)])[0]


def test_bundles_that_fit_each_node_but_not_all_together_are_refused():
    placement = run_placement(RunConfig.from_preset("h100x8", {"rollout": {"vllm_tensor_parallel_size": 4}}))

    assert [bundle.gpus for bundle in placement.bundles] == [4, 4]
    (problem,) = placement_problems(placement, [NodeCapacity("node a", 6, 64), NodeCapacity("node b", 2, 64)])
    assert "fit no layout" in problem and "8 GPUs" in problem
    assert placement_problems(placement, [NodeCapacity("node a", 8, 64)]) == []


def test_a_cpu_run_an_sft_run_and_an_evaluation_are_one_bundle():
    cpu_demo = RunConfig.from_preset("cpu-demo")
    cpu = run_placement(cpu_demo)
    assert cpu.as_ray() == [{"CPU": float(cpu_demo.cluster.cpus_per_worker)}]
    for kind in ("sft", "eval"):
        one = run_placement(RunConfig.from_preset("h100x8"), kind)
        assert [bundle.as_ray() for bundle in one.bundles] == [{"CPU": 8.0, "GPU": 1.0}]


def test_a_bundle_wanting_more_cpus_than_any_node_has_is_refused_naming_cpus_per_worker():
    placement = run_placement(RunConfig.from_preset("h100x8", {"cluster": {"cpus_per_worker": 32}}))
    (problem,) = placement_problems(placement, [NodeCapacity("node a", 4, 16), NodeCapacity("node b", 4, 16)])
    assert "32 CPUs on one node" in problem and "lower cluster.cpus_per_worker" in problem
