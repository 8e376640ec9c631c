"""Verbs on runs that span models or reach outside the database (Ray, Celery)."""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Sum
from django.utils import timezone
from pydantic import ValidationError

from promptsets.export import run_input_rows
from promptsets.models import Promptset, PromptsetVersion
from runs import cluster, group_launch, launch_contract, ray_jobs, scheduling, warm_start
from runs.models import (
    FINAL_STATES, Attempt, AttemptCause, Checkpoint, LearnerPlan, RegisteredModel, Run, RunGroup, RunState,
    job_id_for,
)
from trainer.config import RunConfig
from trainer.memory import memory_fit

logger = logging.getLogger(__name__)


LaunchError = launch_contract.LaunchError
# A launch waits this long at most for the cluster's nodes; a head that takes longer is asked again at dispatch.
LAUNCH_CLUSTER_TIMEOUT_S = 3


def resolve_config(preset: str, overrides: dict) -> RunConfig:
    """The trainer's own schema decides what a valid run is, then the memory plan whether it fits; their errors
    come back per launch field."""
    config = schema_config(preset, overrides)
    # Refused before any GPU is taken: a run whose rank would run out of GPU memory (trainer/memory/memory_fit.py).
    memory_errors = memory_fit.check_fits_by_field(config, learner_plan=LearnerPlan.objects.for_config)
    if memory_errors:
        # On the launch field a person can change where there is one; else under the config's own name.
        by_field: dict[str, list[str]] = {}
        for path, messages in memory_errors.items():
            by_field.setdefault(launch_contract.FIELD_FOR_CONFIG_PATH.get(path, path), []).extend(messages)
        raise LaunchError("the run would not fit in its GPUs' memory", by_field)
    return config


def schema_config(preset: str, overrides: dict) -> RunConfig:
    """The preset with ``overrides``, as the trainer's schema validates it; LaunchError with its errors per launch
    field (the memory plan is resolve_config's, which the launch summary reports instead of raising)."""
    try:
        config = RunConfig.from_preset(preset, overrides)
    except ValidationError as error:
        field_errors: dict[str, list[str]] = {}
        for problem in error.errors():
            path = ".".join(str(part) for part in problem["loc"]) or "__all__"
            message = problem["msg"].removeprefix("Value error, ")
            field = launch_contract.FIELD_FOR_CONFIG_PATH.get(path, "__all__")
            shown = f"{path}: {message}" if field == "__all__" and path != "__all__" else message
            if path != "__all__" and field != "__all__":
                shown = f"{message} (got {problem.get('input')!r})"
            field_errors.setdefault(field, []).append(shown)
        raise LaunchError("the run configuration is invalid", field_errors) from error
    except ValueError as error:
        raise LaunchError(str(error), {"preset": [str(error)]}) from error
    return config


def check_resolved_config(config: RunConfig, *, owner, kind: str = "rl",
                          cluster_now: Callable[[], dict | None] | None = None) -> None:
    """Every check of the whole resolved configuration, in one place, before anything is stored.

    Checks that need the resolved config and its owner belong here: the owner's quota refuses a run
    that could never leave the queue. (The GPU memory plan, which needs the config alone, is
    resolve_config's last step, so the form's own validation refuses what will not fit too.)
    ``cluster_now`` gives the cluster's nodes (``launch_cluster_view``); a group launch passes one that asks once.
    """
    problem = scheduling.limit_problem(owner, cluster.gpus_used(config.cluster.num_gpus, kind))
    if problem:
        raise LaunchError(problem, {"preset": [problem]})
    available = (cluster_now or launch_cluster_view)()
    layout = cluster.layout_problems(config, available, kind) if available is not None else []
    if layout:
        raise LaunchError("no layout of the cluster's nodes can hold this run", {"preset": layout})


def cluster_within_reach(timeout_s: int) -> dict:
    """The live cluster's resources, raised to what its autoscaler can add (runs/cluster.py reachable_resources)."""
    return cluster.reachable_resources(
        cluster.cluster_resources(settings.RAY_ADDRESS, timeout_s=timeout_s),
        {"num_gpus": settings.RAY_AUTOSCALING_MAX_GPUS, "num_cpus": settings.RAY_AUTOSCALING_MAX_CPUS,
         "max_gpus_per_node": settings.RAY_AUTOSCALING_MAX_GPUS_PER_NODE})


