"""On CPU an asynchronous run's generator process and its learner compute at the same time; each gets cores of its
own (the generator the larger half) instead of both starting a thread per core of the machine
(trainer/asynchronous/generator_process.py ``cpu_split``)."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.lifecycle.trainer_process import events_until_it_ends, generator_process_of, start_smoke_trainer
from trainer.asynchronous.generator_process import CpuSplit, cpu_split
from trainer.verification.standin_server import StandinServerThread


def test_two_cores_give_one_to_each():
    assert cpu_split({0, 1}) == CpuSplit(generator=(1,), learner=(0,))


def test_the_generator_takes_the_larger_half_of_an_odd_count():
    assert cpu_split([4, 0, 3, 1, 2]) == CpuSplit(generator=(2, 3, 4), learner=(0, 1))


def test_one_core_cannot_be_split():
    assert cpu_split({5}) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_the_generator_process_and_the_learner_run_on_their_own_cores(tmp_path):
    split = cpu_split(os.sched_getaffinity(0))
    seen = {}
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, "--set", "rollout.max_staleness=1")

        def look_then_cancel():
            generator = generator_process_of(trainer)
            seen["generator"] = set(generator.cpu_affinity())
            seen["generator_threads"] = generator.num_threads()
            seen["learner"] = set(psutil.Process(trainer.pid).cpu_affinity())
            trainer.send_signal(signal.SIGTERM)

        events = events_until_it_ends(trainer, look_then_cancel)
    assert seen["generator"] == set(split.generator)
    assert seen["learner"] == set(split.learner)
    notes = [e["payload"].get("message", "") for e in events if e["type"] == "log"]
    assert any("CPU cores split" in note for note in notes), notes
