"""An asynchronous run's generator is the run's: a cancelled run takes it down, and a generator that dies fails
the run with the reason, never a hang and never a run that goes on without rollouts.

Both layouts, through the real command: one learner process beside one generator process (CPU), and
``python -m trainer run`` as the platform starts it with a rollout pool: the run's driver on a Ray node of this
machine (RAY_ADDRESS, as a Ray job's entrypoint is given its cluster's), placing two learner-rank actors (CPU, gloo)
laid out as ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1, learner rank 0 starting the pool's engine actor
in the placement group the driver reserved (the driver passes Ray's SIGTERM on to the ranks as a call). An engine
actor killed from outside is the infrastructure's failure: the run ends with cause infrastructure, naming the engine
and its node, so the platform starts the next attempt by itself."""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster
from tests.lifecycle.trainer_process import events_until_it_ends, generator_process_of, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread

ASYNCHRONOUS = ("--set", "rollout.max_staleness=1")
POOL = ("--set", "cluster.num_gpus=3", "--set", "cluster.rollout_gpus=1")
# (options, exit codes once cancelled and once failed, the reason a killed generator gives, the cause it gives):
# the trainer's own exit codes, the driver's too
LAYOUTS = {
    "one_learner_process": (ASYNCHRONOUS, (143, 1), "the generator process ended (exit code -9)", None),
    "two_learner_ranks_and_a_pool": (ASYNCHRONOUS + POOL, (143, 1), "EngineActorLost: rollout engine 0",
                                     "infrastructure"),
}


@pytest.fixture(scope="module")
def ray_node_of_three_gpus():
    with ray_cluster(node_arguments(num_cpus=8, num_gpus=3), []) as cluster:
        yield cluster


def ray_address_of(layout: str, request) -> str | None:
    """The cluster the layout's driver joins: for a pool, the Ray node of three logical GPUs (the driver reserves the
    run's placement group there itself); the one learner process needs no Ray."""
    if layout == "one_learner_process":
        return None
    return request.getfixturevalue("ray_node_of_three_gpus").address


def generator_of(trainer, layout: str) -> psutil.Process:
    """The layout's generator: a child process of the one learner process, or the pool's engine actor's process."""
    if layout == "one_learner_process":
        return generator_process_of(trainer)
    from ray._private.state import actors

    [engine] = [actor for actor in actors().values()
                if actor["ActorClassName"] == "RolloutEngineActor" and actor["State"] == "ALIVE"]
    return psutil.Process(engine["Pid"])


def engine_node_of(layout: str) -> str | None:
    """The node the pool's engine actor runs on (None for the one learner process's child)."""
    if layout == "one_learner_process":
        return None
    from ray._private.state import actors

    [engine] = [actor for actor in actors().values()
                if actor["ActorClassName"] == "RolloutEngineActor" and actor["State"] == "ALIVE"]
    return engine["Address"]["NodeID"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cancelled_asynchronous_run_takes_its_generator_down(tmp_path, layout, request):
    options, exit_codes, _, _ = LAYOUTS[layout]
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, ray_address=ray_address_of(layout, request))
        generator = []

        def cancel():
            generator.append(generator_of(trainer, layout))
            trainer.send_signal(signal.SIGTERM)

        events = events_until_it_ends(trainer, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], trainer.stderr.read()[-3000:]
    assert trainer.returncode == exit_codes[0], trainer.returncode
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_generator_that_dies_fails_the_run_with_the_reason(tmp_path, layout, request):
    options, exit_codes, reason, cause = LAYOUTS[layout]
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, ray_address=ray_address_of(layout, request))
        killed = []

        def kill_the_generator():
            killed.append(engine_node_of(layout))
            generator_of(trainer, layout).send_signal(signal.SIGKILL)

        events = events_until_it_ends(trainer, kill_the_generator)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], trainer.stderr.read()[-3000:]
    assert reason in finished[0]["payload"]["reason"], finished[0]["payload"]["reason"]
    assert finished[0]["payload"].get("cause") == cause, finished[0]["payload"]
    if killed[0] is not None:
        assert f"on node {killed[0]}" in finished[0]["payload"]["reason"], finished[0]["payload"]["reason"]
    assert trainer.returncode == exit_codes[1], trainer.returncode
