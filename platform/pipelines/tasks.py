"""The pipelines app's Celery tasks, for Celery's autodiscovery; each is defined beside what it runs."""

from pipelines.advance import advance_pipeline

__all__ = ["advance_pipeline"]
