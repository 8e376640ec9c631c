"""An evaluation run: the training run's path without the learner.

A model (a registry model, or a run's checkpoint as ``model.init_checkpoint``), a promptset, k
samples per problem (``schedule.eval_samples``), retries of each failed attempt up to ``retry.max_rounds``
rounds or none (``schedule.eval_error_correction``). It samples with ``schedule.seed`` and publishes what a
training run publishes for an evaluation, at step 0: every sample (ROLLOUT_FINISHED with ``is_evaluation``)
and one EVALUATION, between RUN_STARTED and RUN_FINISHED, so the platform stores it the same way. The
values hold evaluation_report's pass@k and the pass@k curve with its 95% intervals
(trainer.loop.evaluation.evaluation_curves).
"""

from __future__ import annotations

from pathlib import Path

from trainer.compute_dtype import compute_dtype_of
from trainer.loop.driver import TrainingRun
from trainer.observability.events import EventType, RunStatus


class EvaluationRun(TrainingRun):
    """It lives (trainer/run/lifecycle.py) to evaluate once, at step 0, and trains nothing. Every sample (first
    attempts and retries) is published as an evaluation sample by the driver's evaluation path (``TrainingRun._score_all``), as a training
    run's periodic evaluations are, so the proof viewer shows them and the benchmark's solved matrix counts them."""

    def planned_steps(self) -> int:
        return 0

    def live(self) -> None:
        self.prepare_for_evaluation()
        self.publisher.publish(EventType.RUN_STARTED, {
            "step": 0, "config": self.config.to_public_dict(), "problems": len(self.eval_problems),
            "resumed_from_step": None, "total_steps": 0, "attempt": self.attempt, "kind": "eval",
            "compute_dtype": compute_dtype_of(self.config).to_json_dict(),
            "rollout_engine": self.rollout_engine_choice.to_json_dict(),
        })
        self._publish_startup_notes()
        self.record_evaluation(0, self.evaluate(0, seed=self.config.schedule.seed))


def evaluate_to_events(config, problems, output_dir: Path, publisher) -> RunStatus:
    return EvaluationRun(config, problems, output_dir, publisher, eval_problems=problems).run()

