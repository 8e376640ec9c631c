from celery import shared_task

from promptsets import actions


@shared_task(name="promptsets.check_upload")
def check_upload(upload_id: int) -> None:
    """Check a staged upload in a child process with a memory ceiling, then import it (promptsets.actions.run_upload)."""
    actions.run_upload(upload_id)
