"""The runs app's Celery tasks, for Celery's autodiscovery (it imports each app's ``tasks`` module).

Each is defined beside the action it runs (runs/actions.py), so that queueing one never imports a
module that imports the queuer back.
"""

from runs.actions import dispatch_run, retry_run_task

__all__ = ["dispatch_run", "retry_run_task"]
