from __future__ import annotations

import io
import json
from datetime import datetime

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Router, Schema
from ninja.errors import HttpError

from runs import (
    actions,
    evaluation_results,
    group_launch,
    launch_contract,
    launch_plan,
    metrics_export,
    queries,
    run_groups,
)
from runs.checkpoint_files import download_response
from runs.live import writing_now
from runs.models import Run, RunGroup

router = Router(tags=["runs"])


class RunOut(Schema):
    id: int
    name: str
    kind: str
    state: str
    preset: str
    promptset_version_id: int
    current_step: int
    planned_steps: int | None  # where the run ends: its epochs or total_steps, whichever comes first
    failure_reason: str
    ray_job_id: str
    starting_checkpoint_id: int | None
    priority: int
    queue_reason: str
    infrastructure_retries: int  # automatic retries after a failure of the infrastructure (a launch field)
    config: dict
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_config(run: Run) -> dict:
        return run.public_config  # never the deployment's Lean server address or key


class AttemptOut(Schema):
    number: int
    placement: dict  # the latest placement event: what it waits for, or which node each actor is on
    ended_state: str
    cause: str  # why it failed: "infrastructure", "run" (its own code), "" where nobody said
    outcome: str  # how it ended, as the run page says it
    reason: str
    ended_at: datetime | None
    retry_at: datetime | None  # when the platform starts the next attempt by itself; null: no automatic retry


class RunDetailOut(RunOut):
    evaluation: dict | None  # the latest evaluation's pass@k curves with 95% intervals (runs/evaluation_results.py)
    attempts: list[AttemptOut]  # every attempt, oldest first

    @staticmethod
    def resolve_attempts(run: Run) -> list:
        return run.attempts_shown()

    @staticmethod
    def resolve_evaluation(run: Run) -> dict | None:
        return evaluation_results.latest_evaluation_report(run)


class LaunchErrorOut(Schema):
    detail: str
    field_errors: dict[str, list[str]]


def _visible(request, run_id: int) -> Run:
    return get_object_or_404(Run.objects.visible_to(request.user), pk=run_id)


@router.get("/", response=list[RunOut])
def list_runs(request):
    return Run.objects.visible_to(request.user)[:500]


class PassAtKOut(Schema):
    k: int | None
    pass_at_k: float | None


class RunSummaryOut(Schema):
    id: int
    url: str
    name: str
    state: str
    state_label: str
    preset: str
    model: str
    promptset_version: str
    kind: str
    kind_label: str
    step: int
    total_steps: int | None
    reward: float | None
    pass_at_k: PassAtKOut | None
    accuracy: float | None
    reward_series: list[float | None]
    accuracy_series: list[float | None]
    elapsed_s: float | None
    created_at: str


class StepValuesOut(Schema):
    step: int
    values: dict


class SeriesOut(Schema):
    metrics: list[StepValuesOut]
    evaluations: list[StepValuesOut]


@router.get("/summaries", response=list[RunSummaryOut])
def run_summaries(request, state: str = "", q: str = "", sort: str = ""):
    """The runs list's rows, for its live refresh: latest reward and accuracy, sparkline series, elapsed time."""
    runs = queries.filter_runs(Run.objects.visible_to(request.user).select_related("promptset_version__promptset"),
                               state=state, search=q, sort=sort)
    return queries.run_summaries(list(runs[:200]))


class LaunchSummaryOut(Schema):
    preset: str
    config: dict
    summary: list[dict]
    warnings: list[str] = []
    runs: dict | None = None  # a group launch (seeds or grid): how many runs it starts, and each one's name


@router.get("/launch-summary", response={200: LaunchSummaryOut, 422: LaunchErrorOut})
def launch_summary(request):
    """What a launch of these fields would do, before it is made: the resolved config and the launch page's summary
    (runs/launch_plan.py). The query holds launch fields (``?preset=cpu-demo&prompts_per_step=8``); a blank one
    is the preset's. With ``promptset_version_id``, ``warnings`` says what will not work on that promptset (problems
    the model cannot answer, prompts over the budget). Errors as the launch gives them, per field."""
    data = {key: value for key, value in request.GET.items() if value != ""}
    try:
        return 200, launch_plan.requested_summary(data, request.user)
    except launch_contract.LaunchError as error:
        return 422, {"detail": str(error), "field_errors": error.field_errors}


@router.get("/{run_id}/series", response=SeriesOut)
def run_series(request, run_id: int):
    """Every step's metrics and every evaluation, as JSON; ``/metrics.csv`` has the same records as CSV."""
    return queries.metric_series(_visible(request, run_id))


