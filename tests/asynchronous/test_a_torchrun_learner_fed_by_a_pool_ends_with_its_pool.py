"""``python -m trainer run`` under torchrun as the platform starts it, with a rollout pool: two learner ranks (CPU, gloo)
laid out as ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1, learner rank 0 starting the pool's generator
process. Cancelling the run (torchrun passes Ray's SIGTERM to the ranks) takes the pool down, and a pool that dies
fails the run with its reason."""

from __future__ import annotations

import signal

import psutil

from tests.lifecycle.trainer_process import events_until_it_ends, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread

POOL_LAYOUT = ("--set", "rollout.max_staleness=1", "--set", "cluster.num_gpus=3", "--set", "cluster.rollout_gpus=1")


def generator_of(launcher) -> psutil.Process:
    children = psutil.Process(launcher.pid).children(recursive=True)
    generators = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
    assert len(generators) == 1, [child.cmdline() for child in children]
    return generators[0]


def test_a_cancelled_pool_fed_run_takes_its_pool_down(tmp_path):
    with StandinServerThread() as server:
        launcher = start_smoke_trainer(tmp_path, server.url, *POOL_LAYOUT, learner_ranks=2)
        generator = []

        def cancel():
            generator.append(generator_of(launcher))
            launcher.send_signal(signal.SIGTERM)

        events = events_until_it_ends(launcher, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], launcher.stderr.read()[-3000:]
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


def test_a_pool_whose_generator_dies_fails_the_run_with_the_reason(tmp_path):
    with StandinServerThread() as server:
        launcher = start_smoke_trainer(tmp_path, server.url, *POOL_LAYOUT, learner_ranks=2)
        events = events_until_it_ends(launcher, lambda: generator_of(launcher).send_signal(signal.SIGKILL))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], launcher.stderr.read()[-3000:]
    assert "the generator process ended (exit code -9)" in finished[0]["payload"]["reason"]
    assert launcher.returncode != 0
