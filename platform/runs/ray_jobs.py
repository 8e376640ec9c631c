"""The one place the platform speaks to Ray about jobs: submit, stop, ask about and list runs' jobs.

Ray's job REST API (what ``JobSubmissionClient`` wraps), spoken with httpx so that every call
has a timeout (``RAY_CALL_TIMEOUT_S``): a slow or unreachable head makes a call fail in seconds,
never hang a worker or the sweeper. Each run's attempt has a predictable submission id,
``run-<id>-attempt-<n>``, so a job submitted by a worker that died before saving the id can
still be found, adopted or stopped.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import httpx
from django.conf import settings

from runs.cluster import ClusterUnreachable, ray_request, requested_resources
from trainer.cluster.placement import run_placement
from trainer.run.lifecycle import STOP_WAIT_VARIABLE
from trainer.verification.shared_cache import URL_VARIABLE as VERDICT_CACHE_URL_VARIABLE

# The environment variable that carries the trainer's Redis URL (``--events env:…``).
EVENTS_URL_VARIABLE = "LEANRL_EVENTS_URL"

# Not one of Ray's states: the cluster has no record of the job (its head was restarted without it).
MISSING = "MISSING"
TERMINAL_STATES = frozenset({"STOPPED", "SUCCEEDED", "FAILED", MISSING})
JOB_ID_PATTERN = re.compile(r"^run-(?P<run>\d+)-attempt-(?P<attempt>\d+)$")


# What every call here raises when Ray's head does not answer in time, or refuses: the message names
# the address and the call. The cluster module's error, under the name the job calls know it by.
RayCallFailed = ClusterUnreachable


@dataclass(frozen=True)
class JobStatus:
    state: str  # PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED, or MISSING
    message: str
    job_id: str = ""
    end_time_ms: int | None = None
    error_type: str = ""  # Ray's JobErrorType of a failed job (ray/dashboard/modules/job/common.py), "" if none

    @property
    def lost_its_driver(self) -> bool:
        """Ray failed the job because its supervisor actor died, which ends the driver it runs with it: the node
        that held them was lost (job_manager.py's monitor: "Job supervisor actor died"). The infrastructure's
        failure, not the run's: an exit of the run's own code is JOB_ENTRYPOINT_COMMAND_ERROR instead."""
        return self.state == "FAILED" and (self.error_type == "JOB_SUPERVISOR_ACTOR_DIED"
                                           or self.message.startswith("Job supervisor actor died"))

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


def attempt_of(job_id: str) -> tuple[int, int] | None:
    """(run id, attempt) of a job the platform submitted, None for any other job."""
    match = JOB_ID_PATTERN.match(job_id or "")
    return (int(match["run"]), int(match["attempt"])) if match else None


def _request(method: str, path: str, *, json: dict | None = None) -> httpx.Response:
    """A call to the job API of the head at RAY_ADDRESS, within RAY_CALL_TIMEOUT_S (cluster.ray_request)."""
    return ray_request(settings.RAY_ADDRESS, method, path, json=json, timeout_s=settings.RAY_CALL_TIMEOUT_S)


# The trainer command each kind of run is (python -m trainer COMMAND).
TRAINER_COMMAND_OF_KIND = {"rl": "run", "sft": "sft", "eval": "evaluate"}


def trainer_entrypoint(run) -> str:
    """The shell command Ray runs: the trainer's driver, with the run's exported files and its attempt.
    Every attempt after the first (a resume, a preemption, a re-queue) continues from the last checkpoint.

    The same command for every run, with no launcher in front: an RL run of several learner ranks or with a
    rollout pool is the driver that places them as Ray actors (trainer/loop/ray_driver.py); a one-process run
    (SFT, an evaluation, one learner GPU and no pool, a CPU run) runs in the job's own process.
    """
    folder = run.artifacts_dir
    argv = [
        settings.TRAINER_PYTHON, "-m", "trainer", TRAINER_COMMAND_OF_KIND[run.kind],
        "--config", str(folder / "config.json"),
        "--promptset", str(folder / "promptset.jsonl"),
        "--output", str(folder),
        # The Redis URL (and its password) travels in the job's environment, never on its command line.
        "--events", f"env:{EVENTS_URL_VARIABLE}",
        "--run-id", str(run.pk),
        "--attempt", str(run.attempt),
    ]
    if run.kind == "sft" and run.demonstrations_path:
        # A pipeline's proof corpus: the trainer's two sources are exclusive, so it replaces the promptset.
        argv[argv.index("--promptset"):argv.index("--promptset") + 2] = ["--demonstrations", run.demonstrations_path]
    if run.attempt > 1:
        argv.append("--resume")
    return shlex.join(argv)


def submit(run) -> str:
    """Submit the run's current attempt; returns its job id. Submitting an attempt twice (a dispatch
    retried after a worker died) adopts the job the first submission started."""
    requested = requested_resources(run.resolved_config, run.kind)
    env_vars = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                EVENTS_URL_VARIABLE: settings.TRAINER_REDIS_URL,
                # Lean's verdicts shared across runs (trainer/verification/shared_cache.py), in the same Redis.
                VERDICT_CACHE_URL_VARIABLE: settings.TRAINER_REDIS_URL,
                # Read by the job's supervisor (SIGTERM, then SIGKILL this much later) and by the trainer it starts.
                STOP_WAIT_VARIABLE: str(settings.RAY_JOB_STOP_WAIT_TIME_S)}
    if settings.LEAN_SERVER_API_KEY:
        env_vars["LEAN_SERVER_API_KEY"] = settings.LEAN_SERVER_API_KEY
    env_vars.update(settings.COMPILE_CACHE_ENVIRONMENT)
    env_vars.update(settings.TRACKING_ENVIRONMENT)
    job_id = run.ray_job_id_of_attempt
    body = {
        "entrypoint": trainer_entrypoint(run),
        "submission_id": job_id,
        "runtime_env": {"env_vars": env_vars},
        "metadata": {"run_id": str(run.pk), "attempt": str(run.attempt), "run_name": run.name[:100]},
    }
    if not run_placement(run.resolved_config, run.kind).needs_actors:
        # A one-process run holds its resources itself; a driver holds none: its placement group holds the run's
        # GPUs and CPUs, on whichever nodes Ray grants them (trainer/loop/ray_driver.py).
        body["entrypoint_num_cpus"] = requested["num_cpus"]
        if requested["num_gpus"]:
            body["entrypoint_num_gpus"] = requested["num_gpus"]
    response = _request("POST", "/api/jobs/", json=body)
    if response.status_code == 400 and "already exists" in response.text:
        return job_id  # this attempt was submitted before: the same job, adopted
    if response.status_code != 200:
        raise RayCallFailed(f"the Ray head at {settings.RAY_ADDRESS} refused the job {job_id} (HTTP "
                            f"{response.status_code}): {response.text[-2000:]}")
    return response.json().get("submission_id") or job_id


# What Ray does with a stop of a job it still holds pending (waiting for resources, e.g. for an autoscaler's node).
# Ray's job API (2.60, job_manager.py ``stop_job``) only queues the stop on the job's supervisor actor, which runs
# nothing until placed, and offers no call that ends a job before then (``DELETE`` refuses a job not yet ended):
# placed, the supervisor starts the entrypoint and stops it at once; never placed, Ray fails the job after
# RAY_JOB_START_TIMEOUT_SECONDS. Until one of the two, the job stays PENDING and an autoscaler may still add a node.
PENDING_STOP_NOTE = ("Ray holds {job_id} pending, waiting for resources: Ray's job API cannot end a job before it "
                     "places it, so the stop reaches it only then (the trainer is stopped as it starts), or Ray fails "
                     "it after RAY_JOB_START_TIMEOUT_SECONDS; until then an autoscaler may still add a node for it")


def stop(job_id: str) -> bool:
    """Ask Ray to stop the job; False when Ray has no such job (nothing to stop). Raises RayCallFailed.
    A job Ray still holds pending is not ended by it (``PENDING_STOP_NOTE``)."""
    response = _request("POST", f"/api/jobs/{job_id}/stop")
    if response.status_code == 404:
        return False
    if response.status_code != 200:
        raise RayCallFailed(f"Ray did not stop the job {job_id} (HTTP {response.status_code}): {response.text[-1000:]}")
    return True


def _status_of(info: dict) -> JobStatus:
    return JobStatus(state=str(info.get("status")), message=info.get("message") or "",
                     job_id=info.get("submission_id") or "", end_time_ms=info.get("end_time"),
                     error_type=info.get("error_type") or "")


def status(job_id: str) -> JobStatus:
    response = _request("GET", f"/api/jobs/{job_id}")
    if response.status_code == 404:
        return JobStatus(state=MISSING, message=f"Ray has no job {job_id}", job_id=job_id)
    if response.status_code != 200:
        raise RayCallFailed(f"Ray did not say how the job {job_id} is (HTTP {response.status_code}): "
                            f"{response.text[-1000:]}")
    return _status_of(response.json())


def platform_jobs() -> list[JobStatus]:
    """Every job on the cluster that the platform submitted for a run (any state)."""
    response = _request("GET", "/api/jobs/")
    if response.status_code != 200:
        raise RayCallFailed(f"Ray did not list its jobs (HTTP {response.status_code}): {response.text[-1000:]}")
    return [_status_of(info) for info in response.json() if attempt_of(info.get("submission_id") or "")]


def log_tail(job_id: str, lines: int = 25) -> str:
    try:
        response = _request("GET", f"/api/jobs/{job_id}/logs")
        response.raise_for_status()
        logs = response.json().get("logs", "")
    except Exception as error:  # noqa: BLE001 - the logs only explain a failure, never fail of their own
        return f"(job logs unavailable: {error})"
    return "\n".join(logs.splitlines()[-lines:])
