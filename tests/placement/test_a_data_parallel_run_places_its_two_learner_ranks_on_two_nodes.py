"""``python -m trainer run`` started as a Ray job's entrypoint is the run's driver: with no torchrun in front of it,
it reserves the run's placement group and starts one learner-rank actor per rank, which rendezvous across nodes.

A synchronous data-parallel cpu-smoke run (``cluster.num_gpus=2``) on a cluster of two worker nodes of one
logical GPU each, started with the cluster's RAY_ADDRESS as a Ray job's entrypoint finds it: each learner rank sits
on its own node, the run succeeds, and no actor outlives it."""

from __future__ import annotations

import json
import subprocess

import pytest

from deploy.services import REPO_DIR
from tests.placement.ray_nodes import RayNodes, smoke_command
from trainer.verification.standin_server import StandinServerThread

TWO_RANKS = ("cluster.num_gpus=2", "cluster.cpus_per_worker=1", "schedule.total_steps=2")


@pytest.fixture(scope="module")
def two_one_gpu_nodes():
    nodes = RayNodes()
    try:
        nodes.node_ids = [nodes.add(gpus=1, cpus=1), nodes.add(gpus=1, cpus=1)]
        yield nodes
    finally:
        nodes.close()


def test_two_learner_ranks_run_on_two_nodes_and_the_run_succeeds(tmp_path, two_one_gpu_nodes):
    with StandinServerThread() as server:
        finished = subprocess.run(smoke_command(tmp_path, server.url, *TWO_RANKS), capture_output=True, text=True,
                                  timeout=600, env=two_one_gpu_nodes.environment(), cwd=REPO_DIR)
    events = [json.loads(line) for line in finished.stdout.splitlines()]
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert_placed_on_two_nodes_and_succeeded(events, two_one_gpu_nodes)
    run_actors = [actor for actor in two_one_gpu_nodes.actors() if actor["name"].startswith("run-local-attempt-1")]
    assert sorted(actor["name"] for actor in run_actors) == ["run-local-attempt-1-learner-rank-0",
                                                             "run-local-attempt-1-learner-rank-1"]
    assert {actor["state"] for actor in run_actors} == {"DEAD"}, run_actors


def assert_placed_on_two_nodes_and_succeeded(events: list[dict], two_one_gpu_nodes) -> None:
    [placed] = [e["payload"] for e in events if e["type"] == "placement" and e["payload"]["state"] == "placed"]
    assert [actor["name"] for actor in placed["actors"]] == ["learner rank 0", "learner rank 1"]
    assert {actor["node_id"] for actor in placed["actors"]} == set(two_one_gpu_nodes.node_ids)
    assert (placed["gpus_wanted"], placed["bundles"]) == (2, [{"role": "learner and rollout engine", "gpus": 1, "cpus": 1}] * 2)
    [run_finished] = [e["payload"] for e in events if e["type"] == "run_finished"]
    assert (run_finished["status"], run_finished["step"]) == ("succeeded", 2), run_finished
    assert [e["payload"]["step"] for e in events if e["type"] == "step_started"] == [1, 2]
    seqs = [e["seq"] for e in events if e["type"] != "rollout_progress"]  # live text is unnumbered (-1)
    assert len(seqs) == len(set(seqs)), "two events share a number"
    # Both ranks rolled out and published their share of the answers: rank r numbers its events
    # first + 2n + r, the first being the one after the driver's "placed".
    first_rank_seq = next(e["seq"] for e in events if e["type"] == "placement" and e["payload"]["state"] == "placed") + 1
    assert {(e["seq"] - first_rank_seq) % 2 for e in events if e["type"] == "rollout_finished"} == {0, 1}
