"""An asynchronous run's rollout engine may sit on another node than its learner ranks, and the run trains as on one.

The run of issue 46, started as the platform starts it: ``python -m trainer run`` (the run's Ray driver) with
RAY_ADDRESS naming a Ray cluster of this machine whose nodes declare logical GPUs, CPU standing in for them.
cpu-smoke's asynchronous loop with 2 learner ranks and a pool of one engine (``cluster.num_gpus=3``,
``cluster.rollout_gpus=1``, ``rollout.max_staleness=1``) on a learner node of 2 GPUs and an engine node of 1, so the
placement group the driver reserves (trainer/cluster/placement.py, PACK) can only put the engine's bundle apart from
the learners'. The driver places the learner-rank actors and says where (a PLACEMENT "placed" event); learner rank 0
starts the engine actor in its bundle of the same group and says where it sits (a second PLACEMENT "placed"); the
weights reach the engine over the pool's weight group (gloo), across nodes. Then a node of 3 GPUs joins, PACK puts
the same run (same seed) whole on it, and the two runs' rollouts and metrics must be equal.
"""

from __future__ import annotations

import os

import psutil
import pytest

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster
from tests.placement.ray_nodes import read_events, smoke_command, start_driver
from trainer.cluster.placement import run_placement
from trainer.config import RunConfig
from trainer.verification.standin_server import StandinServerThread

STEPS = 3
SETTINGS = {"schedule": {"total_steps": STEPS}, "rollout": {"max_staleness": 1},
            "cluster": {"num_gpus": 3, "rollout_gpus": 1}}
LEARNER_RANKS = 2
ENGINE_BUNDLE = LEARNER_RANKS  # run_placement: one bundle per learner GPU, then the engine's


def node_of_gpus(gpus: int) -> str:
    import ray

    [node_id] = [node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("GPU") == gpus]
    return node_id


def alive_actors(class_name: str) -> list[dict]:
    """The run's live actors of ``class_name`` in Ray's actor table, as the GCS keeps it (ray.util.state reads the
    same table through the dashboard, which these test clusters do not start: a dashboard binds one port of a
    machine that several test sessions share)."""
    from ray._private.state import actors

    return [actor for actor in actors().values() if actor["ActorClassName"] == class_name and actor["State"] == "ALIVE"]


def drive_the_run(folder, lean_url: str, ray_address: str) -> dict:
    """The run through its driver on the cluster at ``ray_address``: its events, and, while step 2 runs, its engine
    actors (from Ray's actor table) and each engine process's ancestors and the learner ranks' processes."""
    config = RunConfig.from_preset("cpu-smoke", SETTINGS)
    settings = [f"schedule.total_steps={STEPS}", "rollout.max_staleness=1", "cluster.num_gpus=3",
                "cluster.rollout_gpus=1"]
    assert run_placement(config).learner_ranks == LEARNER_RANKS
    environment = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    environment["RAY_ADDRESS"] = ray_address
    seen: dict = {}

    def while_step_two_runs(event: dict) -> None:
        if event["type"] == "step_started" and event["payload"]["step"] == 2:
            seen["engines"] = alive_actors("RolloutEngineActor")
            seen["engine_ancestors"] = {engine["Pid"]: [parent.pid for parent in psutil.Process(engine["Pid"]).parents()]
                                        for engine in seen["engines"]}
            seen["rank_pids"] = {actor["Pid"] for actor in alive_actors("LearnerRank")}

    driver = start_driver(smoke_command(folder, lean_url, *settings), environment)
    events = read_events(driver, while_step_two_runs)
    return {"events": events, "returncode": driver.returncode, "stderr": driver.stderr.read()[-3000:], **seen}


@pytest.fixture(scope="module")
def two_node_and_one_node_runs(tmp_path_factory):
    """(the run across two nodes, the run on one, the nodes by role, every engine actor Ray's table knows after
    both runs), each run as ``drive_the_run`` reads it."""
    from ray._private.state import actors

    per_gpu_cpus = run_placement(RunConfig.from_preset("cpu-smoke", SETTINGS)).bundles[0].cpus
    with (StandinServerThread() as server,
          ray_cluster(node_arguments(num_cpus=1, num_gpus=0),
                      [node_arguments(num_cpus=LEARNER_RANKS * per_gpu_cpus, num_gpus=LEARNER_RANKS),
                       node_arguments(num_cpus=per_gpu_cpus, num_gpus=1)]) as cluster):
        across = drive_the_run(tmp_path_factory.mktemp("across_two_nodes"), server.url, cluster.address)
        cluster.add_node(**node_arguments(num_cpus=(LEARNER_RANKS + 1) * per_gpu_cpus, num_gpus=LEARNER_RANKS + 1))
        cluster.wait_for_nodes()
        one = drive_the_run(tmp_path_factory.mktemp("on_one_node"), server.url, cluster.address)
        nodes = {"learner": node_of_gpus(LEARNER_RANKS), "engine": node_of_gpus(1),
                 "whole": node_of_gpus(LEARNER_RANKS + 1)}
        engine_actors_after_the_runs = [actor for actor in actors().values()
                                        if actor["ActorClassName"] == "RolloutEngineActor"]
    return across, one, nodes, engine_actors_after_the_runs


