"""Waiting on the real local Ray head's view of a job."""

import time

from runs import ray_jobs


def wait_for_job(job_id, states, timeout=90):
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = ray_jobs.status(job_id)
        if status.state in states:
            return status
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not reach {states}; last status {status}")