def launch_cluster_view() -> dict | None:
    """The cluster's nodes as a launch checks a run's layout against them, or None where the cluster does not answer
    within LAUNCH_CLUSTER_TIMEOUT_S: such a cluster refuses nothing at launch (runs queue while a head restarts, and
    dispatch checks the run again, whole)."""
    try:
        return cluster_within_reach(LAUNCH_CLUSTER_TIMEOUT_S)
    except cluster.ClusterUnreachable as error:
        logger.info("launch: the Ray cluster did not answer (%s); dispatch checks the run's placement", error)
        return None


class NotVisible(LaunchError):
    """A launch names something by an id the caller may not see (or that does not exist: the same answer)."""

    def __init__(self, message: str, field: str):
        super().__init__(message, {field: [message]})
        self.field = field


def _visible_or_error(queryset, pk, field: str, what: str):
    found = queryset.filter(pk=pk).first()
    if found is None:
        # The same answer whether it does not exist or is someone else's: nothing to learn by guessing ids.
        raise NotVisible(f"no {what} with id {pk} that you may see", field)
    return found


def visible_promptset_version(user, pk) -> PromptsetVersion:
    """The promptset version ``pk`` if ``user`` may see it, else NotVisible on ``promptset_version_id``."""
    if not str(pk).isdigit():
        raise LaunchError("the promptset version is an id", {"promptset_version_id": [f"is a number (got {pk!r})"]})
    return _visible_or_error(
        PromptsetVersion.objects.filter(promptset__in=Promptset.objects.visible_to(user)).select_related("promptset"),
        int(pk), "promptset_version_id", "promptset version")


def trainer_row_count(version: PromptsetVersion) -> int:
    """The trainer's rows of ``version``: each problem repeated by its curation weight, as a run's epochs count them."""
    return version.entries.aggregate(rows=Sum("copies"))["rows"] or 0


def requested_overrides(request: launch_contract.LaunchRequest) -> dict:
    """The request's settings nested by config section, its model looked up in the registry (LaunchError if the
    registry has no enabled model of that name)."""
    overrides = launch_contract.overrides_for(request)
    if request.model is not None:
        registered = RegisteredModel.objects.filter(name=request.model, is_enabled=True).first()
        if registered is None:
            names = ", ".join(RegisteredModel.objects.filter(is_enabled=True).values_list("name", flat=True))
            raise LaunchError("unknown model", {"model": [f"{request.model!r} is not in the model registry; choose one of {names}"]})
        overrides["model"] = {"source": registered.source, "name_or_path": registered.name_or_path}
    return overrides


def launch_run(*, owner, request: launch_contract.LaunchRequest | dict,
               cluster_now: Callable[[], dict | None] | None = None) -> Run:
    """The one door every launch goes through (form, API, ``manage.py launch_run``).

    ``request`` holds only the launch contract's fields (runs/launch_contract.py); the rest comes from
    the preset and the deployment. The run is stored queued; the scheduler (runs/scheduling.py)
    dispatches it when its owner's quota has room. ``cluster_now``: see check_resolved_config.
    """
    if not isinstance(request, launch_contract.LaunchRequest):
        request = launch_contract.parse(request)
    promptset_version = visible_promptset_version(owner, request.promptset_version_id)
    starting_checkpoint = None
    if request.starting_checkpoint_id is not None:
        starting_checkpoint = _visible_or_error(Checkpoint.objects.filter(run__in=Run.objects.visible_to(owner)),
                                                request.starting_checkpoint_id, "starting_checkpoint_id", "checkpoint")
    overrides = requested_overrides(request)
    if starting_checkpoint is not None:
        overrides.setdefault("model", {})["init_checkpoint"] = starting_checkpoint.model_folder
    elif request.model is None:
        try:
            warm_started = warm_start.starting_model(request.preset)
        except ValueError as error:
            raise LaunchError(str(error), {"preset": [str(error)]}) from error
        if warm_started:
            overrides.setdefault("model", {})["init_checkpoint"] = warm_started
    # The deployment's, never the caller's: the shared Lean server's address and its concurrency.
    overrides["verifier"] = {"url": settings.LEAN_SERVER_URL}
    config = resolve_config(request.preset, overrides)
    check_resolved_config(config, owner=owner, kind=request.kind, cluster_now=cluster_now)
    trainer_rows = trainer_row_count(promptset_version)
    schedule_problems = launch_contract.schedule_problems(request, config, trainer_rows)
    if schedule_problems:
        raise LaunchError("the run's schedule cannot work as asked", schedule_problems)
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, name=request.name, kind=request.kind, promptset_version=promptset_version,
            preset=request.preset, starting_checkpoint=starting_checkpoint, config=config.to_json_dict(),
            code_version=cluster.code_version(), priority=scheduling.user_priority(owner),
            infrastructure_retries=request.infrastructure_retries,
        )
        run.state_changes.create(state=RunState.QUEUED, reason="launched")
        transaction.on_commit(scheduling.schedule_soon)
    return run


