"""An asynchronous run's generator is the run's: a cancelled run takes it down, and a generator that dies fails
the run with the reason, never a hang and never a run that goes on without rollouts.

Both layouts, through the real command: one learner process beside one generator process (CPU), and
``python -m trainer run`` under torchrun as the platform starts it with a rollout pool, two learner ranks (CPU,
gloo) laid out as ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1, learner rank 0 starting the pool's
engine actor in the run's placement group on a Ray node of this machine (tests/asynchronous/ray_nodes.py reserves
it, as the driver will; torchrun passes Ray's SIGTERM on to the ranks)."""

from __future__ import annotations

import contextlib
import signal

import psutil
import pytest

from tests.asynchronous.ray_nodes import node_arguments, ray_cluster, reserved_placement_group
from tests.lifecycle.trainer_process import events_until_it_ends, generator_process_of, start_smoke_trainer
from trainer.config import RunConfig
from trainer.verification.standin_server import StandinServerThread

ASYNCHRONOUS = ("--set", "rollout.max_staleness=1")
POOL = ("--set", "cluster.num_gpus=3", "--set", "cluster.rollout_gpus=1")
# (options, learner ranks, exit codes once cancelled and once failed, the reason a killed generator gives): the
# trainer's own exit codes; torchrun's are its own business, so under it any code but 0 (None)
LAYOUTS = {
    "one_learner_process": (ASYNCHRONOUS, 1, (143, 1), "the generator process ended (exit code -9)"),
    "two_learner_ranks_and_a_pool": (ASYNCHRONOUS + POOL, 2, (None, None), "EngineActorLost: rollout engine 0"),
}


@pytest.fixture(scope="module")
def ray_node_of_three_gpus():
    with ray_cluster(node_arguments(num_cpus=8, num_gpus=3), []) as cluster:
        yield cluster


@contextlib.contextmanager
def placed(layout: str, request):
    """The environment the layout's trainer is started with: for a pool, its Ray cluster and placement group."""
    if layout == "one_learner_process":
        yield {}
        return
    cluster = request.getfixturevalue("ray_node_of_three_gpus")
    config = RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 1},
                                                 "cluster": {"num_gpus": 3, "rollout_gpus": 1}})
    with reserved_placement_group(config) as placement_group_name:
        yield {"RAY_ADDRESS": cluster.address, "TRAINER_PLACEMENT_GROUP": placement_group_name}


def generator_of(trainer, layout: str) -> psutil.Process:
    """The layout's generator: a child process of the one learner process, or the pool's engine actor's process."""
    if layout == "one_learner_process":
        return generator_process_of(trainer)
    from ray._private.state import actors

    [engine] = [actor for actor in actors().values()
                if actor["ActorClassName"] == "RolloutEngineActor" and actor["State"] == "ALIVE"]
    return psutil.Process(engine["Pid"])


def ended_with(returncode: int, expected: int | None) -> bool:
    return returncode == expected if expected is not None else returncode != 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cancelled_asynchronous_run_takes_its_generator_down(tmp_path, layout, request):
    options, learner_ranks, exit_codes, _ = LAYOUTS[layout]
    with StandinServerThread() as server, placed(layout, request) as environment:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, learner_ranks=learner_ranks,
                                      environment=environment)
        generator = []

        def cancel():
            generator.append(generator_of(trainer, layout))
            trainer.send_signal(signal.SIGTERM)

        events = events_until_it_ends(trainer, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], trainer.stderr.read()[-3000:]
    assert ended_with(trainer.returncode, exit_codes[0]), trainer.returncode
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_generator_that_dies_fails_the_run_with_the_reason(tmp_path, layout, request):
    options, learner_ranks, exit_codes, reason = LAYOUTS[layout]
    with StandinServerThread() as server, placed(layout, request) as environment:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, learner_ranks=learner_ranks,
                                      environment=environment)
        events = events_until_it_ends(trainer, lambda: generator_of(trainer, layout).send_signal(signal.SIGKILL))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], trainer.stderr.read()[-3000:]
    assert reason in finished[0]["payload"]["reason"], finished[0]["payload"]["reason"]
    assert ended_with(trainer.returncode, exit_codes[1]), trainer.returncode
