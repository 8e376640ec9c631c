"""No rollout engine actor outlives its run, even when learner rank 0 is killed outright (SIGKILL).

A run that ends in order closes its pool (``RolloutEnginePool.close`` kills every engine actor: checked by
test_a_pool_fed_run_with_its_engine_on_another_node_trains_as_on_one_node.py). One whose rank 0 is killed cannot:
the engines are rank 0's own actors (Ray's owner), and Ray ends an actor whose owner is gone. Here the run is
started as the platform starts it, ``python -m trainer run`` (its Ray driver) on a Ray node of this machine
(RAY_ADDRESS): one learner-rank actor and a pool of one engine (``cluster.num_gpus`` 2, ``cluster.rollout_gpus`` 1).
At step 2 learner rank 0's process is killed from outside; its engine must be dead in Ray's actor table, and its
process gone, within a minute, and the driver ends the attempt as the infrastructure's failure.
"""

from __future__ import annotations

import signal
import time

import psutil

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster
from tests.lifecycle.trainer_process import events_until_it_ends, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread

ONE_LEARNER_RANK_AND_A_POOL = ("--set", "rollout.max_staleness=1", "--set", "cluster.num_gpus=2",
                               "--set", "cluster.rollout_gpus=1")


def alive_actor(class_name: str) -> dict:
    from ray._private.state import actors

    [actor] = [actor for actor in actors().values() if actor["ActorClassName"] == class_name
               and actor["State"] == "ALIVE"]
    return actor


def test_the_engine_actor_dies_with_the_learner_rank_zero_that_started_it(tmp_path):
    from ray._private.state import actors

    with (ray_cluster(node_arguments(num_cpus=4, num_gpus=2), []) as cluster, StandinServerThread() as server):
        trainer = start_smoke_trainer(tmp_path, server.url, *ONE_LEARNER_RANK_AND_A_POOL, ray_address=cluster.address)
        engine = {}

        def kill_learner_rank_zero() -> None:
            engine.update(alive_actor("RolloutEngineActor"))
            psutil.Process(alive_actor("LearnerRank")["Pid"]).send_signal(signal.SIGKILL)

        events = events_until_it_ends(trainer, kill_learner_rank_zero)
        stderr = trainer.stderr.read()[-3000:]
        assert engine, f"the run never reached step 2: {[e['type'] for e in events]}\n{stderr}"

        deadline = time.monotonic() + 60
        while True:
            [state] = [actor["State"] for actor in actors().values() if actor["ActorID"] == engine["ActorID"]]
            if state == "DEAD" and not psutil.pid_exists(engine["Pid"]):
                break
            assert time.monotonic() < deadline, f"the engine actor outlived learner rank 0: {state}"
            time.sleep(1)
    [finished] = [event["payload"] for event in events if event["type"] == "run_finished"]
    assert finished["status"] == "failed" and finished["cause"] == "infrastructure", f"{finished}\n{stderr}"
    assert "learner rank 0" in finished["reason"], finished
