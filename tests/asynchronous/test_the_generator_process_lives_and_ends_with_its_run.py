"""An asynchronous run's generator process is the run's: a cancelled run takes it down, and a generator process
that dies fails the run with the reason, never a hang and never a run that goes on without rollouts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil

from deploy.services import REPO_DIR
from trainer.verification.standin_server import StandinServerThread


def start_asynchronous_trainer(tmp_path, lean_url):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(
        json.dumps({"problem_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 1 = {i + 1} := by"}) + "\n"
        for i in range(3)
    ))
    argv = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
            "--output", str(tmp_path / "out"), "--lean-url", lean_url,
            "--set", "schedule.total_steps=1000", "--set", "rollout.max_staleness=1"]
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def run_until_step_two_then(trainer, act) -> list[dict]:
    events = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = trainer.stdout.readline()
            if not line:
                break
            events.append(json.loads(line))
            if events[-1]["type"] == "step_started" and events[-1]["payload"]["step"] == 2:
                act()
        trainer.wait(120)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    return events


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

        events = run_until_step_two_then(trainer, cancel)
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["cancelled"], trainer.stderr.read()[-3000:]
    assert trainer.returncode == 143
    generator[0].wait(timeout=30)  # raises if it outlived its run
    assert not generator[0].is_running()


def test_a_generator_process_that_dies_fails_the_run_with_the_reason(tmp_path):
    with StandinServerThread() as server:
        trainer = start_asynchronous_trainer(tmp_path, server.url)
        events = run_until_step_two_then(trainer, lambda: generator_of(trainer).send_signal(signal.SIGKILL))
    finished = [e for e in events if e["type"] == "run_finished"]
    assert [f["payload"]["status"] for f in finished] == ["failed"], trainer.stderr.read()[-3000:]
    assert "the generator process ended (exit code -9)" in finished[0]["payload"]["reason"]
    assert trainer.returncode == 1
