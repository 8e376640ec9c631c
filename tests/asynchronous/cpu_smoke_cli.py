"""The trainer's own command on the cpu-smoke preset, as a person runs it, for tests that read a run's events:
``python -m trainer run --preset cpu-smoke`` with a test's ``--set``s, on the smoke promptset, against the stand-in
Lean server; under torchrun when the run has several learner ranks (CPU processes standing in for their GPUs,
TRAINER_CPU_STANDS_IN_FOR_GPUS, which the test plugin sets)."""

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


def run_cpu_smoke(folder: Path, lean_url: str, *settings: str, run_id: str | None = None, learner_ranks: int = 1,
                  timeout: float = 800, environment: dict[str, str] | None = None) -> SmokeRun:
    """Run it into ``folder``; ``settings`` are ``section.field=value`` pairs. Fails the test unless it exits 0.
    ``environment``: variables added to this process's (a rollout pool's Ray address and placement group)."""
    folder.mkdir(parents=True, exist_ok=True)
    promptset = folder / "smoke.jsonl"
    if not promptset.exists():
        write_smoke_promptset(promptset)
    launcher = [sys.executable]
    if learner_ranks > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(learner_ranks)]
    command = [*launcher, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
               "--output", str(folder / "run"), "--lean-url", lean_url]
    if run_id is not None:
        command += ["--run-id", run_id]
    for setting in settings:
        command += ["--set", setting]
    finished = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(environment or {})})
    assert finished.returncode == 0, finished.stderr[-4000:]
    return SmokeRun([json.loads(line) for line in finished.stdout.splitlines()], finished.stderr)