def launch_group(*, owner, request: group_launch.GroupRequest | dict) -> RunGroup:
    """Launch one configuration on several seeds, or a small grid with each cell on several seeds, as a RunGroup.

    Every member goes through ``launch_run``, so quotas, the queue and priorities apply run by run; the group is
    refused whole, in one transaction, when any member would be, or when it holds more runs than its owner may run
    at once (scheduling.group_size_problem)."""
    if not isinstance(request, group_launch.GroupRequest):
        request = group_launch.parse_group(request)
    problem = scheduling.group_size_problem(owner, len(request.members))
    if problem:
        raise LaunchError(problem, {"seeds": [problem]})
    shared = request.base.model_dump(exclude={"name", "seed"}, exclude_none=True, mode="json")
    cluster_now = functools.cache(launch_cluster_view)  # one question for the whole group, not one per member
    with transaction.atomic():
        group = RunGroup.objects.create(owner=owner, name=request.base.name, launch=shared, grid=request.grid)
        for member in request.members:
            run = launch_run(owner=owner, request=member.request, cluster_now=cluster_now)
            Run.objects.filter(pk=run.pk).update(run_group=group)
    return group


def launch_another_seed(group: RunGroup) -> list[Run]:
    """One more run of each of the group's cells, on the next seed none of its runs has used."""
    request = group_launch.parse_group({**group.launch, "name": group.name, "grid": group.grid})
    used = [Run(config=config).resolved_config.schedule.seed
            for config in group.runs.values_list("config", flat=True)]
    seed = max(used, default=request.members[0].seed - 1) + 1
    added = []
    cluster_now = functools.cache(launch_cluster_view)
    with transaction.atomic():
        for cell in request.cells:
            fields = {**group.launch, **cell, "seed": seed,
                      "name": group_launch.member_name(group.name, cell, seed)}
            run = launch_run(owner=group.owner, request=fields, cluster_now=cluster_now)
            Run.objects.filter(pk=run.pk).update(run_group=group)
            added.append(run)
    return added


def cancel_group(group: RunGroup) -> int:
    """Cancel every run of the group that has not ended; how many were cancelled."""
    return sum(cancel_run(run, reason="cancelled with its group") for run in group.runs.exclude(state__in=FINAL_STATES))


def cancel_run(run: Run, *, reason: str = "cancelled by its owner") -> bool:
    """End the run as cancelled and stop its current attempt's Ray job; False if it had already ended.

    The run is final once this returns; a stop Ray does not confirm is noted on the timeline
    and retried by the sweeper (``manage.py sweep_runs``), which stops every job whose run is final.
    """
    if not run.transition(RunState.CANCELLED, reason=reason):
        return False
    # The predictable id, not ray_job_id: a worker may have submitted the job without saving its id yet
    # (if it has not submitted it yet, it sees the run cancelled when it saves the id, and stops it).
    job_id = run.ray_job_id_of_attempt
    try:
        if ray_jobs.stop(job_id) and ray_jobs.status(job_id).state == "PENDING":
            # The run is cancelled all the same; the timeline says what the stop does not do yet.
            run.state_changes.create(state=RunState.CANCELLED, reason=ray_jobs.PENDING_STOP_NOTE.format(job_id=job_id))
    except ray_jobs.RayCallFailed as error:  # Ray did not answer, or RAY_ADDRESS is not an address at all
        logger.warning("could not stop Ray job %s of run %s: %s", job_id, run.pk, error)
        run.state_changes.create(state=RunState.CANCELLED,
                                 reason=f"Ray did not confirm the stop of {job_id}: {error}; the sweeper retries it")
    return True


def resume_run(run: Run) -> bool:
    """Queue a failed or cancelled run again as its next attempt; the trainer continues from its last
    checkpoint. The scheduler dispatches it when its owner's quota has room; its attempt (2 or more) says resume."""
    return run.transition(RunState.QUEUED, reason="resumed from the last checkpoint",
                          expected=(RunState.FAILED, RunState.CANCELLED))


