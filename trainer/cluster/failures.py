"""Which failures are the infrastructure's, not the run's: the platform retries those by itself.

A node lost, a worker preempted, an actor killed from outside: the run's code did nothing wrong and
its next attempt, from the last checkpoint, may well succeed. A failure of the run's own code (an
exception in the loop, a bad config, a diverged loss) would fail again the same way: no retry.

The trainer raises ``InfrastructureFailure`` (its message names the node or actor and what happened);
RUN_FINISHED then carries ``cause: "infrastructure"`` (``CAUSE_INFRASTRUCTURE``), which the platform reads
to start the next attempt, up to the run's bound.
"""

from __future__ import annotations

CAUSE_INFRASTRUCTURE = "infrastructure"
CAUSE_RUN = "run"


class InfrastructureFailure(RuntimeError):
    """The run failed because a node, a worker or an actor of it was lost, not because of its code.
    ``node`` is the node's id (or address) when known, so the message and the run page can name it."""

    def __init__(self, message: str, *, node: str | None = None):
        super().__init__(message)
        self.node = node
