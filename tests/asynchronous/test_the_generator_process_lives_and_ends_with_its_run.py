"""An asynchronous run's generator process is the run's: a cancelled run takes it down, and a generator process
that dies fails the run with the reason, never a hang and never a run that goes on without rollouts.

Both layouts, through the real command: one learner process beside one generator process (CPU), and
``python -m trainer run`` as the platform starts it with a rollout pool: the run's driver, placing two learner-rank
actors (CPU, gloo) laid out as ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1, learner rank 0 starting the
pool's generator process (the driver passes Ray's SIGTERM on to the ranks as a call)."""

from __future__ import annotations

import signal

import pytest

from tests.lifecycle.trainer_process import events_until_it_ends, generator_process_of, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread

ASYNCHRONOUS = ("--set", "rollout.max_staleness=1")
POOL = ("--set", "cluster.num_gpus=3", "--set", "cluster.rollout_gpus=1")
# (options, learner ranks, exit codes once cancelled and once failed): the trainer's own, the driver's too
LAYOUTS = {
    "one_learner_process": (ASYNCHRONOUS, 1, (143, 1)),
    "two_learner_ranks_and_a_pool": (ASYNCHRONOUS + POOL, 2, (143, 1)),
}


def ended_with(returncode: int, expected: int | None) -> bool:
    return returncode == expected if expected is not None else returncode != 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cancelled_asynchronous_run_takes_its_generator_process_down(tmp_path, layout):
    options, learner_ranks, exit_codes = LAYOUTS[layout]
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, learner_ranks=learner_ranks)
        generator = []

        def cancel():
            generator.append(generator_process_of(trainer))
            trainer.send_signal(signal.SIGTERM)

        events = events_until_it_ends(trainer, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], trainer.stderr.read()[-3000:]
    assert ended_with(trainer.returncode, exit_codes[0]), trainer.returncode
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_generator_process_that_dies_fails_the_run_with_the_reason(tmp_path, layout):
    options, learner_ranks, exit_codes = LAYOUTS[layout]
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, *options, learner_ranks=learner_ranks)
        events = events_until_it_ends(trainer, lambda: generator_process_of(trainer).send_signal(signal.SIGKILL))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], trainer.stderr.read()[-3000:]
    assert "the generator process ended (exit code -9)" in finished[0]["payload"]["reason"]
    assert ended_with(trainer.returncode, exit_codes[1]), trainer.returncode
