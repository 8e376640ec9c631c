"""Verbs on runs that span models or reach outside the database (Ray, Celery)."""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import F
from pydantic import ValidationError

from runs import cluster, ray_jobs, warm_start
from runs.models import Run, RunKind, RunState
from trainer import memory_plan
from trainer.config import RunConfig

logger = logging.getLogger(__name__)


class LaunchError(ValueError):
    """The run cannot be launched as asked; ``field_errors`` maps config paths to messages."""

    def __init__(self, message: str, field_errors: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.field_errors = field_errors or {}


def resolve_config(preset: str, overrides: dict) -> RunConfig:
    """The trainer's own schema decides what a valid run is; its errors come back per field."""
    try:
        config = RunConfig.from_preset(preset, overrides)
    except ValidationError as error:
        field_errors: dict[str, list[str]] = {}
        for problem in error.errors():
            path = ".".join(str(part) for part in problem["loc"]) or "__all__"
            message = problem["msg"].removeprefix("Value error, ")
            field_errors.setdefault(path, []).append(f"{message} (got {problem.get('input')!r})" if path != "__all__" else message)
        raise LaunchError("the run configuration is invalid", field_errors) from error
    except ValueError as error:
        raise LaunchError(str(error), {"preset": [str(error)]}) from error
    # Refused before any GPU is taken: a run whose rank would run out of GPU memory (trainer/memory_plan.py).
    memory_errors = memory_plan.check_fits_by_field(config)
    if memory_errors:
        raise LaunchError("the run would not fit in its GPUs' memory", memory_errors)
    return config


def launch_run(*, owner, name: str, promptset_version, preset: str, overrides: dict | None = None,
               kind: str = RunKind.RL, starting_checkpoint=None) -> Run:
    """Store a queued run with its resolved config and dispatch it once the row is committed.

    ``starting_checkpoint`` (a Checkpoint of an earlier run, typically a warm-start SFT run)
    becomes the model the run starts from, and the run records it as its lineage.
    """
    overrides = dict(overrides or {})
    if starting_checkpoint is not None:
        overrides["model"] = {**overrides.get("model", {}), "init_checkpoint": starting_checkpoint.model_folder}
    elif "init_checkpoint" not in overrides.get("model", {}):
        try:
            warm_started = warm_start.starting_model(preset)
        except ValueError as error:
            raise LaunchError(str(error), {"preset": [str(error)]}) from error
        if warm_started:
            overrides["model"] = {**overrides.get("model", {}), "init_checkpoint": warm_started}
    config = resolve_config(preset, overrides)
    config_json = config.to_json_dict()
    config_json["verifier"]["url"] = settings.LEAN_SERVER_URL
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, name=name, kind=kind, promptset_version=promptset_version, preset=preset,
            starting_checkpoint=starting_checkpoint,
            config=config_json, code_version=cluster.code_version(),
        )
        run.state_changes.create(state=RunState.QUEUED, reason="launched")
        transaction.on_commit(lambda: _enqueue_dispatch(run.pk, resume=False))
    return run


def cancel_run(run: Run, *, reason: str = "cancelled by its owner") -> bool:
    """Stop the Ray job (if any) and end the run as cancelled; False if it had already ended."""
    if not run.transition(RunState.CANCELLED, reason=reason):
        return False
    if run.ray_job_id:
        try:
            ray_jobs.stop(run.ray_job_id)
        except Exception as error:  # the run is cancelled either way; say why the job may linger
            logger.warning("could not stop Ray job %s of run %s: %s", run.ray_job_id, run.pk, error)
            run.state_changes.create(state=RunState.CANCELLED, reason=f"Ray did not confirm the stop: {error}")
    return True


def resume_run(run: Run) -> bool:
    """Queue a failed or cancelled run again; the trainer continues from its last checkpoint."""
    if not run.transition(RunState.QUEUED, reason="resumed from the last checkpoint"):
        return False
    transaction.on_commit(lambda: _enqueue_dispatch(run.pk, resume=True))
    return True


def _enqueue_dispatch(run_id: int, *, resume: bool) -> None:
    from runs.tasks import dispatch_run

    dispatch_run.delay(run_id, resume=resume)


def export_run_inputs(run: Run) -> None:
    """Write what the trainer reads: the resolved config and the promptset version's rows."""
    folder = run.artifacts_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(run.config, indent=2))
    partial = folder / "promptset.jsonl.partial"
    with partial.open("w") as out:
        for row in run.promptset_version.trainer_rows():
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    partial.replace(folder / "promptset.jsonl")  # atomic: the trainer never reads half a file


def dispatch(run_id: int, *, resume: bool) -> None:
    """Claim a queued run, export its inputs and submit it to Ray; any failure fails the run with the reason."""
    run = Run.objects.get(pk=run_id)
    if not run.transition(RunState.STARTING, reason="submitting to Ray", expected=(RunState.QUEUED,)):
        logger.info("run %s is no longer queued (%s); nothing to dispatch", run_id, run.state)
        return
    Run.objects.filter(pk=run_id).update(attempt=F("attempt") + 1)
    run.refresh_from_db()
    try:
        available = cluster.cluster_resources(settings.RAY_ADDRESS)
        problems = cluster.resource_problems(RunConfig.model_validate(run.config), available)
        if problems:
            run.mark_failed("the cluster cannot run this configuration: " + "; ".join(problems))
            return
        description = cluster.cluster_description(settings.RAY_ADDRESS)
        export_run_inputs(run)
        job_id = ray_jobs.submit(run, resume=resume)
    except Exception as error:
        run.mark_failed(f"could not submit the run to the Ray cluster at {settings.RAY_ADDRESS}: {error}")
        return
    Run.objects.filter(pk=run_id).update(ray_job_id=job_id, cluster=description)
    run.refresh_from_db()
    if run.state == RunState.CANCELLED:  # cancelled while we were submitting: stop what we just started
        ray_jobs.stop(job_id)

