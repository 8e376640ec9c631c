from celery import shared_task

from runs import actions


@shared_task(name="runs.dispatch_run")
def dispatch_run(run_id: int, resume: bool | None = None) -> None:
    """Submit a queued run to Ray (see runs.actions.dispatch).

    ``resume`` is ignored: whether the trainer resumes follows from the run's attempt. It is still
    accepted only so that messages queued by an older release (which sent it) are not refused.
    """
    actions.dispatch(run_id)
