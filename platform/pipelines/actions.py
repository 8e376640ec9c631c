"""Verbs on pipelines: launch one, cancel it (and its current run), retry a failed stage."""

from __future__ import annotations

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipelines.advance import enqueue_advance
from pipelines.models import RUN_OF_STAGE, Pipeline, PipelineEvent, PipelineState, SftStart, Stage
from runs import actions as run_actions
from runs import launch_contract
from runs.launch_contract import LaunchError
from runs.models import Checkpoint, Run
from trainer.config import PRESETS

# Launch fields a stage sets itself (per stage), never the person's SFT or RL settings.
_SET_BY_THE_PIPELINE = {"name", "promptset_version_id", "preset", "kind", "model", "starting_checkpoint_id"}


class PipelineRequest(BaseModel):
    """A pipeline as the form, the API and ``leanrl`` ask for it. Unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=150)
    preset: str = "cpu-smoke"
    model: str | None = Field(None, description="A registered model by name; blank: the preset's.")
    starting_checkpoint_id: int | None = Field(None, ge=1, description="A checkpoint you may see, instead of a model.")
    training_version_id: int = Field(ge=1, description="The promptset version harvested and trained on.")
    benchmark_version_id: int = Field(ge=1, description="The held-out benchmark's version.")
    harvest_samples: int = Field(4, ge=1, le=1024, description="Samples per problem when harvesting.")
    harvest_error_correction: bool = Field(False, description="Harvest with rounds of correction.")
    benchmark_samples: int = Field(4, ge=1, le=1024, description="Samples per benchmark problem (its pass@k's k).")
    sft_fields: dict = Field(default_factory=dict, description="Launch fields of each SFT run (e.g. total_steps).")
    rl_fields: dict = Field(default_factory=dict, description="Launch fields of each RL run (e.g. total_steps).")
    sft_start: SftStart = SftStart.LAST
    rl_max_win_rate: float = Field(0.5, ge=0.0, le=1.0,
                                   description="RL keeps problems whose platform win rate is at most this.")
    max_iterations: int = Field(3, ge=1, le=50)
    min_gain: int = Field(1, ge=0, le=100_000, description="δ, in benchmark problems.")

    @field_validator("name")
    @classmethod
    def _name_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a pipeline needs a name")
        return value.strip()


def _stage_fields_errors(request: PipelineRequest) -> dict[str, list[str]]:
    """Each stage's launch fields, checked by the launch contract itself (one home for the bounds)."""
    errors: dict[str, list[str]] = {}
    for field, kind in (("sft_fields", "sft"), ("rl_fields", "rl")):
        given = getattr(request, field)
        owned = sorted(set(given) & _SET_BY_THE_PIPELINE)
        if owned:
            errors.setdefault(field, []).append(f"{', '.join(owned)} are set by the pipeline for each stage; "
                                                "leave them out")
            continue
        try:
            launch_contract.parse({"name": "check", "promptset_version_id": request.training_version_id,
                                   "preset": request.preset, "kind": kind, **given})
        except LaunchError as error:
            for name, messages in (error.field_errors or {"__all__": [str(error)]}).items():
                errors.setdefault(field, []).extend(f"{name}: {message}" for message in messages)
    return errors


def parse(data: dict) -> PipelineRequest:
    try:
        request = PipelineRequest.model_validate(data)
    except ValidationError as error:
        field_errors: dict[str, list[str]] = {}
        for problem in error.errors():
            field = ".".join(str(part) for part in problem["loc"]) or "__all__"
            field_errors.setdefault(field, []).append(f"{problem['msg']} (got {problem.get('input')!r})")
        raise LaunchError("the pipeline's settings are invalid", field_errors) from error
    if request.preset not in PRESETS:
        raise LaunchError("unknown preset", {"preset": [
            f"{request.preset!r} is not a preset; choose one of {', '.join(sorted(PRESETS))}"]})
    errors = _stage_fields_errors(request)
    if errors:
        raise LaunchError("a stage's launch fields are invalid", errors)
    return request


