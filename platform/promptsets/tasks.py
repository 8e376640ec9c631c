"""The promptsets app's Celery tasks, for Celery's autodiscovery (it imports each app's ``tasks`` module).

Each is defined beside what it runs (promptsets/uploads.py), so that queueing one never imports a
module that imports the queuer back.
"""

from promptsets.uploads import check_upload

__all__ = ["check_upload"]
