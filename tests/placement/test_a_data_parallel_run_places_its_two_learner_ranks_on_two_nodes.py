"""``python -m trainer run`` started as a Ray job's entrypoint is the run's driver: with no torchrun in front of it,
it reserves the run's placement group and starts one learner-rank actor per rank, which rendezvous across nodes.

A synchronous data-parallel cpu-smoke run (``cluster.num_gpus=2``) on a cluster of two worker nodes of one
logical GPU each, started by hand with the cluster's RAY_ADDRESS and submitted as a Ray job (Ray's job API, as the
platform and Ray's job CLI submit it): each learner rank sits on its own node, the run succeeds, and no actor
outlives it."""

from __future__ import annotations

import json
import shlex
import subprocess
import time

import pytest

from deploy.services import REPO_DIR
from tests.placement.ray_nodes import RayNodes, smoke_command
from trainer.verification.standin_server import StandinServerThread

TWO_RANKS = ("cluster.num_gpus=2", "cluster.cpus_per_worker=1", "schedule.total_steps=2")


@pytest.fixture(scope="module")
def two_one_gpu_nodes():
    nodes = RayNodes(with_dashboard=True)
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


def test_the_same_command_submitted_as_a_ray_job_is_the_driver(tmp_path, two_one_gpu_nodes):
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(two_one_gpu_nodes.dashboard)
    with StandinServerThread() as server:
        command = smoke_command(tmp_path, server.url, *TWO_RANKS, attempt=2)
        job = client.submit_job(entrypoint=f"cd {shlex.quote(str(REPO_DIR))} && {shlex.join(command)}", runtime_env={
            "env_vars": {"TRAINER_CPU_STANDS_IN_FOR_GPUS": "1", "HF_HUB_OFFLINE": "1"}})
        deadline = time.monotonic() + 600
        while client.get_job_status(job) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            assert time.monotonic() < deadline, "the job did not end in 600 s"
            time.sleep(2)
    logs = client.get_job_logs(job)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, logs[-4000:]
    # The job's log holds its entrypoint's standard output (the events) and standard error (Ray's, the ranks').
    events = [json.loads(line) for line in logs.splitlines() if line.startswith('{"event_id"')]
    assert_placed_on_two_nodes_and_succeeded(events, two_one_gpu_nodes)


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
