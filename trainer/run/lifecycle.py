"""One life for every kind of run (RL training, SFT, evaluation): started, then ended exactly once.

``RunLifecycle.run`` installs the cancel handlers, calls the run's ``live`` (its set-up, its
RUN_STARTED and its work), and whatever happens publishes RUN_FINISHED: ``succeeded``;
``failed`` with the exception as the reason and an ERROR event carrying the traceback; or
``cancelled`` on SIGTERM (Ray's stop_job, whether the run's handler hears it or the one ray.init puts in its place
for the seconds it connects) or SIGINT (Ctrl-C). Then it keeps the last event number
beside the checkpoints, so that a later attempt numbers its events after these. Files are never
half-written by a cancel: checkpoints are renamed into place only when complete.

A cancel is bounded in time. Ray stops a job with SIGTERM, waits RAY_JOB_STOP_WAIT_TIME_S (3 s by
default; the platform sends the setting with every job) and then SIGKILLs it, so a run whose
tear-down outlasts that (vLLM's engines, a generator process, a peer in a collective) would die
without its end. On SIGTERM a deadline starts: if the run has not published its end when it passes
(``stop_deadline_s``, inside Ray's wait), a watchdog thread publishes the cancelled end (``outcome_when_cut_short``: a
data-parallel rank's SIGTERM may be torchrun's answer to a peer's death instead), delivers it and exits the
process. The deadline is started from a thread of its own that hears the signal
through Python's wakeup file descriptor: a main thread inside a C++ call (a collective or a
rendezvous waiting for a peer that is gone) runs no Python signal handler until that call returns.
"""

from __future__ import annotations

import os
import signal
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path

from trainer.cluster.failures import CAUSE_INFRASTRUCTURE, InfrastructureFailure
from trainer.command_line import EXIT_CANCELLED, EXIT_FAILED
from trainer.observability.events import EventPublisher, EventType, RunStatus, finish_delivery
from trainer.run.checkpoint import record_last_event_seq

# Ray's name and default (ray/dashboard/modules/job/job_supervisor.py: DEFAULT_RAY_JOB_STOP_WAIT_TIME_S = 3),
# read by the job's supervisor, whose environment the trainer inherits.
STOP_WAIT_VARIABLE = "RAY_JOB_STOP_WAIT_TIME_S"
RAY_DEFAULT_STOP_WAIT_S = 3.0


def stop_deadline_s(environ: Mapping[str, str] = os.environ) -> float:
    """How long a cancelled run may take to end: Ray's wait less a margin for the last events to reach
    Redis (5 s, or half of a wait shorter than 10 s)."""
    try:
        wait = float(environ.get(STOP_WAIT_VARIABLE, RAY_DEFAULT_STOP_WAIT_S))
    except ValueError:
        wait = RAY_DEFAULT_STOP_WAIT_S
    return max(wait - 5.0, wait / 2) if wait >= 10 else wait / 2


def is_rays_sigterm_exit(error: BaseException) -> bool:
    """Whether ``error`` is Ray's own SIGTERM handler hearing a stop. ray.init installs it, ``sys.exit(SIGTERM)``, in
    the main thread before it connects (ray/_private/worker.py ``init``); a caller can put its own handler back only
    once ray.init returns, so a stop in those seconds comes as SystemExit(15): the cancel it is, never a failure."""
    return isinstance(error, SystemExit) and error.code == signal.SIGTERM


_running_runs: list[RunLifecycle] = []  # the runs of this process now inside ``run`` (one, outside tests)


def request_cancel_of_running_run(signal_name: str = "SIGTERM") -> bool:
    """Cancel this process's running run from another thread (``RunLifecycle.request_cancel``); False if none runs."""
    return any([run.request_cancel(signal_name) for run in list(_running_runs)])


class RunCancelled(BaseException):
    """Raised in the main thread by the SIGTERM or SIGINT handler: stop now, keep only complete files.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` on the way (a retry, a
    best-effort close) mistakes a cancel for an error and turns it into a failure.
    """

    def __init__(self, signal_name: str = "SIGTERM"):
        super().__init__(signal_name)
        self.signal_name = signal_name


