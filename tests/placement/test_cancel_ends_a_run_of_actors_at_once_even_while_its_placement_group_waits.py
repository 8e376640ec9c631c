"""Cancel (SIGTERM to the driver, as Ray's job stop sends it) ends a run placed as actors at once: while its
placement group still waits for GPUs the cluster does not have free (the group is removed, the run ends
cancelled), and while its learner ranks train (each rank is cancelled through a call, trainer/loop/rank_actor.py,
and ends as a cancelled torchrun rank ended). No actor of the run is left either way."""

from __future__ import annotations

import signal
import time

import pytest

from tests.placement.ray_nodes import RayNodes, actor_states_of, read_events, smoke_command, start_driver
from trainer.verification.standin_server import StandinServerThread

ONE_GPU_EACH = ("cluster.cpus_per_worker=1", "schedule.total_steps=1000")


@pytest.fixture(scope="module")
def two_one_gpu_nodes():
    nodes = RayNodes()
    try:
        nodes.add(gpus=1, cpus=1)
        nodes.add(gpus=1, cpus=1)
        yield nodes
    finally:
        nodes.close()


def _placement_groups(nodes: RayNodes) -> dict:
    import json
    import subprocess
    import sys

    script = ("import json, ray\nray.init(log_to_driver=False)\n"
              "print(json.dumps({g['name']: g['state'] for g in ray.util.placement_group_table().values()}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=nodes.environment())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_waiting_for_gpus_is_cancelled_at_once_and_its_placement_group_removed(tmp_path, two_one_gpu_nodes):
    with StandinServerThread() as server:
        driver = start_driver(smoke_command(tmp_path, server.url, "cluster.num_gpus=3", *ONE_GPU_EACH),
                              two_one_gpu_nodes.environment())
        stopped = {}

        def stop_once_it_says_it_waits(event):
            if event["type"] == "placement" and not stopped:
                stopped["waiting"] = event["payload"]
                stopped["at"] = time.monotonic()
                driver.send_signal(signal.SIGTERM)

        events = read_events(driver, stop_once_it_says_it_waits, timeout_s=120)
    assert "waiting" in stopped, driver.stderr.read()[-3000:]
    waiting = stopped["waiting"]
    assert (waiting["state"], waiting["gpus_wanted"], waiting["actors"]) == ("waiting", 3, [])
    assert sorted(node["gpus_free"] for node in waiting["free_per_node"]) == [0.0, 1.0, 1.0]
    [finished] = [e["payload"] for e in events if e["type"] == "run_finished"]
    assert finished["status"] == "cancelled", driver.stderr.read()[-3000:]
    assert "placement group run-local-attempt-1 waited for resources" in finished["reason"]
    assert time.monotonic() - stopped["at"] < 15
    assert driver.returncode == 143
    assert _placement_groups(two_one_gpu_nodes)["run-local-attempt-1"] == "REMOVED"
    assert actor_states_of(two_one_gpu_nodes, "run-local-attempt-1") == {}  # none was started


def test_a_training_run_of_two_ranks_is_cancelled_and_leaves_no_actor(tmp_path, two_one_gpu_nodes):
    with StandinServerThread() as server:
        driver = start_driver(smoke_command(tmp_path, server.url, "cluster.num_gpus=2", *ONE_GPU_EACH,
                                            attempt=2), two_one_gpu_nodes.environment())
        stopped = {}

        def stop_at_step_two(event):
            if event["type"] == "step_started" and event["payload"]["step"] == 2 and not stopped:
                stopped["at"] = time.monotonic()
                driver.send_signal(signal.SIGTERM)

        events = read_events(driver, stop_at_step_two)
    stderr = driver.stderr.read()
    [finished] = [e["payload"] for e in events if e["type"] == "run_finished"]
    assert finished["status"] == "cancelled", f"{finished}\n{stderr[-3000:]}"
    assert not [e for e in events if e["type"] == "error"], stderr[-3000:]
    assert time.monotonic() - stopped["at"] < 15
    assert driver.returncode == 143
    assert actor_states_of(two_one_gpu_nodes, "run-local-attempt-2") == {
        "run-local-attempt-2-learner-rank-0": "DEAD", "run-local-attempt-2-learner-rank-1": "DEAD"}
