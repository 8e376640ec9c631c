"""No rollout engine actor outlives its run, even when learner rank 0 is killed outright (SIGKILL).

A run that ends in order closes its pool (``RolloutEnginePool.close`` kills every engine actor: checked by
test_a_pool_fed_run_with_its_engine_on_another_node_trains_as_on_one_node.py). One whose rank 0 is killed cannot:
the engines are rank 0's own actors (Ray's owner), and Ray ends an actor whose owner is gone. Here a process
standing in for learner rank 0 starts a pool of one engine in the run's placement group, on a Ray node of this
machine, and is killed; its engine must be dead in Ray's actor table, and its process gone, within a minute.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster, reserved_placement_group
from tests.learning.conftest import tiny_run_config

CONFIG_OVERRIDES = {"rollout": {"max_response_tokens": 2, "max_staleness": 1},
                    "cluster": {"num_gpus": 2, "rollout_gpus": 1, "cpus_per_worker": 1}}

LEARNER_RANK_ZERO = """
import json, sys, time
from tests.learning.conftest import tiny_run_config
from trainer.asynchronous.engine_actors import RolloutEnginePool
from trainer.learning.models import smollm2_tokenizer

pool = RolloutEnginePool.start(tiny_run_config(**json.loads(sys.argv[1])), smollm2_tokenizer(), seed=0)
print(json.dumps(pool.pids), flush=True)
time.sleep(600)
"""


def test_the_engine_actor_dies_with_the_learner_rank_zero_that_started_it():
    from ray._private.state import actors

    with (ray_cluster(node_arguments(num_cpus=2, num_gpus=2), []) as cluster,
          reserved_placement_group(tiny_run_config(**CONFIG_OVERRIDES)) as placement_group_name):
        environment = {**os.environ, "RAY_ADDRESS": cluster.address, "TRAINER_PLACEMENT_GROUP": placement_group_name}
        rank_zero = subprocess.Popen([sys.executable, "-c", LEARNER_RANK_ZERO, json.dumps(CONFIG_OVERRIDES)],
                                     stdout=subprocess.PIPE, text=True, env=environment)
        try:
            line = rank_zero.stdout.readline()
            while line and not line.startswith("["):  # Ray passes the actor's own output on to its owner's
                line = rank_zero.stdout.readline()
            assert line, f"the stand-in for learner rank 0 exited with code {rank_zero.wait(timeout=30)}"
            [engine_pid] = json.loads(line)
            assert psutil.pid_exists(engine_pid)
            rank_zero.send_signal(signal.SIGKILL)
            rank_zero.wait(timeout=30)

            deadline = time.monotonic() + 60
            while True:
                [engine] = [actor for actor in actors().values() if actor["ActorClassName"] == "RolloutEngineActor"]
                if engine["State"] == "DEAD" and not psutil.pid_exists(engine_pid):
                    break
                assert time.monotonic() < deadline, f"the engine actor outlived learner rank 0: {engine['State']}"
                time.sleep(1)
        finally:
            if rank_zero.poll() is None:
                rank_zero.kill()
                rank_zero.wait()
