"""Waiting on the real local Ray head's view of a job, and ending a job it holds pending."""

import subprocess
import sys
import time

from django.conf import settings as django_settings

from runs import ray_jobs
from runs.cluster import ray_request


def wait_for_job(job_id, states, timeout=90):
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = ray_jobs.status(job_id)
        if status.state in states:
            return status
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not reach {states}; last status {status}")


def supervisor_resources(job_id: str) -> dict:
    """Ray's state API: the GPUs and CPUs the job's supervisor actor (which runs the entrypoint) holds, or waits for
    while Ray holds the job pending."""
    query = {"detail": "true", "filter_keys": "name", "filter_predicates": "=",
             "filter_values": f"_ray_internal_job_actor_{job_id}"}
    response = ray_request(django_settings.RAY_ADDRESS, "GET", "/api/v0/actors", params=query, timeout_s=30)
    [actor] = response.json()["data"]["result"]["result"]
    return {name: amount for name, amount in actor["required_resources"].items() if name in ("GPU", "CPU")}


def running_job_of_a_shell_trainer(make_admitted_run, settings, script, shell: str, **run_fields):
    """A run (``run_fields`` as make_admitted_run takes them) dispatched to the suite's Ray head whose trainer is
    ``shell`` (a /bin/sh script written to ``script``, run by Ray in the trainer's place through TRAINER_PYTHON),
    returned once Ray says the job is RUNNING."""
    from runs import actions

    script.write_text(f"#!/bin/sh\n{shell}")
    script.chmod(0o755)
    settings.TRAINER_PYTHON = str(script)
    run = make_admitted_run(**run_fields)
    actions.dispatch(run.pk)
    run.refresh_from_db()
    wait_for_job(run.ray_job_id, {"RUNNING"})
    return run


# A driver of its own, which Ray's job API is not: it kills the job's supervisor actor, the one thing that ends a job
# Ray has not placed (platform/runs/ray_jobs.py PENDING_STOP_NOTE). Ray's job monitor then marks the job FAILED.
_KILL_SUPERVISOR = """
import sys, ray
from ray.dashboard.modules.job.common import JOB_ACTOR_NAME_TEMPLATE, SUPERVISOR_ACTOR_RAY_NAMESPACE
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
try:
    supervisor = ray.get_actor(JOB_ACTOR_NAME_TEMPLATE.format(job_id=sys.argv[2]), namespace=SUPERVISOR_ACTOR_RAY_NAMESPACE)
except ValueError:
    sys.exit(0)
ray.kill(supervisor, no_restart=True)
"""


def end_pending_job(ray_head, job_id, timeout=90):
    """End a job the suite's head holds pending (it has no GPU to place one on), so no test leaves it there until
    Ray's start timeout; returns its final status."""
    subprocess.run([sys.executable, "-c", _KILL_SUPERVISOR, f"127.0.0.1:{ray_head.port}", job_id],
                   check=True, capture_output=True, timeout=timeout)
    return wait_for_job(job_id, {"FAILED", "STOPPED"}, timeout=timeout)