class _SigtermWatch:
    """Hears SIGTERM while the main thread cannot: the C-level handler writes each signal's number to the wakeup
    file descriptor, which a thread of this watch reads, calling ``on_sigterm`` from there."""

    def __init__(self, on_sigterm) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # set_wakeup_fd's requirement: the C handler must never block
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, args=(on_sigterm,), name="sigterm-watch", daemon=True)
        self._thread.start()

    def _watch(self, on_sigterm) -> None:
        while data := os.read(self._read, 64):  # empty once close() has closed the writing end
            if signal.SIGTERM in data:
                on_sigterm()

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous)
        os.close(self._write)
        self._thread.join()
        os.close(self._read)


class RunLifecycle:
    """What every run kind shares; a run kind says how it lives (``live``) and what its end carries."""

    publisher: EventPublisher
    output_dir: Path
    install_signal_handlers: bool = True
    step: int = 0
    _end_lock: threading.Lock | None = None
    _deadline_lock: threading.Lock | None = None
    _has_published_end: bool = False
    _stop_deadline: threading.Timer | None = None
    _stopped_by: str | None = None  # the signal that told the run to stop, once its handler has run
    _run_thread: int | None = None  # the thread running ``live``, for a cancel that comes as a call (request_cancel)
    _cause: str | None = None  # CAUSE_INFRASTRUCTURE when the infrastructure failed the run (RUN_FINISHED's cause)

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
        if self._stopped_by is not None:
            # Ray's stop signals the trainer's children too (a compile worker, a generator process): what their
            # end breaks in the run's shutdown is the cancel's echo, not a failure of the run.
            return RunStatus.CANCELLED, (f"stopped by {self._stopped_by} during step {self.step}; "
                                         f"its shutdown then raised {type(error).__name__}: {error}")
        return RunStatus.FAILED, f"{type(error).__name__}: {error}"

    def request_cancel(self, signal_name: str = "SIGTERM") -> bool:
        """Cancel the run from another thread, as SIGTERM does: the stop deadline starts, and RunCancelled is raised
        in the thread running ``live``. A learner-rank actor is cancelled so (trainer/loop/rank_actor.py): Ray
        runs it on a thread of its worker process, where no signal handler can be installed. As with a signal, a
        thread inside a C++ call (a collective) sees the exception only when the call returns; the deadline's
        watchdog ends the run if that is too late. False when the run is not running (nothing to cancel)."""
        import ctypes

        if self._run_thread is None or self._deadline_lock is None:
            return False
        if self._stopped_by is not None:
            return True  # a second request would cut off the first one's shutdown
        self._stopped_by = signal_name
        self._start_stop_deadline()
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._run_thread), ctypes.py_object(RunCancelled))
        return True

    def _on_sigterm(self, signum, frame) -> None:
        signal_name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM"
        self._stopped_by = self._stopped_by or signal_name
        if signum == signal.SIGTERM:
            self._start_stop_deadline()
        raise RunCancelled(signal_name)

    def _as_cancel(self, error: BaseException) -> BaseException:
        """Ray's stop as the run's cancel, also when Ray's own SIGTERM handler heard it (``is_rays_sigterm_exit``: the
        Ray metrics sink connects during a step, trainer/observability/ray_metrics.py)."""
        if is_rays_sigterm_exit(error):
            self._stopped_by = self._stopped_by or "SIGTERM"
            self._start_stop_deadline()
            return RunCancelled("SIGTERM")
        return error

    def _start_stop_deadline(self) -> None:
        """Ray's SIGKILL follows its SIGTERM: from now on the run has stop_deadline_s() to publish its end.
        Called by the signal handler and by the SIGTERM watch, whichever comes first."""
        with self._deadline_lock:
            if self._stop_deadline is not None:
                return
            deadline_s = stop_deadline_s()
            self._stop_deadline = threading.Timer(deadline_s, self._end_before_the_kill, ("SIGTERM", deadline_s))
            self._stop_deadline.daemon = True
            self._stop_deadline.start()

    def outcome_when_cut_short(self, signal_name: str, deadline_s: float) -> tuple[RunStatus, str]:
        """How the watchdog ends a run whose shutdown outlasted its deadline. A data-parallel rank overrides it: the
        SIGTERM may be torchrun's answer to another rank's death, not a cancel."""
        return RunStatus.CANCELLED, (f"stopped by {signal_name} during step {self.step}; its shutdown outlasted "
                                     f"{deadline_s:g} s (within Ray's {STOP_WAIT_VARIABLE}) and was cut short")

    def _end_before_the_kill(self, signal_name: str, deadline_s: float) -> None:
        """The watchdog: the run's shutdown outlasted its deadline; publish its end before Ray's SIGKILL."""
        if not self._claim_the_end():
            return
        status, reason = self.outcome_when_cut_short(signal_name, deadline_s)
        if status is RunStatus.FAILED:
            self.publisher.publish(EventType.ERROR, {"step": self.step, "message": reason})
        self.publisher.publish(EventType.RUN_FINISHED, {
            "status": status.value, "step": self.step, **self.finished_payload(status), "reason": reason})
        record_last_event_seq(self.output_dir, self._seq_recorder.last_seq)
        sink = self.publisher.sink
        finish_delivery(getattr(sink, "sink", sink))  # under the SequenceRecorder, the buffered stream
        os._exit(EXIT_CANCELLED if status is RunStatus.CANCELLED else EXIT_FAILED)

    def _claim_the_end(self) -> bool:
        """Whether this caller publishes RUN_FINISHED: the first one, the run's own end or the watchdog's."""
        with self._end_lock:
            if self._has_published_end:
                return False
            self._has_published_end = True
            return True

    def run(self) -> RunStatus:
        """Live, then end with RUN_FINISHED, whatever happens."""
        previous_handlers = {}
        self._end_lock, self._deadline_lock = threading.Lock(), threading.Lock()
        sigterm_watch = None
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            # Ctrl-C is a cancel as Ray's stop is, not a failure with a KeyboardInterrupt traceback.
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous_handlers[signum] = signal.signal(signum, self._on_sigterm)
            sigterm_watch = _SigtermWatch(self._start_stop_deadline)
        status, reason = RunStatus.FAILED, ""
        self._run_thread = threading.get_ident()
        _running_runs.append(self)
        try:
            self.live()
            status = RunStatus.SUCCEEDED
        except BaseException as raised:  # noqa: BLE001 - every failure must reach the platform
            error = self._as_cancel(raised)
            status, reason = self.outcome_of(error)
            if status is RunStatus.FAILED and isinstance(error, InfrastructureFailure):
                self._cause = CAUSE_INFRASTRUCTURE  # the platform retries it from the last checkpoint
            self.before_the_end_is_published(status)
            if status is RunStatus.FAILED:
                self.publisher.publish(EventType.ERROR, {
                    "step": self.step, "message": reason, "traceback": traceback.format_exc()[-8000:],
                })
        finally:
            self._run_thread = None  # no cancel may be raised into tear-down's code, nor after it
            _running_runs.remove(self)
            self.tear_down()
            if sigterm_watch is not None:
                sigterm_watch.close()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        if not self._claim_the_end():
            # The watchdog is publishing the cancelled end and will leave with os._exit. Leaving the
            # interpreter beside it would drop its events and run C++ destructors under its feet
            # (an abort: "terminate called without an active exception", exit -6).
            self._stop_deadline.join()
            return status
        if self._stop_deadline is not None:
            self._stop_deadline.cancel()
        cause = {"cause": self._cause} if self._cause else {}
        self.publisher.publish(EventType.RUN_FINISHED, {
            "status": status.value, "reason": reason, "step": self.step, **self.finished_payload(status), **cause})
        record_last_event_seq(self.output_dir, self._seq_recorder.last_seq)
        return status
