"""The pipeline's state machine: one step at a time, each from what the database says, never a waiting loop.

``advance`` takes the pipeline's row lock, looks at the current iteration's stage and does what that stage needs
(launch its run, wait for it, read what it made), then stops at the first stage still waiting for a run. A
stage's run is launched and recorded on the iteration in one transaction, so a worker killed at any point leaves
either both or neither: the next ``advance`` (the Celery task sent when a run ends, or the sweeper's pass) carries
on from there, and a stage never gets two runs.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from pipelines.corpus import CorpusRefused, build_corpus
from pipelines.models import (
    RUN_OF_STAGE,
    STAGE_ORDER,
    Iteration,
    Pipeline,
    PipelineEvent,
    PipelineState,
    SftStart,
    Stage,
)
from pipelines.plateau import plateau_verdict
from promptsets.curation import DropAboveWinRate, WinRateSource
from promptsets.versions import CurationRefused, curate
from proofs.models import ProofAttempt, Turn
from runs import actions
from runs.launch_contract import LaunchError
from runs.models import FINAL_STATES, Checkpoint, Run, RunKind, RunState

logger = logging.getLogger(__name__)


@shared_task(name="pipelines.advance_pipeline")
def advance_pipeline(pipeline_id: int) -> None:
    advance(pipeline_id)


def enqueue_advance(pipeline_id: int) -> None:
    try:
        advance_pipeline.delay(pipeline_id)
    except Exception as error:  # noqa: BLE001 - kombu raises many kinds; the sweeper's pass advances it anyway
        logger.warning("could not enqueue the advance of pipeline %s (the sweeper will): %s", pipeline_id, error)


def advance_when_a_stage_ends(sender, *, run, state, **kwargs) -> None:
    """``state_changed``'s listener: a stage's run ended; move its pipeline on once that is committed."""
    if state not in FINAL_STATES:
        return
    stages = Iteration.objects.holding(run).filter(pipeline__state=PipelineState.RUNNING)
    for pipeline_id in stages.values_list("pipeline_id", flat=True):
        transaction.on_commit(lambda pipeline_id=pipeline_id: enqueue_advance(pipeline_id))


def advance_every_running_pipeline(sender=None, **kwargs) -> None:
    """``sweep_passed``'s listener: a message lost with a dead worker is made good within a pass."""
    for pipeline_id in Pipeline.objects.filter(state=PipelineState.RUNNING).values_list("pk", flat=True):
        try:
            advance(pipeline_id)
        except Exception:  # one broken pipeline must not stop the sweeper's pass over the others
            logger.exception("advancing pipeline %s failed; the next pass tries again", pipeline_id)


def advance(pipeline_id: int) -> None:
    with transaction.atomic():
        pipeline = Pipeline.objects.select_for_update().get(pk=pipeline_id)
        if pipeline.state != PipelineState.RUNNING:
            return
        iteration = pipeline.current_iteration
        if iteration is None:
            iteration = _start_iteration(pipeline, 1)
        while pipeline.state == PipelineState.RUNNING and _step(pipeline, iteration):
            iteration = pipeline.current_iteration


def _note(pipeline: Pipeline, iteration: Iteration | None, message: str) -> None:
    PipelineEvent.objects.create(pipeline=pipeline, iteration=iteration.number if iteration else None,
                                 stage=iteration.stage if iteration else "", message=message)


def _start_iteration(pipeline: Pipeline, number: int) -> Iteration:
    iteration = Iteration.objects.create(pipeline=pipeline, number=number, stage=Stage.HARVEST)
    _note(pipeline, iteration, f"iteration {number} started")
    return iteration


def _move_to(iteration: Iteration, stage: Stage) -> None:
    iteration.stage = stage
    iteration.save(update_fields=["stage"])


def _next_stage(stage: Stage) -> Stage:
    return STAGE_ORDER[STAGE_ORDER.index(Stage(stage)) + 1]


def fail(pipeline: Pipeline, reason: str) -> None:
    Pipeline.objects.filter(pk=pipeline.pk).update(state=PipelineState.FAILED, failure_reason=reason,
                                                   finished_at=timezone.now())
    pipeline.state = PipelineState.FAILED
    _note(pipeline, pipeline.current_iteration, f"failed: {reason}")


def _step(pipeline: Pipeline, iteration: Iteration) -> bool:
    """One stage's work; True when the pipeline moved on and the next stage may act now, False when it waits."""
    stage = Stage(iteration.stage)
    if stage == Stage.CORPUS:
        try:
            corpus = build_corpus(iteration)
        except CorpusRefused as error:
            fail(pipeline, f"iteration {iteration.number}, proof corpus: {error}")
            return False
        iteration.refresh_from_db()
        _note(pipeline, iteration, f"corpus v{corpus.number}: {corpus.proof_count} proofs ({corpus.added_count} new, "
                                   f"{corpus.duplicate_count} duplicates, {corpus.refused_count} refused as the "
                                   f"benchmark's), {corpus.get_verified_by_display()}")
        _move_to(iteration, Stage.SFT)
        return True
    if stage == Stage.DONE:
        return _after_iteration(pipeline, iteration)
    run = iteration.run_of(stage)
    if run is None:
        return _launch_stage(pipeline, iteration, stage)
    if run.state not in FINAL_STATES:
        return False
    if run.state != RunState.SUCCEEDED:
        fail(pipeline, f"iteration {iteration.number}, {stage.label}: run {run.pk} ended {run.state}"
                       + (f" ({run.failure_reason[:500]})" if run.failure_reason else "")
                       + "; retry the stage from the pipeline's page")
        return False
    if stage == Stage.BENCHMARK:
        _read_benchmark(iteration, run)
    _note(pipeline, iteration, f"run {run.pk} succeeded")
    _move_to(iteration, _next_stage(stage))
    return True


