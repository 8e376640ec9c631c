"""What a run's lower modules tell the higher ones, so that none of them imports one above it.

The run's row (runs/models.py) knows nothing of the queue, and the queue (runs/scheduling.py)
knows nothing of dispatching: each says what happened, and whoever cares listens (connected once,
in ``RunsConfig.ready``). Imports flow one way (DESIGN.md): models ← scheduling ← actions.
"""

from django.dispatch import Signal

# Run.transition changed a run's state (sent inside its transaction): ``run``, ``state``.
# The scheduler listens: an ending frees a slot, a re-queued run waits for one.
state_changed = Signal()

# The scheduler admitted a queued run, and its admission is committed: ``run_id``.
# runs.actions listens and hands the run to a Celery worker.
run_admitted = Signal()

# An attempt failed because of the infrastructure and the run has automatic retries left (committed):
# ``run_id``, ``attempt`` (the failed one), ``delay_s`` (the back-off). runs.actions listens and starts the next
# attempt after the delay; the sweeper starts any whose time has passed, should that message be lost.
infrastructure_retry_scheduled = Signal()

# The sweeper finished a pass (runs/sweeper.py): no arguments. Higher apps that keep their own state machine in
# step with runs (pipelines) listen, so that a message lost with a dead worker is made good within one pass.
sweep_passed = Signal()
