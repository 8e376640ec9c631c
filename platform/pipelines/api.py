from __future__ import annotations

import json
from datetime import datetime

from django.shortcuts import get_object_or_404
from ninja import Router, Schema
from ninja.errors import HttpError

from pipelines import actions, lineage, queries
from pipelines.models import Pipeline
from runs.models import Checkpoint, Run

router = Router(tags=["pipelines"])


class PipelineOut(Schema):
    id: int
    name: str
    state: str
    preset: str
    verified_by: str
    failure_reason: str
    stop_reason: str
    training_version_id: int
    benchmark_version_id: int
    max_iterations: int
    min_gain: int
    created_at: datetime
    finished_at: datetime | None


class PipelineDetailOut(PipelineOut):
    iterations: list[dict]
    stages: list[dict]
    lineage: list[dict]

    @staticmethod
    def resolve_iterations(pipeline: Pipeline) -> list[dict]:
        return queries.iteration_table(pipeline)

    @staticmethod
    def resolve_stages(pipeline: Pipeline) -> list[dict]:
        return queries.stages_of(pipeline)

    @staticmethod
    def resolve_lineage(pipeline: Pipeline) -> list[dict]:
        return lineage.pipeline_edges(pipeline)


class ErrorOut(Schema):
    detail: str
    field_errors: dict[str, list[str]]


def _visible(request, pipeline_id: int) -> Pipeline:
    return get_object_or_404(Pipeline.objects.visible_to(request.user), pk=pipeline_id)


@router.get("/", response=list[PipelineOut])
def list_pipelines(request):
    return Pipeline.objects.visible_to(request.user)[:200]


@router.post("/", response={201: PipelineDetailOut, 422: ErrorOut}, openapi_extra={"requestBody": {
    "required": True, "content": {"application/json": {"schema": actions.PipelineRequest.model_json_schema()}}}})
def launch_pipeline(request):
    """Launch an expert-iteration pipeline: pipelines.actions.PipelineRequest's fields, as the form takes them; each
    stage's launch fields are checked by the runs' launch contract. 422 with an error per field."""
    try:
        data = json.loads(request.body or b"{}")
    except ValueError as error:
        return 422, {"detail": "the body is not JSON", "field_errors": {"__all__": [f"not JSON: {error}"]}}
    if not isinstance(data, dict):
        return 422, {"detail": "the body is a JSON object of the pipeline's fields",
                     "field_errors": {"__all__": [f"expected an object, got {type(data).__name__}"]}}
    try:
        pipeline = actions.launch_pipeline(owner=request.user, request=data)
    except actions.LaunchError as error:
        return 422, {"detail": str(error), "field_errors": error.field_errors}
    return 201, pipeline


@router.get("/{pipeline_id}", response=PipelineDetailOut)
def pipeline_detail(request, pipeline_id: int):
    return _visible(request, pipeline_id)


@router.post("/{pipeline_id}/cancel", response=PipelineOut)
def cancel(request, pipeline_id: int):
    pipeline = _visible(request, pipeline_id)
    if not actions.cancel_pipeline(pipeline):
        raise HttpError(409, f"pipeline {pipeline.pk} is {pipeline.state}: only a running pipeline can be cancelled")
    pipeline.refresh_from_db()
    return pipeline


@router.post("/{pipeline_id}/retry", response=PipelineOut)
def retry(request, pipeline_id: int):
    pipeline = _visible(request, pipeline_id)
    if not actions.retry_stage(pipeline):
        raise HttpError(409, f"pipeline {pipeline.pk} is {pipeline.state}: only a failed pipeline's stage can be retried")
    pipeline.refresh_from_db()
    return pipeline


@router.get("/checkpoints/{checkpoint_id}/lineage", response=list[dict])
def checkpoint_lineage(request, checkpoint_id: int):
    """The checkpoint's ancestry, newest first: the run, data (corpus or promptset version) and start of each model."""
    checkpoint = get_object_or_404(Checkpoint.objects.filter(run__in=Run.objects.visible_to(request.user)),
                                   pk=checkpoint_id)
    return lineage.checkpoint_lineage(checkpoint)
