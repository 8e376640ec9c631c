"""One life for every kind of run (RL training, SFT, evaluation): started, then ended exactly once.

``RunLifecycle.run`` installs the cancel handlers, calls the run's ``live`` (its set-up, its
RUN_STARTED and its work), and whatever happens publishes RUN_FINISHED: ``succeeded``;
``failed`` with the exception as the reason and an ERROR event carrying the traceback; or
``cancelled`` on SIGTERM (Ray's stop_job) or SIGINT (Ctrl-C). Then it keeps the last event number
beside the checkpoints, so that a later attempt numbers its events after these. Files are never
half-written by a cancel: checkpoints are renamed into place only when complete.
"""

from __future__ import annotations

import signal
import threading
import traceback
from pathlib import Path

from trainer.checkpoint import record_last_event_seq
from trainer.events import EventPublisher, EventType, RunStatus


class RunCancelled(BaseException):
    """Raised in the main thread by the SIGTERM or SIGINT handler: stop now, keep only complete files.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` on the way (a retry, a
    best-effort close) mistakes a cancel for an error and turns it into a failure.
    """

    def __init__(self, signal_name: str = "SIGTERM"):
        super().__init__(signal_name)
        self.signal_name = signal_name


class RunLifecycle:
    """What every run kind shares; a run kind says how it lives (``live``) and what its end carries."""

    publisher: EventPublisher
    output_dir: Path
    install_signal_handlers: bool = True
    step: int = 0

    def live(self) -> None:
        """Set up, publish RUN_STARTED, and do the run's work; returning means it succeeded."""
        raise NotImplementedError

    def tear_down(self) -> None:
        """Release what ``live`` started (threads, engines), whatever the outcome."""

    def before_the_end_is_published(self, status: RunStatus) -> None:
        """Anything the run still owes its watchers before ERROR and RUN_FINISHED (e.g. start-up notes)."""

    def finished_payload(self, status: RunStatus) -> dict:
        """What RUN_FINISHED carries besides its status, reason and step."""
        return {}

    def outcome_of(self, error: BaseException) -> tuple[RunStatus, str]:
        """How an exception ends the run. A data-parallel rank overrides it: there, what one rank
        sees (a broken collective, torchrun's SIGTERM) may be the echo of another rank's failure."""
        if isinstance(error, RunCancelled):
            return RunStatus.CANCELLED, f"stopped by {error.signal_name} during step {self.step}"
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C before the handler was installed, or in a thread
            return RunStatus.CANCELLED, f"stopped by SIGINT (Ctrl-C) during step {self.step}"
        return RunStatus.FAILED, f"{type(error).__name__}: {error}"

    def _on_sigterm(self, signum, frame) -> None:
        raise RunCancelled("SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM")

    def run(self) -> RunStatus:
        """Live, then end with RUN_FINISHED, whatever happens."""
        previous_handlers = {}
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            # Ctrl-C is a cancel as Ray's stop is, not a failure with a KeyboardInterrupt traceback.
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous_handlers[signum] = signal.signal(signum, self._on_sigterm)
        status, reason = RunStatus.FAILED, ""
        try:
            self.live()
            status = RunStatus.SUCCEEDED
        except BaseException as error:  # noqa: BLE001 - every failure must reach the platform
            status, reason = self.outcome_of(error)
            self.before_the_end_is_published(status)
            if status is RunStatus.FAILED:
                self.publisher.publish(EventType.ERROR, {
                    "step": self.step, "message": reason, "traceback": traceback.format_exc()[-8000:],
                })
        finally:
            self.tear_down()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        self.publisher.publish(EventType.RUN_FINISHED, {
            "status": status.value, "reason": reason, "step": self.step, **self.finished_payload(status)})
        record_last_event_seq(self.output_dir, self._seq_recorder.last_seq)
        return status
