"""An asynchronous run's rollout engine may sit on another node than its learner ranks, and the run trains as on one.

The run of issue 46: cpu-smoke's asynchronous loop with 2 learner ranks and a pool of one engine
(``cluster.num_gpus=3``, ``cluster.rollout_gpus=1``, ``rollout.max_staleness=1``) on a Ray cluster of this machine
whose nodes declare logical GPUs, CPU standing in for them: a learner node of 2 GPUs and an engine node of 1, so
the run's placement group (trainer/cluster/placement.py, PACK) can only put the engine's bundle apart from the
learners'. The engine is a Ray actor that learner rank 0 starts in that bundle; the weights reach it over the
pool's weight group (gloo), across nodes. Then a node of 3 GPUs joins, PACK puts the same run (same seed) whole on
it, and the two runs' events must be equal: the tiny random model's run is deterministic on one node
(test_a_data_parallel_learner_trains_from_a_rollout_pool.py pins it to one process's run).

Until the driver places the learner ranks as actors, the ranks here are started as torchrun would start them and
only their bundles stand on the learner node (tests/asynchronous/ray_nodes.py stands in for the driver).
"""

from __future__ import annotations

import json

import pytest

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster
from tests.learning.test_a_data_parallel_learner_trains_from_a_rollout_pool import (
    LEARNER_RANKS,
    metrics_by_step,
    pooled_config,
    spawn_learner_ranks,
)
from tests.learning.test_data_parallel_training import of_type, training_rollouts
from trainer.cluster.placement import run_placement
from trainer.observability.events import EventType

ENGINE_BUNDLE = LEARNER_RANKS  # run_placement: one bundle per learner GPU, then the engine's


def engine_actors_seen() -> list[dict]:
    """The run's engine actors in Ray's actor table, as the GCS keeps it (ray.util.state reads the same table
    through the dashboard, which these test clusters do not start: a dashboard binds one port of a machine that
    several test sessions share)."""
    from ray._private.state import actors

    return [actor for actor in actors().values() if actor["ActorClassName"] == "RolloutEngineActor"]


def node_of_gpus(gpus: int) -> str:
    import ray

    [node_id] = [node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("GPU") == gpus]
    return node_id


@pytest.fixture(scope="module")
def two_node_and_one_node_runs(tmp_path_factory):
    """((statuses, events, bundle nodes, engine actors in Ray's actor table, engine ancestry, rank pids),
    (statuses, events, bundle nodes)) of the run across two nodes, then on one."""
    per_gpu_cpus = run_placement(pooled_config(LEARNER_RANKS + 1, 1)).bundles[0].cpus
    with ray_cluster(node_arguments(num_cpus=1, num_gpus=0),
                     [node_arguments(num_cpus=LEARNER_RANKS * per_gpu_cpus, num_gpus=LEARNER_RANKS),
                      node_arguments(num_cpus=per_gpu_cpus, num_gpus=1)]) as cluster:
        across, across_bundles = tmp_path_factory.mktemp("across_two_nodes"), []
        across_statuses, across_events = spawn_learner_ranks("records_its_engine", across, cluster.address,
                                                             bundle_nodes=across_bundles)
        engine_actors = engine_actors_seen()
        ancestry = json.loads((across / "engine_ancestry.json").read_text())
        rank_pids = {int((across / f"rank{rank}.pid").read_text()) for rank in range(LEARNER_RANKS)}

        cluster.add_node(**node_arguments(num_cpus=(LEARNER_RANKS + 1) * per_gpu_cpus, num_gpus=LEARNER_RANKS + 1))
        cluster.wait_for_nodes()
        one, one_bundles = tmp_path_factory.mktemp("on_one_node"), []
        one_statuses, one_events = spawn_learner_ranks("trains", one, cluster.address, bundle_nodes=one_bundles)
        nodes = {"learner": node_of_gpus(LEARNER_RANKS), "engine": node_of_gpus(1),
                 "whole": node_of_gpus(LEARNER_RANKS + 1)}
    return ((across_statuses, across_events, across_bundles, engine_actors, ancestry, rank_pids),
            (one_statuses, one_events, one_bundles), nodes)


def test_both_runs_succeed(two_node_and_one_node_runs):
    (across_statuses, across_events, *_), (one_statuses, one_events, _), _ = two_node_and_one_node_runs
    assert across_statuses == {0: "succeeded", 1: "succeeded"}, of_type(across_events[0], EventType.ERROR)
    assert one_statuses == {0: "succeeded", 1: "succeeded"}, of_type(one_events[0], EventType.ERROR)


def test_the_learner_ranks_bundles_and_the_engine_actor_sit_on_different_nodes(two_node_and_one_node_runs):
    (_, _, bundles, engine_actors, _, _), _, nodes = two_node_and_one_node_runs
    assert bundles == [nodes["learner"]] * LEARNER_RANKS + [nodes["engine"]]
    # Ray's actor table: the run's one engine actor ran on the engine node, and is dead now that the run has ended.
    [engine_actor] = engine_actors
    assert engine_actor["Address"]["NodeID"] == nodes["engine"] != nodes["learner"]
    assert engine_actor["State"] == "DEAD"


def test_the_engine_is_no_child_of_a_learner_process(two_node_and_one_node_runs):
    (_, _, _, _, ancestry, rank_pids), _, _ = two_node_and_one_node_runs
    [(engine_pid, ancestors)] = ancestry.items()
    assert ancestors and not rank_pids & set(ancestors), (engine_pid, ancestors, rank_pids)


def test_the_one_node_run_put_every_bundle_on_the_node_that_holds_them_all(two_node_and_one_node_runs):
    _, (_, _, bundles), nodes = two_node_and_one_node_runs
    assert bundles == [nodes["whole"]] * (LEARNER_RANKS + 1)


def test_the_run_across_two_nodes_has_the_events_of_the_run_on_one(two_node_and_one_node_runs):
    (_, across_events, *_), (_, one_events, _), _ = two_node_and_one_node_runs

    def rollouts(events):
        return {event.payload["rollout_key"]: (event.payload["response"], event.payload["reward"],
                                               event.payload["policy_version"])
                for event in training_rollouts(events[0])}

    assert rollouts(across_events) == rollouts(one_events)
    assert len(rollouts(one_events)) == 3 * 2 * 4  # every step's 2 prompts × 4 samples
    across_metrics, one_metrics = metrics_by_step(across_events[0]), metrics_by_step(one_events[0])
    assert sorted(across_metrics) == sorted(one_metrics) == [1, 2, 3]
    for step, values in one_metrics.items():
        for name in ("learner/loss", "rollout/staleness_max", "learner/trained_sequences"):
            assert across_metrics[step][name] == pytest.approx(values[name], rel=1e-6, abs=1e-12), (step, name)
