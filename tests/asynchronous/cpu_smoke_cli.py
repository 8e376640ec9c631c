"""The trainer's own command on the cpu-smoke preset, as a person runs it, for tests that read a run's events:
``python -m trainer run --preset cpu-smoke`` with a test's ``--set``s, on the smoke promptset, against the stand-in
Lean server. A run of several learner ranks or with a rollout pool is its own Ray driver (CPU processes standing in
for its GPUs, TRAINER_CPU_STANDS_IN_FOR_GPUS, which the test plugin sets), on a local Ray it starts for itself (the
suite's head, RAY_ADDRESS, declares no GPUs) or on a test's Ray nodes (``ray_address``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trainer.sft.smoke_model import write_smoke_promptset

REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class SmokeRun:
    events: list[dict]  # the run's events, one JSON object a line of its standard output
    stderr: str  # its log, vLLM's among it


def run_cpu_smoke(folder: Path, lean_url: str, *settings: str, run_id: str | None = None,
                  timeout: float = 800, resume: bool = False, ray_address: str | None = None) -> SmokeRun:
    """Run it into ``folder``; ``settings`` are ``section.field=value`` pairs; ``resume``: from the latest checkpoint
    a run left there; ``ray_address``: the cluster the driver joins (a test's Ray nodes), as a Ray job's entrypoint
    is given its cluster's. Fails the test unless it exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    promptset = folder / "smoke.jsonl"
    if not promptset.exists():
        write_smoke_promptset(promptset)
    command = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
               "--output", str(folder / "run"), "--lean-url", lean_url]
    if run_id is not None:
        command += ["--run-id", run_id]
    if resume:
        command += ["--resume"]
    for setting in settings:
        command += ["--set", setting]
    environment = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    if ray_address is not None:
        environment["RAY_ADDRESS"] = ray_address
    finished = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout, env=environment)
    assert finished.returncode == 0, finished.stderr[-4000:]
    return SmokeRun([json.loads(line) for line in finished.stdout.splitlines()], finished.stderr)