def launch_pipeline(*, owner, request: PipelineRequest | dict) -> Pipeline:
    """The one door (form, API, ``leanrl``): checks what it names, stores the pipeline, and starts iteration 1."""
    if not isinstance(request, PipelineRequest):
        request = parse(request)
    training = run_actions.visible_promptset_version(owner, request.training_version_id)
    try:
        benchmark = run_actions.visible_promptset_version(owner, request.benchmark_version_id)
    except run_actions.NotVisible as error:
        raise LaunchError(str(error), {"benchmark_version_id": [str(error)]}) from error
    if benchmark.pk == training.pk:
        raise LaunchError("the benchmark must be held out", {"benchmark_version_id": [
            f"version {benchmark.pk} is the training promptset too; choose a benchmark the pipeline does not train on"]})
    checkpoint = None
    if request.starting_checkpoint_id is not None:
        checkpoint = Checkpoint.objects.filter(run__in=Run.objects.visible_to(owner),
                                               pk=request.starting_checkpoint_id).first()
        if checkpoint is None:
            message = f"no checkpoint with id {request.starting_checkpoint_id} that you may see"
            raise LaunchError(message, {"starting_checkpoint_id": [message]})
    with transaction.atomic():
        pipeline = Pipeline.objects.create(
            owner=owner, name=request.name, preset=request.preset, model=request.model or "",
            starting_checkpoint=checkpoint, training_version=training, benchmark_version=benchmark,
            harvest_samples=request.harvest_samples, harvest_error_correction=request.harvest_error_correction,
            benchmark_samples=request.benchmark_samples, sft_fields=request.sft_fields, rl_fields=request.rl_fields,
            sft_start=request.sft_start, rl_max_win_rate=request.rl_max_win_rate,
            max_iterations=request.max_iterations, min_gain=request.min_gain)
        PipelineEvent.objects.create(pipeline=pipeline, message="launched")
        transaction.on_commit(lambda: enqueue_advance(pipeline.pk))
    return pipeline


def cancel_pipeline(pipeline: Pipeline) -> bool:
    """Cancel the pipeline and its current stage's run; False if it had already ended."""
    with transaction.atomic():
        if not Pipeline.objects.filter(pk=pipeline.pk, state=PipelineState.RUNNING).update(
                state=PipelineState.CANCELLED, stop_reason="cancelled by its owner"):
            return False
        pipeline.refresh_from_db()
        iteration = pipeline.current_iteration
        PipelineEvent.objects.create(pipeline=pipeline, iteration=iteration.number if iteration else None,
                                     message="cancelled by its owner")
    run = iteration.run_of(iteration.stage) if iteration and iteration.stage in RUN_OF_STAGE else None
    if run is not None and run.is_active:
        run_actions.cancel_run(run, reason=f"its pipeline {pipeline.pk} was cancelled")
    return True


def retry_stage(pipeline: Pipeline) -> bool:
    """A failed pipeline goes on from the stage that failed, with a new run (the failed one keeps its page)."""
    with transaction.atomic():
        locked = Pipeline.objects.select_for_update().get(pk=pipeline.pk)
        if locked.state != PipelineState.FAILED:
            return False
        iteration = locked.current_iteration
        stage = Stage(iteration.stage)
        failed = iteration.run_of(stage) if stage in RUN_OF_STAGE else None
        if failed is not None:
            setattr(iteration, RUN_OF_STAGE[stage], None)
            iteration.save(update_fields=[RUN_OF_STAGE[stage]])
        Pipeline.objects.filter(pk=locked.pk).update(state=PipelineState.RUNNING, failure_reason="", finished_at=None)
        PipelineEvent.objects.create(pipeline=locked, iteration=iteration.number, stage=stage,
                                     message=f"{stage.label} retried" + (f" (run {failed.pk} failed)" if failed else ""))
        transaction.on_commit(lambda: enqueue_advance(locked.pk))
    return True
