"""What a run sends between nodes (trainer/node_layout.py): the weight push crosses once into the engines' nodes
at the network's bandwidth, nothing crosses on one node, and the learner's FSDP collectives cross only when its
ranks span nodes. Predictions, checked against the arithmetic they claim."""

from __future__ import annotations

import pytest

from trainer.config import RunConfig
from trainer.node_layout import (
    FSDP_COLLECTIVES,
    SCORED_BATCH,
    WEIGHT_PUSH,
    LayoutError,
    ModelBytes,
    NodeLayout,
    StepShape,
    cross_node_traffic,
    placement_for,
)

QWEN3_1_7B_IN_BFLOAT16 = ModelBytes(1.7e9, 2, 2, "a test's round figure")
A_STEP = StepShape(rollouts=2048, prompt_tokens=400, answer_tokens=8000, micro_batches_per_rank=64,
                   old_logprob_passes_per_rank=64, lean_reach_share=0.9, source="a test's round figures")


def traffic(nodes: int, gpus_per_node: int, gbps: float = 400, **overrides):
    config = RunConfig.from_preset("h100x8", overrides)
    placement = placement_for(config, NodeLayout(nodes, gpus_per_node, gbps))
    return cross_node_traffic(placement, QWEN3_1_7B_IN_BFLOAT16, A_STEP)


def test_h100x8_on_one_node_sends_nothing_between_nodes():
    one_node = traffic(1, 8)
    assert [item.bytes_per_step for item in one_node.crossings] == [0, 0, 0]
    assert one_node.seconds_per_step == 0


def test_h100x8_on_two_4_gpu_nodes_pushes_the_full_bfloat16_weights_across_once():
    push = traffic(2, 4).crossing(WEIGHT_PUSH)
    assert push.bytes_per_step == pytest.approx(1.7e9 * 2)
    assert push.seconds_per_step == pytest.approx(3.4e9 / (400e9 / 8))  # 0.068 s at 400 Gb/s


def test_the_push_takes_half_as_long_with_twice_the_bandwidth():
    at_100 = traffic(2, 4, gbps=100)
    at_200 = traffic(2, 4, gbps=200)
    for name in (WEIGHT_PUSH, FSDP_COLLECTIVES, SCORED_BATCH):
        assert at_200.crossing(name).bytes_per_step == at_100.crossing(name).bytes_per_step
        assert at_200.crossing(name).seconds_per_step == pytest.approx(at_100.crossing(name).seconds_per_step / 2)


def test_the_push_grows_with_the_bytes_pushed():
    placement = placement_for(RunConfig.from_preset("h100x8"), NodeLayout(2, 4))
    in_float32 = cross_node_traffic(placement, ModelBytes(1.7e9, 2, 4, "float32 push"), A_STEP)
    in_bfloat16 = cross_node_traffic(placement, QWEN3_1_7B_IN_BFLOAT16, A_STEP)
    assert in_float32.crossing(WEIGHT_PUSH).seconds_per_step == pytest.approx(
        2 * in_bfloat16.crossing(WEIGHT_PUSH).seconds_per_step)


def test_learner_ranks_spanning_two_nodes_send_the_ring_share_of_every_gather_and_reduce_scatter():
    fsdp = traffic(2, 4).crossing(FSDP_COLLECTIVES)
    gathers = 64 + 2 * 64  # π_old's passes, then each trained micro-batch's forward and backward
    expected = 7 / 8 * (gathers * 1.7e9 * 2 + 64 * 1.7e9 * 4)  # bfloat16 parameters, float32 gradients
    assert fsdp.bytes_per_step == pytest.approx(expected)


def test_eight_learner_gpus_and_eight_rollout_gpus_on_two_nodes_cross_only_with_the_push_and_the_answers():
    split = traffic(2, 8, cluster={"num_gpus": 16, "rollout_gpus": 8},
                    rollout={"max_staleness": 1})
    assert split.placement.describe() == "node 0: learner ranks 0–7; node 1: rollout engines 0–7"
    assert split.crossing(FSDP_COLLECTIVES).bytes_per_step == 0
    assert split.crossing(WEIGHT_PUSH).bytes_per_step == pytest.approx(3.4e9)
    # Every answer comes from node 1 to learner rank 0; no learner rank is off its node.
    per_rollout = (400 + 8000) * 8 + 8000 * 4
    assert split.crossing(SCORED_BATCH).bytes_per_step == pytest.approx(2048 * per_rollout)


def test_a_layout_too_small_for_the_run_is_refused_saying_how_many_gpus_it_lacks():
    with pytest.raises(LayoutError, match=r"2 node\(s\) × 2 GPUs = 4 GPUs cannot hold the run's 8"):
        traffic(2, 2)


def test_a_tensor_parallel_group_is_never_split_across_nodes():
    # 6 GPUs for 6, but the second engine's pair would straddle the nodes' last free GPUs.
    split = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 6, "rollout_gpus": 4},
                                             "rollout": {"max_staleness": 1, "vllm_tensor_parallel_size": 2}})
    with pytest.raises(LayoutError, match=r"bundle 3 \(rollout engine, 2 GPUs\) needs 2 GPUs on one node"):
        placement_for(split, NodeLayout(2, 3))
    colocated = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 6},
                                                 "rollout": {"vllm_tensor_parallel_size": 2}})
    with pytest.raises(LayoutError, match="needs 2 GPUs on one node"):
        placement_for(colocated, NodeLayout(2, 3))
    with pytest.raises(LayoutError, match="a tensor-parallel group lives on one node"):
        placement_for(RunConfig.from_preset("h100x8", {"rollout": {"vllm_tensor_parallel_size": 8}}), NodeLayout(2, 4))
    # With room, PACK moves the engine to the next node whole.
    roomy = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 7, "rollout_gpus": 4},
                                             "rollout": {"max_staleness": 1, "vllm_tensor_parallel_size": 2}})
    assert placement_for(roomy, NodeLayout(2, 4)).engine_nodes == (1, 1)


def test_a_cpu_run_has_no_node_layout():
    with pytest.raises(LayoutError, match="runs on CPU"):
        placement_for(RunConfig.from_preset("cpu-demo"), NodeLayout(2, 4))