@router.get("/{run_id}/metrics.csv", response={200: None})
def run_metrics_csv(request, run_id: int):
    """The records of ``/series`` as CSV (runs/metrics_export.py): one row per step and per evaluation."""
    run = _visible(request, run_id)
    response = HttpResponse(metrics_export.metrics_csv(run), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-metrics.csv"'
    return response


class RunEventOut(Schema):
    id: int
    number: int
    type: str
    seq: int
    time: float
    payload: dict


class EventPageOut(Schema):
    events: list[RunEventOut]
    last_number: int
    has_more: bool
    state: str
    failure_reason: str
    dead_letters: int


@router.get("/{run_id}/events", response=EventPageOut)
def run_events(request, run_id: int, after: int = 0, limit: int = queries.EVENT_PAGE_LIMIT):
    """The run's events numbered after ``after`` (oldest first, at most 500 a page), with the run's state:
    what a watching page fetches when it sees a gap in the numbers, or to check it missed nothing."""
    run = _visible(request, run_id)
    if after < 0 or limit < 1:
        raise HttpError(422, f"after must be 0 or more and limit 1 or more; got after={after}, limit={limit}")
    # The last number first: an event stored after it is in the page or beyond, never skipped.
    last_number = queries.last_event_number(run.pk)
    events = queries.events_after(run.pk, after, limit)
    return {"events": events, "last_number": last_number,
            "has_more": bool(events) and events[-1]["number"] < last_number,
            "state": run.state, "failure_reason": run.failure_reason, "dead_letters": queries.dead_letter_count(run)}


@router.get("/{run_id}/writing")
def run_writing(request, run_id: int):
    """The run's answers still being written or checked, as last published (runs/live.py), for a page that
    opens mid-answer or missed pieces; the stored ones are the events'."""
    run = _visible(request, run_id)
    return {"answers": writing_now(run, lambda keys: queries.stored_rollout_keys(run.pk, keys))}


class WaitingOut(Schema):
    state: str
    reason: str


@router.get("/{run_id}/waiting", response=WaitingOut)
def run_waiting(request, run_id: int):
    """What a queued or starting run waits for (e.g. CPUs that another run holds); empty once it runs."""
    run = _visible(request, run_id)
    return {"state": run.state, "reason": queries.waiting_reason(run, request.user)}


@router.post("/", response={201: RunOut, 422: LaunchErrorOut}, openapi_extra={"requestBody": {
    "required": True, "content": {"application/json": {"schema": launch_contract.LaunchRequest.model_json_schema()}}}})
def launch_run(request):
    """Launch a run: the launch contract's fields only (runs/launch_contract.py), as the form takes them.

    A field the contract does not know, a value out of the preset's bounds, a model outside the
    registry or a checkpoint you may not see: 422, with an error per field.
    """
    try:
        data = json.loads(request.body or b"{}")
    except ValueError as error:
        return 422, {"detail": "the body is not JSON", "field_errors": {"__all__": [f"not JSON: {error}"]}}
    try:
        run = actions.launch_run(owner=request.user, request=data)
    except actions.NotVisible as error:
        if error.field == "starting_checkpoint_id" and isinstance(data, dict) and data.get("kind") == "eval":
            # An evaluation's checkpoint is what it evaluates: one you may not see is not found, as its page is.
            raise HttpError(404, str(error)) from None
        return 422, {"detail": str(error), "field_errors": error.field_errors}
    except actions.LaunchError as error:
        return 422, {"detail": str(error), "field_errors": error.field_errors}
    return 201, run


class GroupMemberOut(Schema):
    id: int
    name: str
    state: str
    seed: int | None
    cell: dict
    current_step: int


class RunGroupOut(Schema):
    id: int
    name: str
    url: str
    launch: dict
    grid: dict
    runs: list[GroupMemberOut]


def _group_out(group: RunGroup) -> dict:
    return {"id": group.pk, "name": group.name, "url": group.get_absolute_url(), "launch": group.launch,
            "grid": group.grid,
            "runs": [{"id": m["run"].pk, "name": m["run"].name, "state": m["run"].state, "seed": m["seed"],
                      "cell": m["cell"], "current_step": m["run"].current_step} for m in run_groups.members(group)]}


def _visible_group(request, group_id: int) -> RunGroup:
    return get_object_or_404(run_groups.visible_groups(request.user), pk=group_id)


def _owned_group(request, group_id: int) -> RunGroup:
    group = _visible_group(request, group_id)
    if not group.is_editable_by(request.user):
        raise HttpError(403, "only the group's owner can change it")
    return group


@router.post("/groups/", response={201: RunGroupOut, 422: LaunchErrorOut}, openapi_extra={"requestBody": {
    "required": True, "content": {"application/json": {"schema": group_launch.GroupLaunchRequest.model_json_schema()}}}})
def launch_group(request):
    """Launch a group: the launch contract's fields, plus ``seeds`` (runs of each configuration) and ``grid`` (launch
    field → values; every combination a cell). Each run is an ordinary run; a group larger than your concurrent-run
    limit, or with any run the single launch would refuse, is refused whole: 422, with an error per field."""
    try:
        data = json.loads(request.body or b"{}")
    except ValueError as error:
        return 422, {"detail": "the body is not JSON", "field_errors": {"__all__": [f"not JSON: {error}"]}}
    try:
        group = actions.launch_group(owner=request.user, request=data)
    except actions.LaunchError as error:
        return 422, {"detail": str(error), "field_errors": error.field_errors}
    return 201, _group_out(group)


@router.get("/groups/{group_id}", response=RunGroupOut)
def get_group(request, group_id: int):
    return _group_out(_visible_group(request, group_id))


@router.post("/groups/{group_id}/cancel", response=RunGroupOut)
def cancel_group(request, group_id: int):
    """Cancel every run of the group that has not ended."""
    group = _owned_group(request, group_id)
    actions.cancel_group(group)
    return _group_out(group)


@router.post("/groups/{group_id}/seeds", response={201: RunGroupOut, 422: LaunchErrorOut})
def add_group_seed(request, group_id: int):
    """One more run of each cell, on the next unused seed."""
    group = _owned_group(request, group_id)
    try:
        actions.launch_another_seed(group)
    except actions.LaunchError as error:
        return 422, {"detail": str(error), "field_errors": error.field_errors}
    return 201, _group_out(group)


@router.get("/groups/{group_id}/metrics.csv", response={200: None})
def group_metrics_csv(request, group_id: int):
    """Every run's records (as ``/{run_id}/metrics.csv``) in one table, each row with its run, seed and grid cell."""
    group = _visible_group(request, group_id)
    response = HttpResponse(metrics_export.group_metrics_csv(group), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="group-{group.pk}-metrics.csv"'
    return response


@router.get("/groups/{group_id}/metrics.parquet", response={200: None})
def group_metrics_parquet(request, group_id: int):
    """The CSV's table as Parquet."""
    group = _visible_group(request, group_id)
    out = io.BytesIO()
    metrics_export.group_metrics_parquet(group, out)
    response = HttpResponse(out.getvalue(), content_type="application/vnd.apache.parquet")
    response["Content-Disposition"] = f'attachment; filename="group-{group.pk}-metrics.parquet"'
    return response


@router.get("/{run_id}", response=RunDetailOut)
def get_run(request, run_id: int):
    return _visible(request, run_id)


@router.post("/{run_id}/cancel", response=RunOut)
def cancel_run(request, run_id: int):
    run = _visible(request, run_id)
    if not run.is_editable_by(request.user):
        raise HttpError(403, "only the run's owner can cancel it")
    if not actions.cancel_run(run):
        raise HttpError(409, f"the run has already ended ({run.state})")
    return run


@router.post("/{run_id}/resume", response=RunOut)
def resume_run(request, run_id: int):
    run = _visible(request, run_id)
    if not run.is_editable_by(request.user):
        raise HttpError(403, "only the run's owner can resume it")
    if not actions.resume_run(run):
        raise HttpError(409, f"only failed or cancelled runs can be resumed; this one is {run.state}")
    return run


class CheckpointOut(Schema):
    id: int
    step: int
    created_at: datetime
    removed_at: datetime | None
    removal_reason: str
    model_url: str | None
    checkpoint_url: str | None


@router.get("/{run_id}/checkpoints", response=list[CheckpointOut])
def list_checkpoints(request, run_id: int):
    run = _visible(request, run_id)
    def url(checkpoint, part):
        return f"/api/runs/{run.pk}/checkpoints/{checkpoint.step}/{part}.zip" if checkpoint.is_on_disk else None

    return [{"id": checkpoint.pk, "step": checkpoint.step, "created_at": checkpoint.created_at,
             "removed_at": checkpoint.removed_at, "removal_reason": checkpoint.removal_reason,
             "model_url": url(checkpoint, "model"), "checkpoint_url": url(checkpoint, "checkpoint")}
            for checkpoint in queries.checkpoints(run)]


@router.get("/{run_id}/checkpoints/{step}/{part}.zip", response={200: None})
def download_checkpoint(request, run_id: int, step: int, part: str):
    """The model (a Hugging Face folder) or the whole checkpoint, streamed as a zip."""
    try:
        return download_response(_visible(request, run_id), step, part)
    except Http404 as error:
        raise HttpError(404, str(error)) from None