def retry_run(run: Run) -> bool:
    """Start the next attempt of a run whose attempt failed because of the infrastructure, once its back-off has
    passed (``Attempt.retry_at``); False when there is nothing to retry now (not due yet, the run resumed or
    cancelled since, retried already). The attempt goes through the queue as a resume does: quotas apply."""
    failed = Attempt.objects.filter(run=run, number=run.attempt, retry_at__isnull=False).first()
    if failed is None or failed.retry_at > timezone.now():
        return False
    retry_number = Attempt.objects.filter(run=run, retry_at__isnull=False, number__lte=failed.number).count()
    return run.transition(
        RunState.QUEUED, expected=(RunState.FAILED,), attempt=failed.number,
        reason=f"retried automatically after a failure of the infrastructure (retry {retry_number} of "
               f"{run.infrastructure_retries}), from the last checkpoint")


def retry_due_runs() -> int:
    """Retry every failed run whose automatic retry is due (the sweeper's, each pass: the Celery message that
    would have done it may have been lost with a worker or the broker). How many were retried."""
    # The current attempt's row: a run retried before and failed since by its own code is not looked at again.
    due = Run.objects.filter(state=RunState.FAILED, attempts__number=F("attempt"), attempts__retry_at__lte=timezone.now())
    return sum(retry_run(run) for run in due)


@shared_task(name="runs.retry_run")
def retry_run_task(run_id: int, attempt: int) -> None:
    """The Celery task scheduled ``delay_s`` after an infrastructure failure; a run that moved on since is left."""
    run = Run.objects.filter(pk=run_id, attempt=attempt).first()
    if run is not None:
        retry_run(run)


def schedule_infrastructure_retry(sender, *, run_id: int, attempt: int, delay_s: float, **kwargs) -> None:
    """``infrastructure_retry_scheduled``'s listener (runs/signals.py): the next attempt, after the back-off."""
    try:
        retry_run_task.apply_async((run_id, attempt), countdown=delay_s)
    except Exception as error:  # noqa: BLE001 - kombu raises many kinds; the sweeper retries due runs either way
        logger.warning("could not schedule the automatic retry of run %s (the sweeper will start it): %s",
                       run_id, error)


def preempt_run(run: Run, *, reason: str = "preempted by an administrator") -> bool:
    """Stop a starting or running run and queue it again; it resumes from its last checkpoint.

    The cancel and resume machinery, one after the other: the job is stopped (the trainer keeps
    its checkpoints) and the run goes to the back of its priority in the queue, as its next attempt.
    """
    if run.state not in (RunState.STARTING, RunState.RUNNING):
        return False
    if not cancel_run(run, reason=f"{reason}; queued again to resume from its last checkpoint"):
        return False
    return run.transition(RunState.QUEUED, reason=f"re-queued after preemption ({reason})")


@shared_task(name="runs.dispatch_run")
def dispatch_run(run_id: int, resume: bool | None = None) -> None:
    """The Celery task that submits a queued run to Ray (``dispatch``). Defined here, beside what it runs,
    so that queueing it never imports back (runs/tasks.py lists it for Celery's autodiscovery).

    ``resume`` is ignored: whether the trainer resumes follows from the run's attempt. It is still
    accepted only so that messages queued by an older release (which sent it) are not refused.
    """
    dispatch(run_id)


def dispatch_admitted(sender, *, run_id: int, **kwargs) -> None:
    """``run_admitted``'s listener (runs/signals.py): the scheduler admitted the run; hand it to a worker."""
    enqueue_dispatch(run_id)


def enqueue_dispatch(run_id: int) -> bool:
    """Hand an admitted run to a Celery worker; whether the broker took it. A broker that is down leaves
    the run queued and admitted, not lost: the sweeper re-dispatches admitted runs queued for longer
    than SWEEP_QUEUED_AFTER_S. Only the scheduler (and the sweeper, for runs it admitted) calls this."""
    try:
        dispatch_run.delay(run_id)
    except Exception as error:  # noqa: BLE001 - kombu raises many kinds; the sweeper tries again either way
        logger.warning("could not enqueue the dispatch of run %s (the sweeper will retry): %s", run_id, error)
        return False
    return True


