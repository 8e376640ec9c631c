"""The fault-injection suite's cast: the real stack of the test session (PostgreSQL, Redis, a Ray
head, the stand-in, the Celery worker, the ingester, the sweeper), supervised as the one-command
stack supervises its processes, and an undisturbed ``cpu-smoke`` run to compare every disturbed run with.

Every wait polls against a generous deadline: on a loaded two-core machine a run may take minutes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

import psutil
import pytest
from django.db import connections

from proofs.models import ProofAttempt
from runs import actions
from runs.models import FINAL_STATES, Run, RunState

CLAIM_DEADLINE_S = 150  # entries a killed ingester left pending are claimed after 60 s idle
RUN_DEADLINE_S = 600  # cpu-smoke trains for ~10 s; starting Ray's job and the trainer costs more on a busy machine


def db_retry(read, deadline_s: float = 120):
    """Read from the database, riding out a restart of it (the test process's own connection breaks too)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return read()
        except Exception:  # OperationalError, InterfaceError: the server is going or coming
            if time.monotonic() > deadline:
                raise
            for each in connections.all():
                each.close()
            time.sleep(0.5)


def wait_until(condition, what: str, logs, deadline_s: float = RUN_DEADLINE_S, every_s: float = 0.1):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = db_retry(condition)
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"waited {deadline_s} s for {what}\n{logs()}")


def reload(run: Run) -> Run:
    return db_retry(lambda: Run.objects.get(pk=run.pk))


def wait_for_end(run: Run, logs) -> Run:
    wait_until(lambda: reload(run).state in FINAL_STATES, f"run {run.pk} to end", logs)
    return reload(run)


@dataclass(frozen=True, order=True)
class ProofAttemptRecord:
    """A proof attempt as a comparison sees it: its key without the attempt that made it."""

    key: str
    step: int
    turn: str
    problem_key: str
    response: str
    verdict: str
    reward: str  # repr of the reward: "None" when censored, and records still sort and compare


def proof_attempts_of_the_run(run: Run) -> list[ProofAttemptRecord]:
    """The run's proof attempts as its history has them: each step's from the latest attempt that reached it.

    A resumed attempt replays the steps after its checkpoint and supersedes what the cancelled one
    made of them; the steps the checkpoint covers are the cancelled attempt's (a cancel that lands
    after the last checkpoint leaves the resumed attempt nothing to replay).
    """
    rows = db_retry(lambda: list(ProofAttempt.objects.filter(run_id=run.pk)))
    latest_attempt_of_step: dict[int, int] = {}
    for row in rows:
        latest_attempt_of_step[row.step] = max(latest_attempt_of_step.get(row.step, 0), row.run_attempt)
    return sorted(ProofAttemptRecord(row.rollout_key.split("-", 1)[1], row.step, row.turn, row.problem_key,
                                     row.response, row.verdict, repr(row.reward))
                  for row in rows if row.run_attempt == latest_attempt_of_step[row.step])


class ProcessSupervisor:
    """The stack's own Supervisor (deploy/stack.py) over the session's platform processes, in a thread."""

    def __init__(self, processes):
        from deploy.stack import Supervisor

        self.processes = processes
        self.supervisor = Supervisor(first_pause_s=0.5, longest_pause_s=4, stable_s=30)
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stopping.is_set():
            with self.lock:
                for process in self.processes:
                    self.supervisor.check(process)
            time.sleep(0.2)

    def close(self):
        self.stopping.set()
        self.thread.join(30)


@pytest.fixture(scope="session")
def supervised_platform(platform_processes):
    processes = [platform_processes[name] for name in ("celery-worker", "ingester", "sweeper")]
    supervisor = ProcessSupervisor(processes)
    yield platform_processes | {"supervisor": supervisor}
    supervisor.close()


@pytest.fixture
def launch(alice, promptset_version, supervised_platform):
    def launch_smoke(name="fault") -> Run:
        return actions.launch_run(owner=alice, request={"name": name, "promptset_version_id": promptset_version.pk,
                                                        "preset": "cpu-smoke"})

    return launch_smoke


@pytest.fixture(scope="session")
def undisturbed(supervised_platform, django_db_blocker, platform_logs_session):
    """The proof attempts of an undisturbed cpu-smoke run: what every disturbed run must end with.

    Made once per session on a promptset with the same problems as every test's (the preset's seeds
    are fixed, so the run is the same every time); kept as plain values, since each test's
    database is emptied after it.
    """
    from django.contrib.auth import get_user_model

    from tests.conftest import make_demo_promptset_version

    with django_db_blocker.unblock():
        owner = get_user_model().objects.create_user("baseline", password="baseline-password")
        version = make_demo_promptset_version(owner)
        run = actions.launch_run(owner=owner, request={"name": "undisturbed", "promptset_version_id": version.pk,
                                                       "preset": "cpu-smoke"})
        run = wait_for_end(run, platform_logs_session)
        assert run.state == RunState.SUCCEEDED, f"{run.failure_reason}\n{platform_logs_session()}"
        attempts = proof_attempts_of_the_run(run)  # the rows go with the next test's flush
    assert len(attempts) == 2 * 2 * 2  # steps × prompts × samples
    return attempts


@pytest.fixture(scope="session")
def platform_logs_session():
    from tests.services_plugin import TEST_ROOT

    def read() -> str:
        parts = []
        for path in sorted((TEST_ROOT / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:]))
        return "\n".join(parts)

    return read


def assert_same_proof_attempts(run: Run, undisturbed: list[ProofAttemptRecord], logs) -> None:
    """Nothing lost, nothing doubled: the run's history (each step from the latest attempt that
    reached it) has exactly the undisturbed run's proof attempts.

    Stored in the end, not necessarily by the time the run ends: what a killed ingester read and
    never acknowledged is claimed by the next one once it has been pending long enough.
    """
    assert run.state == RunState.SUCCEEDED, f"{run.failure_reason}\n{logs()}"
    deadline = time.monotonic() + CLAIM_DEADLINE_S
    while len(proof_attempts_of_the_run(run)) < len(undisturbed) and time.monotonic() < deadline:
        time.sleep(1)
    attempts = proof_attempts_of_the_run(run)
    assert attempts == undisturbed, f"the disturbed run's proof attempts differ from the undisturbed run's\n{logs()}"


def kill(process, sig=signal.SIGKILL):
    os.kill(process.process.pid, sig)


def trainer_processes(run: Run) -> list[psutil.Process]:
    """The run's trainer processes (they outlive a Ray head killed under them)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "trainer" in cmdline and "--run-id" in cmdline and str(run.artifacts_dir) in " ".join(cmdline):
            found.append(process)
    return found
