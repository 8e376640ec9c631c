"""An evaluation run: the training run's path without the learner.

A model (a registry model, or a run's checkpoint as ``model.init_checkpoint``), a promptset, k
samples per problem (``schedule.eval_samples``), one retry per failed first attempt or none
(``schedule.eval_error_correction``). It samples with ``schedule.seed`` and publishes what a
training run publishes for an evaluation, at step 0: every sample (ROLLOUT_FINISHED with ``is_evaluation``)
and one EVALUATION, between RUN_STARTED and RUN_FINISHED, so the platform stores it the same way. The
values hold evaluation_report's pass@k and the pass@k curve with its 95% intervals
(trainer.evaluation.evaluation_curves).
"""

from __future__ import annotations

import signal
import threading
import traceback
from pathlib import Path

from trainer.compute_dtype import compute_dtype_of
from trainer.driver import TrainingRun, record_last_event_seq
from trainer.events import EventType, RunStatus


class EvaluationRun(TrainingRun):
    """``run()`` evaluates once, at step 0, and trains nothing. Every sample (first attempts and retries) is
    published as an evaluation sample by the driver's evaluation path (``TrainingRun._score_all``), as a training
    run's periodic evaluations are, so the proof viewer shows them and the benchmark's solved matrix counts them."""

    def planned_steps(self) -> int:
        return 0

    def run(self) -> RunStatus:
        previous_handlers = {}
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous_handlers[signum] = signal.signal(signum, self._on_sigterm)
        status, reason = RunStatus.FAILED, ""
        try:
            self.publisher.publish(EventType.RUN_STARTED, {
                "step": 0, "config": self.config.to_public_dict(), "problems": len(self.eval_problems),
                "resumed_from_step": None, "total_steps": 0, "attempt": self.attempt, "kind": "eval",
                "compute_dtype": compute_dtype_of(self.config).to_json_dict(),
            })
            self.prepare_for_evaluation()
            self.record_evaluation(0, self.evaluate(0, seed=self.config.schedule.seed))
            status = RunStatus.SUCCEEDED
        except BaseException as error:  # noqa: BLE001 - every failure must reach the platform
            status, reason = self.outcome_of(error)
            if status is RunStatus.FAILED:
                self.publisher.publish(EventType.ERROR, {
                    "step": 0, "message": reason, "traceback": traceback.format_exc()[-8000:]})
        finally:
            self.tear_down()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        self.publisher.publish(EventType.RUN_FINISHED, {"status": status.value, "reason": reason, "step": 0})
        # A resumed evaluation (a later attempt) numbers its events after these, as a training run's does.
        record_last_event_seq(self.output_dir, self._seq_recorder.last_seq)
        return status


def evaluate_to_events(config, problems, output_dir: Path, publisher) -> RunStatus:
    return EvaluationRun(config, problems, output_dir, publisher, eval_problems=problems).run()

