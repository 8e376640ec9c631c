"""The body the platform sends Ray's job API for a run (runs/ray_jobs.py ``submit``), caught as the head would
receive it and never sent: the tests that read it ask what the submission says (entrypoint, resources, the
runtime environment's variables), not what a started trainer does, which the real-stack tests cover."""

from __future__ import annotations


def submitted_body(run, monkeypatch) -> dict:
    from runs import ray_jobs

    submitted = {}

    class Accepted:
        status_code = 200
        text = ""

        def json(self):
            return {"submission_id": submitted["submission_id"]}

    def record(method, path, json=None, **options):
        submitted.update(json or {})
        return Accepted()

    monkeypatch.setattr(ray_jobs, "_request", record)
    ray_jobs.submit(run)
    return submitted