def placed_actors(events: list[dict]) -> list[list[tuple[str, str, int]]]:
    """Each PLACEMENT "placed" event's actors, as (name, node id, bundle), in the order published."""
    return [[(actor["name"], actor["node_id"], actor["bundle"]) for actor in event["payload"]["actors"]]
            for event in events if event["type"] == "placement" and event["payload"]["state"] == "placed"]


def statuses(run: dict) -> list[str]:
    return [event["payload"]["status"] for event in run["events"] if event["type"] == "run_finished"]


def test_both_runs_succeed(two_node_and_one_node_runs):
    across, one, _, _ = two_node_and_one_node_runs
    assert statuses(across) == ["succeeded"] and across["returncode"] == 0, across["stderr"]
    assert statuses(one) == ["succeeded"] and one["returncode"] == 0, one["stderr"]


def test_learner_rank_zero_publishes_the_engines_node_in_a_second_placement_event(two_node_and_one_node_runs):
    across, _, nodes, _ = two_node_and_one_node_runs
    learners, engines = placed_actors(across["events"])
    assert learners == [("learner rank 0", nodes["learner"], 0), ("learner rank 1", nodes["learner"], 1)]
    assert engines == [("rollout engine 0", nodes["engine"], ENGINE_BUNDLE)]


def test_the_engine_actor_sat_on_its_own_node_and_is_dead_once_the_runs_ended(two_node_and_one_node_runs):
    across, _, nodes, engine_actors_after_the_runs = two_node_and_one_node_runs
    [engine] = across["engines"]  # Ray's own table, apart from what the run says of itself
    assert engine["Address"]["NodeID"] == nodes["engine"] != nodes["learner"]
    assert len(engine_actors_after_the_runs) == 2  # one a run
    assert all(actor["State"] == "DEAD" for actor in engine_actors_after_the_runs)


def test_the_engine_is_no_child_of_a_learner_process(two_node_and_one_node_runs):
    across, _, _, _ = two_node_and_one_node_runs
    [(engine_pid, ancestors)] = across["engine_ancestors"].items()
    assert len(across["rank_pids"]) == LEARNER_RANKS
    assert ancestors and not across["rank_pids"] & set(ancestors), (engine_pid, ancestors, across["rank_pids"])


def test_the_one_node_run_put_every_actor_on_the_node_that_holds_them_all(two_node_and_one_node_runs):
    _, one, nodes, _ = two_node_and_one_node_runs
    learners, engines = placed_actors(one["events"])
    assert {node for _, node, _ in learners + engines} == {nodes["whole"]}


def test_the_run_across_two_nodes_has_the_events_of_the_run_on_one(two_node_and_one_node_runs):
    across, one, _, _ = two_node_and_one_node_runs

    def rollouts(events):
        return {event["payload"]["rollout_key"]: (event["payload"]["response"], event["payload"]["reward"],
                                                  event["payload"]["policy_version"])
                for event in events if event["type"] == "rollout_finished" and not event["payload"]["is_evaluation"]}

    def metrics_by_step(events):
        return {event["payload"]["step"]: event["payload"]["values"] for event in events if event["type"] == "metrics"}

    config = RunConfig.from_preset("cpu-smoke", SETTINGS)
    assert rollouts(across["events"]) == rollouts(one["events"])
    assert len(rollouts(one["events"])) == STEPS * config.rollout.prompts_per_step * config.rollout.samples_per_prompt
    across_metrics, one_metrics = metrics_by_step(across["events"]), metrics_by_step(one["events"])
    assert sorted(across_metrics) == sorted(one_metrics) == list(range(1, STEPS + 1))
    for step, values in one_metrics.items():
        for name in ("learner/loss", "rollout/staleness_max", "learner/trained_sequences"):
            assert across_metrics[step][name] == pytest.approx(values[name], rel=1e-6, abs=1e-12), (step, name)
