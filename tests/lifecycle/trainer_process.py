"""``python -m trainer run`` as a process of its own, for tests that signal or kill it mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from deploy.services import REPO_DIR


def start_smoke_trainer(tmp_path, lean_url: str, *options: str, ray_address: str | None = None) -> subprocess.Popen:
    """A cpu-smoke run of 1,000 steps on three problems, its events on standard output. A run of several learner
    ranks (or with a rollout pool) is its own Ray driver, as the platform starts it: here, outside a Ray job, on a
    local Ray the driver starts for itself (RAY_ADDRESS unset, the logical GPUs CPU processes stand in for), or on a
    test's Ray nodes (``ray_address``), as a Ray job's entrypoint joins its cluster."""
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(
        json.dumps({"problem_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 1 = {i + 1} := by"}) + "\n"
        for i in range(3)
    ))
    argv = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
            "--output", str(tmp_path / "out"), "--lean-url", lean_url, "--set", "schedule.total_steps=1000", *options]
    # start_new_session: a signal reaches only the trainer, as a terminal's Ctrl-C reaches its foreground job.
    environment = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    if ray_address is not None:
        environment["RAY_ADDRESS"] = ray_address
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=environment)


def learner_rank(launcher: subprocess.Popen, rank: int):
    """The process of learner rank ``rank`` under ``launcher``: a Ray worker of the local Ray its driver started,
    given RANK by the driver (trainer/loop/ray_driver.py)."""
    import psutil

    ranks = []
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            environment = child.environ()
        except psutil.Error:
            continue
        if environment.get("RANK") == str(rank) and "TRAINER_PLACEMENT_GROUP" in environment:
            ranks.append(child)
    assert len(ranks) == 1, [child.cmdline() for child in ranks]
    return ranks[0]


def events_until_it_ends(trainer: subprocess.Popen, at_step_two: Callable[[], None]) -> list[dict]:
    """Every event the trainer prints; ``at_step_two`` is called when step 2 starts. Waits for it to exit."""
    events = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = trainer.stdout.readline()
            if not line:
                break
            events.append(json.loads(line))
            if events[-1]["type"] == "step_started" and events[-1]["payload"]["step"] == 2:
                at_step_two()
        trainer.wait(120)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    return events


def generator_process_of(launcher: subprocess.Popen):
    """The one generator process (a multiprocessing spawn child) under ``launcher`` (under the local Ray its driver
    started, when the run is placed as actors: the driver's raylet starts learner rank 0's worker process)."""
    import psutil

    children = psutil.Process(launcher.pid).children(recursive=True)
    generators = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
    assert len(generators) == 1, [child.cmdline() for child in children]
    return generators[0]