def export_run_inputs(run: Run) -> None:
    """Write what the trainer reads: the resolved config and the promptset version's rows, each with its problem's
    prior history on the platform (promptsets/export.py says which columns and whose verdicts)."""
    folder = run.artifacts_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(run.config, indent=2))
    partial = folder / "promptset.jsonl.partial"
    with partial.open("w") as out:
        for row in run_input_rows(run.promptset_version, run.owner, run.pk):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    partial.replace(folder / "promptset.jsonl")  # atomic: the trainer never reads half a file


def dispatch(run_id: int) -> None:
    """Claim a queued run the scheduler admitted, export its inputs and submit its current attempt to Ray;
    any failure fails the run with the reason. Attempt 2 onwards continues from the last checkpoint
    (ray_jobs.trainer_entrypoint). A run the scheduler has not admitted (or no longer has: it was queued
    again since this dispatch was sent) is left to the queue, so a stray dispatch never skips a pause or a quota."""
    run = Run.objects.get(pk=run_id)
    if not run.transition(RunState.STARTING, reason="submitting to Ray", expected=(RunState.QUEUED,),
                          where=Q(admitted_at__isnull=False)):
        logger.info("run %s is not an admitted queued run (%s); nothing to dispatch", run_id, run.state)
        return
    attempt = run.attempt
    try:
        if attempt > 1 and not _earlier_attempt_stopped(run):
            return
        timeout_s = max(1, int(settings.RAY_CALL_TIMEOUT_S))
        available = cluster_within_reach(timeout_s)
        problems = cluster.resource_problems(run.resolved_config, available, run.kind)
        if problems and _follows_an_infrastructure_failure(run):
            logger.warning("run %s attempt %s is submitted to a cluster short of what it asks for, which lost nodes "
                           "under its last attempt; its placement group waits for them: %s", run.pk, attempt,
                           "; ".join(problems))
        elif problems:
            run.mark_failed("the cluster cannot run this configuration: " + "; ".join(problems), attempt=attempt)
            return
        description = cluster.cluster_description(settings.RAY_ADDRESS, timeout_s=timeout_s)
        export_run_inputs(run)
        job_id = ray_jobs.submit(run)
    except Exception as error:  # noqa: BLE001 - whatever stops the submission, the run must fail saying it
        run.mark_failed(f"could not submit the run to the Ray cluster at {settings.RAY_ADDRESS}: {error}",
                        attempt=attempt)
        return
    saved = Run.objects.filter(pk=run_id, attempt=attempt, state__in=(RunState.STARTING, RunState.RUNNING)).update(
        ray_job_id=job_id, cluster=description)
    if not saved:  # cancelled (or resumed again) while we were submitting: stop what we just started
        _stop_quietly(run, job_id)


def _follows_an_infrastructure_failure(run: Run) -> bool:
    """Whether the run's last attempt ended by a failure of the infrastructure (a node lost). Its next attempt
    meets a cluster short of the nodes it lost, often for a while (a node restarting, an autoscaler's replacement
    booting): a shortfall then is not a configuration the cluster can never run (the launch checked it against
    the whole cluster), so the attempt is submitted and its placement group waits for the nodes, as the run's page
    says (what it wants, each node's free GPUs, a cancel); failing it would spend the retry the failure earned."""
    return Attempt.objects.filter(run=run, number=run.attempt - 1, cause=AttemptCause.INFRASTRUCTURE).exists()


def _earlier_attempt_stopped(run: Run, wait_s: float = 30.0) -> bool:
    """Make sure the previous attempt's job has ended before this one starts (a cancel followed at
    once by a resume): two attempts must never train, or write the run's folder, at the same time.
    Fails the run and returns False if it will not end."""
    previous = job_id_for(run.pk, run.attempt - 1)
    if ray_jobs.status(previous).is_terminal:
        return True
    ray_jobs.stop(previous)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if ray_jobs.status(previous).is_terminal:
            return True
        time.sleep(1)
    run.mark_failed(f"the previous attempt's Ray job {previous} did not stop within {wait_s:.0f} s, and two attempts "
                    "must not train at once; resume the run again once Ray shows that job stopped",
                    attempt=run.attempt)
    return False


def _stop_quietly(run: Run, job_id: str) -> None:
    try:
        ray_jobs.stop(job_id)
    except ray_jobs.RayCallFailed as error:
        logger.warning("could not stop Ray job %s of run %s (the sweeper will retry): %s", job_id, run.pk, error)
