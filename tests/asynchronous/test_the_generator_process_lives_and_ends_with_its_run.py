"""An asynchronous run's generator process is the run's: a cancelled run takes it down, and a generator process
that dies fails the run with the reason, never a hang and never a run that goes on without rollouts."""

from __future__ import annotations

import signal

import psutil

from tests.lifecycle.trainer_process import events_until_it_ends, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread


def start_asynchronous_trainer(tmp_path, lean_url):
    return start_smoke_trainer(tmp_path, lean_url, "--set", "rollout.max_staleness=1")


def generator_of(trainer) -> psutil.Process:
    children = psutil.Process(trainer.pid).children(recursive=True)
    generators = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
    assert len(generators) == 1, [child.cmdline() for child in children]
    return generators[0]


def test_a_cancelled_asynchronous_run_takes_its_generator_process_down(tmp_path):
    with StandinServerThread() as server:
        trainer = start_asynchronous_trainer(tmp_path, server.url)
        generator = []

        def cancel():
            generator.append(generator_of(trainer))
            trainer.send_signal(signal.SIGTERM)

        events = events_until_it_ends(trainer, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], trainer.stderr.read()[-3000:]
    assert trainer.returncode == 143
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


def test_a_generator_process_that_dies_fails_the_run_with_the_reason(tmp_path):
    with StandinServerThread() as server:
        trainer = start_asynchronous_trainer(tmp_path, server.url)
        events = events_until_it_ends(trainer, lambda: generator_of(trainer).send_signal(signal.SIGKILL))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], trainer.stderr.read()[-3000:]
    assert "the generator process ended (exit code -9)" in finished[0]["payload"]["reason"]
    assert trainer.returncode == 1