def latest_checkpoint(run: Run | None) -> Checkpoint | None:
    if run is None:
        return None
    return run.checkpoints.filter(removed_at__isnull=True).order_by("-step").first()


def model_after(iteration: Iteration | None, pipeline: Pipeline) -> Checkpoint | None:
    """The model an iteration ended with (its RL model, else its SFT model), or the pipeline's start for None."""
    if iteration is None:
        return pipeline.starting_checkpoint
    return latest_checkpoint(iteration.rl_run) or latest_checkpoint(iteration.sft_run) or model_after(
        pipeline.iterations.filter(number=iteration.number - 1).first(), pipeline)


def _previous(iteration: Iteration) -> Iteration | None:
    return iteration.pipeline.iterations.filter(number=iteration.number - 1).first()


def _launch_stage(pipeline: Pipeline, iteration: Iteration, stage: Stage) -> bool:
    fields: dict = {}
    demonstrations_path = ""
    if stage == Stage.HARVEST:
        version, kind, start = pipeline.training_version, RunKind.EVAL, model_after(_previous(iteration), pipeline)
        fields = {"eval_samples": pipeline.harvest_samples, "error_correction": pipeline.harvest_error_correction}
    elif stage == Stage.SFT:
        if not iteration.corpus.proof_count:
            # Nothing to fine-tune on: RL starts from the current model; said on the timeline, not hidden.
            _note(pipeline, iteration, "SFT skipped: the corpus holds no proof yet")
            _move_to(iteration, Stage.RL)
            return True
        version, kind, fields = pipeline.training_version, RunKind.SFT, dict(pipeline.sft_fields)
        start = (pipeline.starting_checkpoint if pipeline.sft_start == SftStart.BASE
                 else model_after(_previous(iteration), pipeline))
        demonstrations_path = iteration.corpus.path
    elif stage == Stage.RL:
        rule = DropAboveWinRate(max_win_rate=pipeline.rl_max_win_rate, win_rate_source=WinRateSource.PLATFORM)
        try:
            [version] = curate(pipeline.training_version, rule)
        except CurationRefused as error:
            _note(pipeline, iteration, f"RL skipped: {error}")
            _move_to(iteration, Stage.BENCHMARK)
            return True
        iteration.rl_version = version
        iteration.save(update_fields=["rl_version"])
        kind, fields = RunKind.RL, dict(pipeline.rl_fields)
        start = latest_checkpoint(iteration.sft_run) or model_after(_previous(iteration), pipeline)
    else:
        version, kind = pipeline.benchmark_version, RunKind.EVAL
        fields = {"eval_samples": pipeline.benchmark_samples, "error_correction": False}
        start = model_after(iteration, pipeline)
    request = {"name": f"{pipeline.name} · iteration {iteration.number} · {stage.value}"[:200],
               "promptset_version_id": version.pk, "preset": pipeline.preset, "kind": kind.value, **fields}
    if start is not None:
        request["starting_checkpoint_id"] = start.pk
    elif pipeline.model:
        request["model"] = pipeline.model
    try:
        run = actions.launch_run(owner=pipeline.owner, request=request)
    except LaunchError as error:
        details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.field_errors.items())
        fail(pipeline, f"iteration {iteration.number}, {stage.label}: the platform refused its run: {error}"
                       + (f" ({details})" if details else "") + "; fix the pipeline's settings and start a new one")
        return False
    if demonstrations_path:
        Run.objects.filter(pk=run.pk).update(demonstrations_path=demonstrations_path)
    setattr(iteration, RUN_OF_STAGE[stage], run)
    iteration.save(update_fields=[RUN_OF_STAGE[stage]])
    _note(pipeline, iteration, f"run {run.pk} launched ({kind.label})")
    return False


def _read_benchmark(iteration: Iteration, run: Run) -> None:
    """Benchmark problems with an accepted first attempt among its k samples (pass@k); None where none was scored.
    Answers judged by the other verifier than the pipeline's are left out; an answer that failed the format check
    reached no verifier and is the model's 0, counted."""
    pipeline = iteration.pipeline
    first = ProofAttempt.objects.filter(run=run, turn=Turn.FIRST, reward__isnull=False)
    if pipeline.verified_by:
        first = first.exclude(~Q(verdict="") & Q(is_standin_verdict=not pipeline.is_standin))
    is_measured = first.exists()
    iteration.benchmark_solved = (first.filter(reward__gte=1).values("problem_key").distinct().count()
                                  if is_measured else None)
    iteration.benchmark_problems = run.promptset_version.problem_count
    iteration.benchmark_k = run.resolved_config.schedule.eval_samples
    iteration.save(update_fields=["benchmark_solved", "benchmark_problems", "benchmark_k"])


def _after_iteration(pipeline: Pipeline, iteration: Iteration) -> bool:
    solved = list(pipeline.iterations.order_by("number").values_list("benchmark_solved", flat=True))
    verdict = plateau_verdict(solved, min_gain=pipeline.min_gain, max_iterations=pipeline.max_iterations)
    iteration.plateau_verdict = verdict.words
    iteration.save(update_fields=["plateau_verdict"])
    if verdict.should_stop:
        Pipeline.objects.filter(pk=pipeline.pk).update(state=PipelineState.SUCCEEDED, stop_reason=verdict.words,
                                                       finished_at=timezone.now())
        pipeline.state = PipelineState.SUCCEEDED
        _note(pipeline, iteration, verdict.words)
        return False
    _start_iteration(pipeline, iteration.number + 1)
    return True
