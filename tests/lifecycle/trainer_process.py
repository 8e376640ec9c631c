"""``python -m trainer run`` as a process of its own, for tests that signal or kill it mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from deploy.services import REPO_DIR


def start_smoke_trainer(tmp_path, lean_url: str, *options: str, learner_ranks: int = 1,
                        environment: dict[str, str] | None = None) -> subprocess.Popen:
    """A cpu-smoke run of 1,000 steps on three problems, its events on standard output; with ``learner_ranks`` > 1
    started as the platform starts a data-parallel run, under torchrun. ``environment``: variables added to this
    process's (a rollout pool's Ray address and placement group)."""
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(
        json.dumps({"problem_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 1 = {i + 1} := by"}) + "\n"
        for i in range(3)
    ))
    launcher = (["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(learner_ranks)]
                if learner_ranks > 1 else [])
    argv = [sys.executable, *launcher, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
            "--output", str(tmp_path / "out"), "--lean-url", lean_url, "--set", "schedule.total_steps=1000", *options]
    # start_new_session: a signal reaches only the trainer, as a terminal's Ctrl-C reaches its foreground job.
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, **(environment or {})})


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
    """The one generator process (a multiprocessing spawn child) under ``launcher``."""
    import psutil

    children = psutil.Process(launcher.pid).children(recursive=True)
    generators = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
    assert len(generators) == 1, [child.cmdline() for child in children]
    return generators[0]
