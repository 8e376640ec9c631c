"""A node lost under a run ends its attempt within seconds, naming the node, as a failure of the infrastructure
(RUN_FINISHED's ``cause``, which the platform reads to start the next attempt by itself), and no actor of the run
outlives it. The next attempt (``--resume``) on a node added back continues from the last checkpoint and ends
where an uninterrupted run ends.

A synchronous data-parallel cpu-smoke run whose two learner ranks sit on two nodes of one logical GPU each;
``remove_node`` of learner rank 1's node after the first checkpoint. The platform's own retry is tested with
the platform (tests/runs); here the trainer's side, through its command."""

from __future__ import annotations

import time

from tests.placement.ray_nodes import RayNodes, actor_states_of, read_events, smoke_command, start_driver
from trainer.cluster.failures import CAUSE_INFRASTRUCTURE
from trainer.verification.standin_server import StandinServerThread

STEPS = 3
RUN = ("cluster.num_gpus=2", "cluster.cpus_per_worker=1", f"schedule.total_steps={STEPS}",
       "schedule.checkpoint_every=1")


def test_the_attempt_fails_naming_the_lost_node_and_the_next_attempt_resumes_to_the_end(tmp_path):
    nodes = RayNodes()
    try:
        nodes.add(gpus=1, cpus=1)
        nodes.add(gpus=1, cpus=1)
        with StandinServerThread() as server:
            removed = {}

            def remove_rank_ones_node_after_the_first_checkpoint(event):
                if event["type"] == "placement" and event["payload"]["state"] == "placed":
                    removed["node"] = event["payload"]["actors"][1]["node_id"]
                if event["type"] == "checkpoint_saved" and "at" not in removed:
                    nodes.remove(removed["node"])
                    removed["at"] = time.monotonic()

            first = start_driver(smoke_command(tmp_path, server.url, *RUN), nodes.environment())
            events = read_events(first, remove_rank_ones_node_after_the_first_checkpoint)
            ended_after_s = time.monotonic() - removed["at"]
            stderr = first.stderr.read()
            [finished] = [e["payload"] for e in events if e["type"] == "run_finished"]
            assert finished["status"] == "failed", f"{finished}\n{stderr[-3000:]}"
            assert finished["reason"].startswith(f"node {removed['node']} ("), finished
            assert finished["reason"].endswith("died: learner rank 1 was lost"), finished
            assert (finished["cause"], finished["node"]) == (CAUSE_INFRASTRUCTURE, removed["node"])
            assert ended_after_s < 30, f"the attempt ended {ended_after_s:.0f} s after the node was removed"
            assert [e["payload"]["message"] for e in events if e["type"] == "error"] == [finished["reason"]]
            assert first.returncode == 1
            assert actor_states_of(nodes, "run-local-attempt-1") == {
        "run-local-attempt-1-learner-rank-0": "DEAD", "run-local-attempt-1-learner-rank-1": "DEAD"}

            nodes.add(gpus=1, cpus=1)
            second = start_driver(smoke_command(tmp_path, server.url, *RUN, resume=True, attempt=2),
                                  nodes.environment())
            resumed = read_events(second)
        [finished] = [e["payload"] for e in resumed if e["type"] == "run_finished"]
        assert (finished["status"], finished["step"]) == ("succeeded", STEPS), second.stderr.read()[-3000:]
        assert [e["payload"]["step"] for e in resumed if e["type"] == "step_started"] == list(range(2, STEPS + 1))
        assert min(e["seq"] for e in resumed if e["seq"] >= 0) > max(e["seq"] for e in events)
        assert set(actor_states_of(nodes, "run-local-attempt-2").values()) == {"DEAD"}
    finally:
        nodes.close()
