from celery import shared_task

from runs import actions


@shared_task(name="runs.dispatch_run")
def dispatch_run(run_id: int, resume: bool = False) -> None:
    """Submit a queued run to Ray (see runs.actions.dispatch)."""
    actions.dispatch(run_id, resume=resume)
